//===- WarpgroupMma.cpp - Hopper's TMA boxes and wgmma operands -----------===//

#include "Codegen/GPU/WarpgroupMma.h"
#include "Codegen/GPU/GpuLoops.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include "llvm/ADT/StringExtras.h"

using namespace mlir;
using namespace mlir::loom;

bool loom::isTensorMapReadable(Value operand) {
  auto type = cast<MemRefType>(operand.getType());
  return type.getRank() >= 2 && type.getRank() <= 5 && type.hasStaticShape() &&
         type.getElementTypeBitWidth() == 16 && isAlignedRun(operand, 8);
}

MemRefType loom::boxType(Value operand, int64_t rows) {
  auto type = cast<MemRefType>(operand.getType());
  SmallVector<int64_t> shape(type.getRank() - 2, 1);
  shape.append({rows, kRowElements});
  return MemRefType::get(shape, type.getElementType(),
                         MemRefLayoutAttrInterface(),
                         gpu::AddressSpaceAttr::get(type.getContext(),
                                                    gpu::AddressSpace::Workgroup));
}

Value loom::createTensorMap(OpBuilder &b, Location loc, Value operand,
                            int64_t rows) {
  auto type = cast<MemRefType>(operand.getType());
  MemRefType box = boxType(operand, rows);
  auto mapType = nvgpu::TensorMapDescriptorType::get(
      b.getContext(), box, nvgpu::TensorMapSwizzleKind::SWIZZLE_128B,
      nvgpu::TensorMapL2PromoKind::L2PROMO_NONE,
      nvgpu::TensorMapOOBKind::OOB_ZERO,
      nvgpu::TensorMapInterleaveKind::INTERLEAVE_NONE);
  Value unranked = memref::CastOp::create(
      b, loc, UnrankedMemRefType::get(type.getElementType(), Attribute()),
      operand);
  IndexMath im{loc};
  SmallVector<Value> extents;
  for (int64_t extent : box.getShape())
    extents.push_back(im.cst(b, extent));
  return nvgpu::TmaCreateDescriptorOp::create(b, loc, mapType, unranked,
                                              extents);
}

Value loom::matrixDescriptor(OpBuilder &b, Location loc, Value address,
                             int64_t leadingBytes, int64_t strideBytes) {
  Type i64 = b.getI64Type();
  auto constant = [&](uint64_t v) -> Value {
    return arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(v));
  };
  Value start = arith::AndIOp::create(
      b, loc,
      arith::ShRUIOp::create(
          b, loc, arith::IndexCastUIOp::create(b, loc, i64, address),
          constant(4)),
      constant(0x3fff));
  uint64_t fields = ((uint64_t(leadingBytes) >> 4) << 16) |
                    ((uint64_t(strideBytes) >> 4) << 32) | (uint64_t(1) << 62);
  return arith::OrIOp::create(b, loc, start, constant(fields));
}

Value loom::advanceDescriptor(OpBuilder &b, Location loc, Value descriptor,
                              int64_t bytes) {
  if (!bytes)
    return descriptor;
  return arith::AddIOp::create(
      b, loc, descriptor,
      arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(bytes >> 4)));
}

Value loom::phaseParity(OpBuilder &b, const IndexMath &im, Value use) {
  return arith::TruncIOp::create(
      b, im.loc, b.getI1Type(),
      arith::IndexCastUIOp::create(b, im.loc, b.getI64Type(), use));
}

LLVM::InlineAsmOp loom::inlinePtx(OpBuilder &b, Location loc, TypeRange results,
                                  ValueRange operands, StringRef ptx,
                                  StringRef constraints) {
  return LLVM::InlineAsmOp::create(
      b, loc, results, operands, ptx, constraints,
      /*has_side_effects=*/true, /*is_align_stack=*/false,
      LLVM::tailcallkind::TailCallKind::None,
      LLVM::AsmDialectAttr::get(b.getContext(), LLVM::AsmDialect::AD_ATT),
      ArrayAttr());
}

Value loom::warpgroupMmaRegisterA(OpBuilder &b, Location loc, Type element,
                                 Value accs, ValueRange a, Value bDescriptor,
                                 int64_t n, bool nMajorB) {
  auto type = cast<LLVM::LLVMStructType>(accs.getType());
  int64_t count = type.getBody().size();
  assert(count == n / 2 && a.size() == 4 && "an m64nNk16 wgmma's operands");
  // The accumulators are tied in and out (`=f` and their numbers), then
  // A's 4 registers and B's descriptor; scale-d 1 (accumulate), A and B
  // unscaled, B's transpose bit from its layout.
  SmallVector<Value> operands;
  std::string accumulators, constraints;
  for (int64_t i = 0; i < count; ++i) {
    operands.push_back(LLVM::ExtractValueOp::create(b, loc, accs, i));
    accumulators += (i ? ", $" : "$") + std::to_string(i);
    constraints += "=f,";
  }
  for (int64_t i = 0; i < count; ++i)
    constraints += std::to_string(i) + ",";
  for (Value reg : a)
    operands.push_back(registerWord(b, loc, reg));
  operands.push_back(bDescriptor);
  constraints += "r,r,r,r,l";
  StringRef types = element.isBF16() ? "bf16" : "f16";
  int64_t first = 2 * count;
  std::string ptx = "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                    "wgmma.mma_async.sync.aligned.m64n" +
                    std::to_string(n) + "k16.f32." + types.str() + "." +
                    types.str() + " {" + accumulators + "}, {$" +
                    std::to_string(first) + ", $" + std::to_string(first + 1) +
                    ", $" + std::to_string(first + 2) + ", $" +
                    std::to_string(first + 3) + "}, $" +
                    std::to_string(first + 4) + ", p, 1, 1, " +
                    (nMajorB ? "1" : "0") + ";\n}\n";
  return inlinePtx(b, loc, type, operands, ptx, constraints).getResult(0);
}

void loom::namedBarrierOfWarpgroup(OpBuilder &b, Location loc, Value warpgroup,
                                   StringRef instruction, int firstId,
                                   int secondId, int threads) {
  auto barrier = [&](OpBuilder &then, int id) {
    inlinePtx(then, loc, TypeRange(), ValueRange(),
              (instruction + " " + Twine(id) + ", " + Twine(threads) + ";").str(),
              "~{memory}");
    scf::YieldOp::create(then, loc);
  };
  Value first = arith::CmpIOp::create(
      b, loc, arith::CmpIPredicate::eq, warpgroup,
      arith::ConstantIndexOp::create(b, loc, 0));
  scf::IfOp::create(
      b, loc, first, [&](OpBuilder &then, Location) { barrier(then, firstId); },
      [&](OpBuilder &otherwise, Location) { barrier(otherwise, secondId); });
}

Value loom::registerWord(OpBuilder &b, Location loc, Value reg) {
  Type i32 = b.getI32Type();
  if (reg.getType() == i32)
    return reg;
  return LLVM::BitcastOp::create(b, loc, i32, reg);
}

SmallVector<Value> loom::pinRegisters(OpBuilder &b, Location loc,
                                      ValueRange values) {
  std::string outputs, tied;
  SmallVector<Type> types;
  for (auto [i, v] : llvm::enumerate(values)) {
    assert((v.getType().isF32() || v.getType().isInteger(32)) &&
           "f32 or i32 registers");
    outputs += v.getType().isF32() ? "=f," : "=r,";
    tied += (i ? "," : "") + std::to_string(i);
    types.push_back(v.getType());
  }
  auto type = LLVM::LLVMStructType::getLiteral(b.getContext(), types);
  Value pinned = inlinePtx(b, loc, type, values, "", outputs + tied).getResult(0);
  SmallVector<Value> results;
  for (int64_t i = 0, e = values.size(); i < e; ++i)
    results.push_back(LLVM::ExtractValueOp::create(b, loc, pinned, i));
  return results;
}
