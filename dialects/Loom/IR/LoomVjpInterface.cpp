//===- LoomVjpInterface.cpp - The VJP interface's generated definitions ---===//

#include "Loom/IR/LoomVjpInterface.h"

#include "Loom/IR/LoomVjpInterface.cpp.inc"
