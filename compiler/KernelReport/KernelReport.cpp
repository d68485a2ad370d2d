//===- KernelReport.cpp - loomc --kernel-report: what GPU launches cost ---===//

#include "KernelReport/KernelReport.h"
#include "KernelReport/Ptxas.h"

#include "Codegen/Common/MatmulLike.h"
#include "Loom/IR/LoomDialect.h"
#include "Loom/IR/LoomOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Interfaces/CastInterfaces.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/Regex.h"

#include <algorithm>

using namespace mlir;
using ::loom::KernelReport;

namespace {
/// The name of the location tag countWork puts on op number N.
constexpr llvm::StringLiteral kTag = "loom.work.";

/// The bytes of a statically shaped buffer; 0 for anything else.
int64_t bytesOf(Type type) {
  auto memref = dyn_cast<MemRefType>(type);
  if (!memref || !memref.hasStaticShape())
    return 0;
  Type element = memref.getElementType();
  int64_t bits = element.isIntOrFloat() ? element.getIntOrFloatBitWidth() : 64;
  return memref.getNumElements() * ((bits + 7) / 8);
}

/// The FLOPs of one iteration of a linalg body: every arith or math op on
/// floats counts 1 (an fma 2), so a multiply-add contraction counts 2 per
/// (m, n, k); constants, casts and selects count nothing.
int64_t flopsPerIteration(Block &body) {
  int64_t flops = 0;
  body.walk([&](Operation *op) {
    Dialect *dialect = op->getDialect();
    if (!isa_and_nonnull<arith::ArithDialect, math::MathDialect>(dialect) ||
        op->hasTrait<OpTrait::ConstantLike>() || isa<CastOpInterface>(op) ||
        isa<arith::SelectOp>(op))
      return;
    auto isFloat = [](Type type) {
      return isa<FloatType>(getElementTypeOrSelf(type));
    };
    if (llvm::any_of(op->getOperandTypes(), isFloat) ||
        llvm::any_of(op->getResultTypes(), isFloat))
      flops += isa<math::FmaOp>(op) ? 2 : 1;
  });
  return flops;
}

/// The work indices tagged in `loc`, in order.
void collectTags(Location loc, SmallVectorImpl<unsigned> &tags) {
  loc->walk([&](Location nested) {
    if (auto name = dyn_cast<NameLoc>(nested)) {
      StringRef text = name.getName().getValue();
      unsigned index;
      if (text.consume_front(kTag) && !text.getAsInteger(10, index))
        tags.push_back(index);
    }
    return WalkResult::advance();
  });
}

bool isWorkgroup(MemRefType type) {
  auto space = dyn_cast_or_null<gpu::AddressSpaceAttr>(type.getMemorySpace());
  return space && space.getValue() == gpu::AddressSpace::Workgroup;
}
} // namespace

/// The work of an attention kernel (a func marked loom.gpu_attention,
/// which the GPU runs as one launch, or two for the backward): the
/// products it computes over the (query, key) pairs (causal: those on or
/// below the diagonal), each operand read and each result written once.
/// The forward computes the scores and P V. The backward's query side
/// computes the scores, dp and dq, its key side the scores, dp, dk and dv
/// (attentionFlops' total), each side reading q, k, v and dO. The body,
/// the CPU's blocked loops, does not count.
static std::optional<KernelReport::Work> attentionWork(func::FuncOp kernel,
                                                        const ::loom::DeviceSpec &device) {
  auto mark = kernel->getAttrOfType<DictionaryAttr>(mlir::loom::attr::kGpuAttention);
  if (!mark)
    return std::nullopt;
  auto typeAt = [&](StringRef field) -> MemRefType {
    auto position = mark.getAs<IntegerAttr>(field);
    if (!position || position.getInt() >= kernel.getNumArguments())
      return {};
    return dyn_cast<MemRefType>(kernel.getArgument(position.getInt()).getType());
  };
  MemRefType q = typeAt("query"), k = typeAt("key"), v = typeAt("value");
  if (!q || !k || !v || !q.hasStaticShape() || !k.hasStaticShape() ||
      !v.hasStaticShape() || q.getRank() < 2)
    return std::nullopt;
  int64_t features = q.getShape().back(), valueFeatures = v.getShape().back();
  bool causal = mark.contains("causal");
  double pairs = mlir::loom::attentionPairs(q.getShape(), k.getShape(), causal);
  // Products of `depth` multiply-adds a pair, on tensor cores, moving `bytes`.
  auto products = [&](double depth, int64_t bytes) {
    KernelReport::Work work;
    work.flops = work.contractionFlops = static_cast<int64_t>(2 * pairs * depth);
    work.tensorTflops = device.tensorTflops16;
    work.bytes = bytes;
    return work;
  };
  int64_t outputBytes = bytesOf(q) / features * valueFeatures;
  int64_t inputBytes = bytesOf(q) + bytesOf(k) + bytesOf(v);
  if (!mark.contains("result_grad"))
    return products(features + valueFeatures, inputBytes + outputBytes);
  // dO (the output's size) in; dq out, or dk and dv.
  KernelReport::Work querySide = products(2 * features + valueFeatures,
                                          inputBytes + outputBytes + bytesOf(q));
  KernelReport::Work keySide = products(2 * features + 2 * valueFeatures,
                                        inputBytes + outputBytes + bytesOf(k) + bytesOf(v));
  KernelReport::Work work = products(4 * features + 3 * valueFeatures,
                                     querySide.bytes + keySide.bytes);
  work.launchParts = {querySide, keySide};
  return work;
}

void KernelReport::countWork(ModuleOp kernels) {
  MLIRContext *context = kernels.getContext();
  kernels.walk<WalkOrder::PreOrder>([&](Operation *op) {
    Work counted;
    bool attention = false;
    if (auto kernel = dyn_cast<func::FuncOp>(op)) {
      std::optional<Work> work = attentionWork(kernel, device);
      if (!work)
        return WalkResult::advance();
      counted = *work;
      attention = true;
    } else if (auto linalgOp = dyn_cast<linalg::LinalgOp>(op)) {
      int64_t iterations = 1;
      for (int64_t range : linalgOp.getStaticLoopRanges())
        iterations = ShapedType::isDynamic(range) ? 0 : iterations * range;
      counted.flops = iterations * flopsPerIteration(*linalgOp.getBlock());
      // Each operand moves once; an output the body reads (an accumulator)
      // is read and written.
      for (OpOperand *input : linalgOp.getDpsInputOperands())
        counted.bytes += bytesOf(input->get().getType());
      for (OpOperand &init : linalgOp.getDpsInitsMutable())
        counted.bytes += bytesOf(init.get().getType()) *
                         (linalgOp.isInitTensor(&init) ? 2 : 1);
      auto generic = dyn_cast<linalg::GenericOp>(op);
      if (generic && mlir::loom::isMatmulLike(generic)) {
        counted.contractionFlops = counted.flops;
        Type element =
            getElementTypeOrSelf(generic.getDpsInputs()[0].getType());
        counted.tensorTflops = element.isBF16() || element.isF16()
                                   ? device.tensorTflops16
                               : element.isF32() ? device.tensorTflopsTf32
                                                 : 0;
      }
    } else if (auto copy = dyn_cast<memref::CopyOp>(op)) {
      counted.bytes = bytesOf(copy.getSource().getType()) +
                      bytesOf(copy.getTarget().getType());
    } else {
      return WalkResult::advance();
    }
    // The GPU passes build launches, loops, loads and stores at the op's
    // location, so the tag survives into the launches that run it.
    op->setLoc(
        NameLoc::get(StringAttr::get(context, kTag + llvm::Twine(work.size())),
                     op->getLoc()));
    work.push_back(counted);
    return attention ? WalkResult::skip() : WalkResult::advance();
  });
}

void KernelReport::readLaunches(ModuleOp gpu) {
  for (auto host : gpu.getOps<func::FuncOp>()) {
    std::vector<Launch> &list = launches[host.getSymName()];
    llvm::DenseMap<unsigned, int> given; // per tag, the launches given it
    host.walk([&](gpu::LaunchFuncOp op) {
      Launch launch;
      launch.function = op.getKernelModuleName().str();
      auto read = [](gpu::KernelDim3 dims, std::array<int64_t, 3> &out) {
        Value parts[3] = {dims.x, dims.y, dims.z};
        for (int i = 0; i < 3; ++i)
          out[i] = getConstantIntValue(parts[i]).value_or(0);
      };
      read(op.getGridSizeOperandValues(), launch.grid);
      read(op.getBlockSizeOperandValues(), launch.block);
      if (op.hasClusterSize())
        read(op.getClusterSizeOperandValues(), launch.cluster);
      if (Value dynamic = op.getDynamicSharedMemorySize())
        launch.dynamicSharedBytes = getConstantIntValue(dynamic).value_or(0);
      llvm::SmallDenseSet<Value> buffers;
      for (Value operand : op.getKernelOperands()) {
        // A TMA tensor map (wgmma matmuls) stands for the operand it reads.
        if (auto map = operand.getDefiningOp<nvgpu::TmaCreateDescriptorOp>())
          if (auto cast = map.getTensor().getDefiningOp<memref::CastOp>())
            operand = cast.getSource();
        if (buffers.insert(operand).second)
          launch.bufferBytes += bytesOf(operand.getType());
      }

      // The launch and the ops of its kernel carry the tags of the linalg
      // ops it runs; constants do not count, since folding merges equal
      // constants of several ops into one.
      SmallVector<unsigned> tags;
      collectTags(op.getLoc(), tags);
      auto kernel = SymbolTable::lookupNearestSymbolFrom<gpu::GPUFuncOp>(
          op, op.getKernel());
      if (kernel) {
        for (BlockArgument buffer : kernel.getWorkgroupAttributions())
          launch.sharedBytes += bytesOf(buffer.getType());
        llvm::StringSet<> globals;
        kernel.walk([&](Operation *inner) {
          if (auto global = dyn_cast<memref::GetGlobalOp>(inner))
            if (isWorkgroup(global.getType()) &&
                globals.insert(global.getName()).second)
              launch.sharedBytes += bytesOf(global.getType());
          if (!inner->hasTrait<OpTrait::ConstantLike>())
            collectTags(inner->getLoc(), tags);
        });
      }
      llvm::SmallDenseSet<unsigned> runs; // a tag once a launch
      for (unsigned tag : tags) {
        if (tag >= work.size() || !runs.insert(tag).second)
          continue;
        int parts = static_cast<int>(work[tag].launchParts.size());
        int &count = given[tag];
        if (count == 0 || count < parts)
          launch.work.push_back({tag, parts ? count : -1});
        ++count;
      }
      list.push_back(std::move(launch));
    });
  }
}

LogicalResult KernelReport::readPtx(llvm::StringRef ptx, Location loc) {
  // Each `.entry NAME(` starts a function that ends where the next starts.
  SmallVector<std::pair<StringRef, size_t>> entries;
  for (size_t at = ptx.find(".entry "); at != StringRef::npos;
       at = ptx.find(".entry ", at + 1)) {
    size_t name = at + strlen(".entry ");
    entries.push_back({ptx.slice(name, ptx.find('(', name)).trim(), at});
  }
  for (auto [i, entry] : llvm::enumerate(entries)) {
    size_t end = i + 1 < entries.size() ? entries[i + 1].second : ptx.size();
    StringRef body = ptx.slice(entry.second, end);
    functions[entry.first].tensorCores =
        body.contains("mma.sync") || body.contains("wgmma.mma_async");
  }
  if (ptxas.empty())
    return success();

  FailureOr<AssembledPtx> assembled = assemblePtx(ptxas, archName, ptx, {"-v"}, loc);
  if (failed(assembled))
    return failure();
  StringRef output = assembled->log;

  // ptxas -v prints, per entry function:
  //   Compiling entry function 'NAME' for 'sm_90a'
  //   Function properties for NAME
  //       0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
  //   Used 31 registers, used 1 barriers, 1024 bytes smem, ...
  llvm::Regex entry("Compiling entry function '([^']+)'"),
      properties("Function properties for ([^ \t]+)"),
      spills("([0-9]+) bytes spill stores, ([0-9]+) bytes spill loads"),
      used("Used ([0-9]+) registers"), smem("([0-9]+) bytes smem");
  Function *current = nullptr;
  SmallVector<StringRef> lines, match;
  output.split(lines, '\n');
  for (StringRef line : lines) {
    // What ptxas ignored or warns about (a setmaxnreg without a register
    // cap at entry, C7508, or a .minnctapersm without .maxntid) costs
    // speed silently: the report says so.
    if (line.contains("warning") || line.contains("Performance Loss"))
      emitWarning(loc) << "ptxas: " << line.trim();
    if (entry.match(line, &match) || properties.match(line, &match)) {
      auto found = functions.find(match[1]);
      current = found == functions.end() ? nullptr : &found->second;
      if (current)
        current->assembled = true;
      continue;
    }
    if (!current)
      continue;
    if (spills.match(line, &match)) {
      match[1].getAsInteger(10, current->spillStores);
      match[2].getAsInteger(10, current->spillLoads);
    }
    if (used.match(line, &match))
      match[1].getAsInteger(10, current->registers);
    if (smem.match(line, &match))
      match[1].getAsInteger(10, current->sharedBytes);
  }
  return success();
}

/// One launch with its occupancy and roofline on the report's GPU.
struct KernelReport::Row {
  const Launch *launch;
  const Function *function; // null when the PTX has no such entry
  int64_t threads = 1, sharedBytes = 0, flops = 0, tensorFlops = 0, bytes = 0;
  ::loom::Occupancy occupancy;
  double seconds = 0;
  bool computeBound = false;
};

KernelReport::Row KernelReport::evaluate(const Launch &launch) const {
  Row row;
  row.launch = &launch;
  auto found = functions.find(launch.function);
  row.function = found == functions.end() ? nullptr : &found->second;
  bool assembled = row.function && row.function->assembled;
  for (int64_t size : launch.block)
    row.threads *= size;
  // ptxas knows the shared memory after alignment; the IR before it.
  row.sharedBytes = (assembled ? row.function->sharedBytes : launch.sharedBytes) +
                    launch.dynamicSharedBytes;
  row.occupancy = computeOccupancy(
      arch,
      {row.threads, assembled ? row.function->registers : 0, row.sharedBytes});

  // Tensor-core FLOPs at the dense tensor peak of their operand type, the
  // rest at the f32 SIMT peak; memory at the device bandwidth.
  double compute = 0;
  for (auto [index, part] : launch.work) {
    const Work &w = part < 0 ? work[index] : work[index].launchParts[part];
    int64_t tensor =
        row.function && row.function->tensorCores && w.tensorTflops > 0
            ? w.contractionFlops
            : 0;
    row.flops += w.flops;
    row.tensorFlops += tensor;
    row.bytes += w.bytes;
    if (tensor)
      compute += tensor / (w.tensorTflops * 1e12);
    compute += (w.flops - tensor) / (device.f32Tflops * 1e12);
  }
  // A launch running several ops (a matmul with its fill and epilogue, a
  // row's stages) moves each of its buffers once: the ops' own counts
  // would charge it for intermediates it never touches in global memory.
  if (launch.work.empty() || launch.work.size() > 1)
    row.bytes = launch.bufferBytes;
  double memory = row.bytes / (device.bandwidthGBs * 1e9);
  row.seconds = std::max(compute, memory);
  row.computeBound = compute > memory;
  return row;
}

namespace {
std::string dims(const std::array<int64_t, 3> &d) {
  return llvm::formatv("{0}x{1}x{2}", d[0], d[1], d[2]).str();
}

/// Totals of one program.
struct Totals {
  int64_t launches = 0, flops = 0, tensorFlops = 0, bytes = 0, spillBytes = 0;
  int64_t computeBound = 0;
  double seconds = 0;
  llvm::StringSet<> kernels;
};
} // namespace

void KernelReport::print(llvm::raw_ostream &os, KernelReportFormat format,
                         llvm::ArrayRef<ReportedProgram> programs) const {
  bool haveRegisters = !ptxas.empty();
  auto forEachRow =
      [&](const ReportedProgram &program,
          llvm::function_ref<void(llvm::StringRef, const Row &)> fn) {
        for (const std::string &kernel : program.kernels) {
          auto found = launches.find(kernel);
          if (found == launches.end())
            continue;
          for (const Launch &launch : found->second)
            fn(kernel, evaluate(launch));
        }
      };
  auto add = [](Totals &totals, llvm::StringRef kernel, const Row &row) {
    ++totals.launches;
    totals.kernels.insert(kernel);
    totals.flops += row.flops;
    totals.tensorFlops += row.tensorFlops;
    totals.bytes += row.bytes;
    totals.seconds += row.seconds;
    totals.computeBound += row.computeBound;
    if (row.function)
      totals.spillBytes += row.function->spillStores + row.function->spillLoads;
  };
  auto share = [](int64_t part, int64_t whole) {
    return whole ? 100.0 * part / whole : 0.0;
  };

  if (format == KernelReportFormat::Json) {
    llvm::json::OStream json(os, 2);
    json.object([&] {
      json.attributeObject("device", [&] {
        json.attribute("name", device.name);
        json.attribute("description", device.description);
        json.attribute("arch", device.arch);
        json.attribute("sms", device.sms);
        json.attribute("boost_clock_mhz", device.boostClockMHz);
        json.attribute("tensor_tflops_16bit", device.tensorTflops16);
        json.attribute("tensor_tflops_tf32", device.tensorTflopsTf32);
        json.attribute("f32_tflops", device.f32Tflops);
        json.attribute("bandwidth_gbs", device.bandwidthGBs);
      });
      json.attributeObject("arch", [&] {
        json.attribute("name", archName);
        json.attribute("row", arch.name);
        json.attribute("max_threads_per_block", arch.maxThreadsPerBlock);
        json.attribute("max_threads_per_sm", arch.maxThreadsPerSM);
        json.attribute("max_warps_per_sm", arch.maxWarpsPerSM);
        json.attribute("max_blocks_per_sm", arch.maxBlocksPerSM);
        json.attribute("registers_per_sm", arch.registersPerSM);
        json.attribute("max_registers_per_block", arch.maxRegistersPerBlock);
        json.attribute("max_registers_per_thread", arch.maxRegistersPerThread);
        json.attribute("shared_bytes_per_sm", arch.sharedBytesPerSM);
        json.attribute("max_shared_bytes_per_block",
                       arch.maxSharedBytesPerBlock);
        json.attribute("reserved_shared_bytes_per_block",
                       arch.reservedSharedBytesPerBlock);
        json.attribute("register_allocation_unit", arch.registerAllocationUnit);
        json.attribute("warp_allocation_granularity",
                       arch.warpAllocationGranularity);
        json.attribute("shared_allocation_unit", arch.sharedAllocationUnit);
      });
      if (haveRegisters)
        json.attribute("ptxas", ptxas);
      else
        json.attribute("ptxas", nullptr);
      json.attributeArray("programs", [&] {
        for (const ReportedProgram &program : programs) {
          Totals totals;
          json.object([&] {
            json.attribute("name", program.name);
            json.attribute("ranks", program.ranks);
            json.attributeArray("launches", [&] {
              forEachRow(program, [&](llvm::StringRef kernel, const Row &row) {
                add(totals, kernel, row);
                bool assembled = row.function && row.function->assembled;
                auto orNull = [&](llvm::StringRef key, int64_t value) {
                  if (assembled)
                    json.attribute(key, value);
                  else
                    json.attribute(key, nullptr);
                };
                json.object([&] {
                  json.attribute("kernel", kernel);
                  json.attribute("function", row.launch->function);
                  json.attribute("grid", llvm::json::Array(row.launch->grid));
                  json.attribute("block", llvm::json::Array(row.launch->block));
                  if (row.launch->cluster[0])
                    json.attribute("cluster",
                                   llvm::json::Array(row.launch->cluster));
                  else
                    json.attribute("cluster", nullptr);
                  json.attribute("threads_per_block", row.threads);
                  json.attribute("shared_bytes", row.sharedBytes);
                  orNull("registers",
                         row.function ? row.function->registers : 0);
                  orNull("spill_store_bytes",
                         row.function ? row.function->spillStores : 0);
                  orNull("spill_load_bytes",
                         row.function ? row.function->spillLoads : 0);
                  json.attribute("tensor_core_instructions",
                                 row.function && row.function->tensorCores);
                  json.attributeObject("occupancy", [&] {
                    json.attribute("blocks_per_sm", row.occupancy.blocksPerSM);
                    json.attribute("warps_per_sm", row.occupancy.warpsPerSM);
                    json.attribute("fraction", row.occupancy.fraction);
                    json.attribute("limited_by", ::loom::occupancyLimitName(
                                                     row.occupancy.limit));
                    json.attribute("registers_known", assembled);
                  });
                  json.attribute("flops", row.flops);
                  json.attribute("tensor_core_flops", row.tensorFlops);
                  json.attribute("bytes", row.bytes);
                  json.attribute("roofline_us", row.seconds * 1e6);
                  json.attribute("bound",
                                 row.computeBound ? "compute" : "memory");
                });
              });
            });
            json.attributeObject("totals", [&] {
              json.attribute("launches", totals.launches);
              json.attribute("kernels", int64_t(totals.kernels.size()));
              json.attribute("flops", totals.flops);
              json.attribute("tensor_core_flops", totals.tensorFlops);
              json.attribute("tensor_core_share",
                             share(totals.tensorFlops, totals.flops) / 100);
              json.attribute("bytes", totals.bytes);
              json.attribute("roofline_us", totals.seconds * 1e6);
              json.attribute("compute_bound_launches", totals.computeBound);
              if (haveRegisters)
                json.attribute("spill_bytes", totals.spillBytes);
              else
                json.attribute("spill_bytes", nullptr);
            });
          });
        }
      });
    });
    os << "\n";
    return;
  }

  auto number = [](double value) { return llvm::format("%g", value); };
  os << "device  " << device.name << ": " << device.description << ", "
     << device.arch << ", " << device.sms << " SMs at " << device.boostClockMHz
     << " MHz; dense peaks " << number(device.tensorTflops16)
     << " TFLOP/s bf16/f16 and " << number(device.tensorTflopsTf32)
     << " tf32 on tensor cores, " << number(device.f32Tflops) << " f32; "
     << number(device.bandwidthGBs) << " GB/s\n";
  os << "arch    " << archName << " (" << arch.name << " limits): per SM "
     << arch.maxThreadsPerSM << " threads, " << arch.maxWarpsPerSM << " warps, "
     << arch.maxBlocksPerSM << " blocks, " << arch.registersPerSM
     << " registers, " << arch.sharedBytesPerSM << " bytes shared memory\n";
  if (haveRegisters)
    os << "ptxas   " << ptxas << " -arch=" << archName
       << " -v: registers, spills, shared memory\n";
  else
    os << "ptxas   none (no CUDA toolkit, or LOOM_PTXAS is empty): registers "
          "and spills unavailable, occupancy (<=) ignores registers\n";
  for (const ReportedProgram &program : programs) {
    Totals totals;
    if (program.ranks == 1)
      os << "\n" << program.name << " (1 rank)\n";
    else
      os << "\n"
         << program.name << " (each of " << program.ranks << " ranks)\n";
    os << llvm::format("%-12s %-24s %11s %9s %6s %4s %5s %9s %9s %-13s %12s "
                       "%6s %11s %11s %s\n",
                       "kernel", "function", "grid", "block", "smem", "regs",
                       "spill", "occupancy", "blocks/SM", "limited by", "flops",
                       "tensor", "bytes", "roofline_us", "bound");
    forEachRow(program, [&](llvm::StringRef kernel, const Row &row) {
      add(totals, kernel, row);
      bool assembled = row.function && row.function->assembled;
      std::string regs =
          assembled ? std::to_string(row.function->registers) : "-";
      std::string spill = assembled ? std::to_string(row.function->spillStores +
                                                     row.function->spillLoads)
                                    : "-";
      std::string occupancy =
          llvm::formatv("{0}{1:F1}%",
                        assembled ? "" : "<=", 100 * row.occupancy.fraction)
              .str();
      std::string tensor =
          row.flops
              ? llvm::formatv("{0:F1}%", share(row.tensorFlops, row.flops))
                    .str()
              : "-";
      os << llvm::format(
          "%-12s %-24s %11s %9s %6lld %4s %5s %9s %9d %-13s %12lld %6s %11lld "
          "%11.3f %s\n",
          kernel.str().c_str(), row.launch->function.c_str(),
          dims(row.launch->grid).c_str(), dims(row.launch->block).c_str(),
          (long long)row.sharedBytes, regs.c_str(), spill.c_str(),
          occupancy.c_str(), row.occupancy.blocksPerSM,
          ::loom::occupancyLimitName(row.occupancy.limit).str().c_str(),
          (long long)row.flops, tensor.c_str(), (long long)row.bytes,
          row.seconds * 1e6, row.computeBound ? "compute" : "memory");
    });
    // Cluster launches (TMA multicast between their blocks), under the
    // table: the grid column stays blocks.
    forEachRow(program, [&](llvm::StringRef kernel, const Row &row) {
      if (row.launch->cluster[0])
        os << kernel << " (" << row.launch->function << ") runs in clusters of "
           << dims(row.launch->cluster) << " blocks\n";
    });
    os << "total: " << totals.launches << " launches of "
       << totals.kernels.size()
       << (totals.kernels.size() == 1 ? " kernel, " : " kernels, ")
       << totals.flops << " FLOPs ("
       << llvm::format("%.1f", share(totals.tensorFlops, totals.flops))
       << "% on tensor cores), " << totals.bytes << " bytes, roofline "
       << llvm::format("%.3f", totals.seconds * 1e6) << " us on " << device.name
       << " (" << totals.computeBound << " launches compute-bound, "
       << totals.launches - totals.computeBound << " memory-bound), ";
    if (haveRegisters)
      os << totals.spillBytes << " spill bytes\n";
    else
      os << "spills unknown\n";
  }
}
