//===- LoomVjpInterface.h - Reverse-mode rules of loom ops ------*- C++ -*-===//

#ifndef LOOM_IR_LOOMVJPINTERFACE_H
#define LOOM_IR_LOOMVJPINTERFACE_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpDefinition.h"

#include "Loom/IR/LoomVjpInterface.h.inc"

#endif // LOOM_IR_LOOMVJPINTERFACE_H
