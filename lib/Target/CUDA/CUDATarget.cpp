//===- CUDATarget.cpp - kiln modules to CUDA programs and cubins ----------===//
//
// kiln-gpu-outline-kernels makes every kernel a gpu.launch_func; what is left
// of an entry function is launches, products (kiln.matmul), gradient
// averages (kiln.all_reduce_mean) and a sharded optimizer's collectives on
// buffers the runtime knows, which become the entry's program; each
// collective runs beside the commands after it until one touches its
// buffers, which waits for it first. The gpu.module goes
// through NVVM to PTX with LLVM's NVPTX backend, one PTX per architecture,
// and ptxas assembles each into a cubin.
//
//===----------------------------------------------------------------------===//

#include "kiln/Target/CUDA.h"
#include "kiln/Target/Support.h"

#include "kiln/KilnOps.h"
#include "kiln/Target/CUDA/Passes.h"
#include "kiln/Transforms/Utils/Buffers.h"
#include "kiln/Transforms/Utils/Gemm.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/Regex.h"

using namespace mlir;
using kiln::makeError;
using llvm::Expected;

namespace {

uint64_t bufferBytes(Type type) {
  return static_cast<uint64_t>(kiln::tensorBytes(cast<ShapedType>(type)));
}

/// Builds one entry function's program from what kiln-gpu-outline-kernels
/// left of it.
class ProgramBuilder {
public:
  ProgramBuilder(func::FuncOp entry,
                 const llvm::StringMap<unsigned> &kernelIndex)
      : entry(entry), kernelIndex(kernelIndex) {}

  Expected<kiln::CudaProgram> build() {
    program.entry = entry.getName().str();
    if (auto bytes = entry->getAttrOfType<IntegerAttr>("kiln.arena_bytes"))
      program.arenaBytes = bytes.getInt();
    for (Operation &op : entry.getBody().front()) {
      if (auto launch = dyn_cast<gpu::LaunchFuncOp>(op)) {
        auto command = buildLaunch(launch);
        if (!command)
          return command.takeError();
        append(std::move(*command));
        continue;
      }
      if (auto generic = dyn_cast<linalg::GenericOp>(op)) {
        // A bias broadcast the next product's epilogue does instead.
        if (generic->hasAttr("kiln.gemm_bias")) {
          biasInits.insert(generic);
          continue;
        }
        // A GELU the product before it computed as its epilogue.
        if (generic->hasAttr("kiln.gemm_epilogue")) {
          if (!geluEpilogues.erase(generic))
            return located(generic, "GELU epilogue that no matrix product "
                                    "computed");
          continue;
        }
        auto command = buildGemm(generic);
        if (!command)
          return command.takeError();
        append(std::move(*command));
        continue;
      }
      if (auto reduce = dyn_cast<kiln::AllReduceMeanOp>(op)) {
        if (llvm::Error error = buildAllReduce(reduce))
          return std::move(error);
        continue;
      }
      if (isa<kiln::FlashAttentionOp, kiln::FlashAttentionGradOp>(op)) {
        auto command = buildAttention(&op);
        if (!command)
          return command.takeError();
        append(std::move(*command));
        continue;
      }
      if (isa<kiln::FusedLayerNormOp, kiln::FusedLayerNormGradOp>(op)) {
        auto command = buildLayerNorm(&op);
        if (!command)
          return command.takeError();
        append(std::move(*command));
        continue;
      }
      if (isa<kiln::ReduceScatterMeanOp, kiln::AllGatherOp, kiln::LocalShardOp>(
              op)) {
        if (llvm::Error error = buildShard(&op))
          return std::move(error);
        continue;
      }
      // What remains must only compute addresses and constants.
      if (op.hasTrait<OpTrait::IsTerminator>() ||
          op.hasTrait<OpTrait::ConstantLike>() ||
          isa<ViewLikeOpInterface, memref::GetGlobalOp>(op) ||
          (isPure(&op) && op.getNumRegions() == 0))
        continue;
      return located(&op, "'" + op.getName().getStringRef() +
                              "' cannot run on the CUDA target yet");
    }
    if (!biasInits.empty())
      return located(*biasInits.begin(),
                     "bias broadcast that no matrix product takes as its "
                     "epilogue");
    // Nothing may still be in flight when the step returns.
    for (const Pending &collective : pending)
      program.commands.push_back(kiln::CudaWait{collective.request});
    pending.clear();
    return std::move(program);
  }

private:
  static bool overlap(const kiln::CudaBuffer &x, const kiln::CudaBuffer &y) {
    return x.argument == y.argument && x.offset < y.offset + y.size &&
           y.offset < x.offset + x.size;
  }

  static SmallVector<kiln::CudaBuffer, 4>
  touchedBuffers(const kiln::CudaCommand &command) {
    // The buffers of `all` a command has (of size 0: not used).
    auto used = [](std::initializer_list<kiln::CudaBuffer> all) {
      SmallVector<kiln::CudaBuffer, 4> touched;
      for (const kiln::CudaBuffer &buffer : all)
        if (buffer.size > 0)
          touched.push_back(buffer);
      return touched;
    };
    if (auto *launch = std::get_if<kiln::CudaLaunch>(&command))
      return SmallVector<kiln::CudaBuffer, 4>(launch->buffers.begin(),
                                              launch->buffers.end());
    if (auto *gemm = std::get_if<kiln::CudaGemm>(&command))
      return used(
          {gemm->a, gemm->b, gemm->c, gemm->bias, gemm->biasGrad, gemm->aux});
    if (auto *reduce = std::get_if<kiln::CudaAllReduce>(&command))
      return {reduce->buffer};
    if (auto *shard = std::get_if<kiln::CudaShard>(&command))
      return {shard->input, shard->output};
    if (auto *attention = std::get_if<kiln::CudaAttention>(&command))
      return used({attention->query, attention->key, attention->value,
                   attention->mask, attention->out, attention->stats,
                   attention->grad, attention->queryGrad, attention->keyGrad,
                   attention->valueGrad, attention->delta});
    if (auto *layerNorm = std::get_if<kiln::CudaLayerNorm>(&command))
      return used({layerNorm->input, layerNorm->scale, layerNorm->bias,
                   layerNorm->residual, layerNorm->output, layerNorm->sum,
                   layerNorm->grad, layerNorm->accumulate, layerNorm->inputGrad,
                   layerNorm->scaleGrad, layerNorm->biasGrad,
                   layerNorm->partials, layerNorm->copy});
    return {};
  }

  /// Appends `command`, after a wait for each collective still in flight on
  /// bytes it touches: a reduction runs beside the commands that follow it
  /// until its buffer is next read or written.
  void append(kiln::CudaCommand command) {
    SmallVector<kiln::CudaBuffer, 4> touched = touchedBuffers(command);
    llvm::erase_if(pending, [&](const Pending &collective) {
      if (llvm::none_of(touched, [&](const kiln::CudaBuffer &buffer) {
            return llvm::any_of(collective.buffers,
                                [&](const kiln::CudaBuffer &busy) {
                                  return overlap(buffer, busy);
                                });
          }))
        return false;
      program.commands.push_back(kiln::CudaWait{collective.request});
      return true;
    });
    if (auto *reduce = std::get_if<kiln::CudaAllReduce>(&command))
      pending.push_back({reduce->request, {reduce->buffer}});
    if (auto *shard = std::get_if<kiln::CudaShard>(&command))
      if (shard->request != 0)
        pending.push_back({shard->request, {shard->input, shard->output}});
    program.commands.push_back(std::move(command));
  }

  /// A sharded optimizer's reduce-scatter or all-gather, started where the
  /// op is (as an all-reduce), or its local shard, a copy in stream order.
  llvm::Error buildShard(Operation *op) {
    if (op->getNumOperands() != 2)
      return located(op, "takes tensors: bufferize it first");
    auto input = rootBuffer(op, op->getOperand(0));
    if (!input)
      return input.takeError();
    auto output = rootBuffer(op, op->getOperand(1));
    if (!output)
      return output.takeError();
    kiln::CudaShard shard;
    shard.input = *input;
    shard.output = *output;
    shard.ranks =
        static_cast<unsigned>(op->getAttrOfType<IntegerAttr>("ranks").getInt());
    if (isa<kiln::AllGatherOp>(op)) {
      shard.kind = kiln::CudaShard::AllGather;
      shard.count = input->size / sizeof(float);
    } else {
      shard.kind = isa<kiln::LocalShardOp>(op)
                       ? kiln::CudaShard::LocalShard
                       : kiln::CudaShard::ReduceScatterMean;
      shard.count = output->size / sizeof(float);
    }
    if (shard.kind != kiln::CudaShard::LocalShard)
      shard.request = ++requests;
    append(shard);
    return llvm::Error::success();
  }

  /// One reduction per buffer of the op, each started where the op is.
  llvm::Error buildAllReduce(kiln::AllReduceMeanOp op) {
    if (!op.hasBufferSemantics())
      return located(op, "averages tensors: bufferize it first");
    for (Value input : op.getInputs()) {
      if (!cast<MemRefType>(input.getType()).getElementType().isF32())
        return located(op, "averages only f32 buffers on the CUDA target");
      auto buffer = rootBuffer(op, input);
      if (!buffer)
        return buffer.takeError();
      if (buffer->size == 0)
        continue;
      append(kiln::CudaAllReduce{*buffer, ++requests});
    }
    return llvm::Error::success();
  }

  llvm::Error located(Operation *op, const llvm::Twine &message) {
    std::string location;
    llvm::raw_string_ostream os(location);
    op->getLoc().print(os);
    return makeError(location + ": " + message);
  }

  /// The buffer `v` is: an argument, or a constant-offset view of one (an
  /// arena slot).
  Expected<kiln::CudaBuffer> rootBuffer(Operation *user, Value v) {
    if (!kiln::isPlainBuffer(v.getType()))
      return located(user, "operand is not a contiguous buffer");
    std::optional<kiln::RootBuffer> root = kiln::asRootBuffer(v);
    if (!root)
      return located(user, "operand is not an argument or a constant-offset "
                           "view of one");
    return kiln::CudaBuffer{root->argument.getArgNumber(),
                            static_cast<uint64_t>(root->byteOffset),
                            bufferBytes(v.getType())};
  }

  /// A product's or an attention's operand: a reshape of a root buffer
  /// (reshapes of contiguous buffers move no data).
  Expected<kiln::CudaBuffer> matrixBuffer(Operation *user, Value v) {
    uint64_t bytes = bufferBytes(v.getType());
    while (Operation *def = v.getDefiningOp()) {
      if (!isa<memref::ExpandShapeOp, memref::CollapseShapeOp, memref::CastOp>(
              def))
        break;
      v = def->getOperand(0);
    }
    auto buffer = rootBuffer(user, v);
    if (buffer)
      buffer->size = bytes;
    return buffer;
  }

  /// A product's matrix: a view (reshapes, the first columns of every
  /// row) of a root buffer, as the bytes from the view's first element to
  /// its last.
  Expected<kiln::CudaBuffer> gemmMatrix(Operation *user, Value v) {
    SmallVector<Operation *> chain;
    FailureOr<Value> root = kiln::traceToRoot(v, chain);
    if (failed(root) || !llvm::all_of(chain, [](Operation *view) {
          return isa<memref::SubViewOp, memref::ExpandShapeOp,
                     memref::CollapseShapeOp, memref::CastOp>(view);
        }))
      return located(user, "matrix product operand is not a view of an "
                           "argument or an arena slot");
    auto buffer = rootBuffer(user, *root);
    if (!buffer)
      return buffer.takeError();
    // The root starts at its buffer's first element, so the view's offset
    // counts from there.
    auto type = cast<MemRefType>(v.getType());
    SmallVector<int64_t> strides;
    int64_t offset;
    if (failed(type.getStridesAndOffset(strides, offset)) ||
        ShapedType::isDynamic(offset) ||
        llvm::any_of(strides, ShapedType::isDynamic))
      return located(user, "matrix product operand has a dynamic layout");
    int64_t last = offset;
    for (auto [size, stride] : llvm::zip(type.getShape(), strides))
      last += (size - 1) * stride;
    uint64_t elementBytes = (type.getElementTypeBitWidth() + 7) / 8;
    buffer->offset += static_cast<uint64_t>(offset) * elementBytes;
    buffer->size = static_cast<uint64_t>(last - offset + 1) * elementBytes;
    return buffer;
  }

  Expected<kiln::CudaCommand> buildLaunch(gpu::LaunchFuncOp launch) {
    kiln::CudaLaunch command;
    auto found = kernelIndex.find(launch.getKernelName().getValue());
    if (found == kernelIndex.end())
      return located(launch, "launches an unknown kernel");
    command.kernel = found->second;
    gpu::KernelDim3 grid = launch.getGridSizeOperandValues();
    gpu::KernelDim3 block = launch.getBlockSizeOperandValues();
    Value dims[6] = {grid.x, grid.y, grid.z, block.x, block.y, block.z};
    for (int d = 0; d < 6; ++d) {
      std::optional<int64_t> size = getConstantIntValue(dims[d]);
      if (!size || *size < 1 || *size > std::numeric_limits<int32_t>::max())
        return located(launch, "launch dimensions must be positive constants");
      (d < 3 ? command.grid[d] : command.block[d - 3]) =
          static_cast<uint32_t>(*size);
    }
    for (Value operand : launch.getKernelOperands()) {
      auto buffer = rootBuffer(launch, operand);
      if (!buffer)
        return buffer.takeError();
      command.buffers.push_back(*buffer);
    }
    return command;
  }

  /// kiln.flash_attention or its gradient, on buffers.
  Expected<kiln::CudaCommand> buildAttention(Operation *op) {
    auto forward = dyn_cast<kiln::FlashAttentionOp>(op);
    auto grad = dyn_cast<kiln::FlashAttentionGradOp>(op);
    if (forward ? !forward.hasBufferSemantics() : !grad.hasBufferSemantics())
      return located(op, "computes on tensors: bufferize it first");
    kiln::CudaAttention command;
    command.backward = grad != nullptr;
    Value query = forward ? forward.getQuery() : grad.getQuery();
    Value key = forward ? forward.getKey() : grad.getKey();
    Value value = forward ? forward.getValue() : grad.getValue();
    Value mask = forward ? forward.getMask() : grad.getMask();
    auto queryType = cast<MemRefType>(query.getType());
    command.element = queryType.getElementType();
    command.batch = queryType.getDimSize(0);
    command.heads = queryType.getDimSize(1);
    command.queries = queryType.getDimSize(2);
    command.headSize = queryType.getDimSize(3);
    command.keys = cast<MemRefType>(key.getType()).getDimSize(2);
    command.keyHeads = cast<MemRefType>(key.getType()).getDimSize(1);
    command.scale = static_cast<float>(
        op->getAttrOfType<FloatAttr>("scale").getValueAsDouble());
    command.causal = op->hasAttr("causal");
    command.maskedFill = grad && grad.getMaskedFill();
    command.causalFill = grad && grad.getCausalFill();
    command.cudnn = op->hasAttr("cudnn");
    SmallVector<std::pair<Value, kiln::CudaBuffer *>> slots = {
        {query, &command.query}, {key, &command.key}, {value, &command.value}};
    if (mask) {
      auto maskType = cast<MemRefType>(mask.getType());
      command.maskBatch = maskType.getDimSize(0);
      command.maskHeads = maskType.getDimSize(1);
      command.maskQueries = maskType.getDimSize(2);
      slots.push_back({mask, &command.mask});
    }
    if (forward) {
      slots.push_back({forward.getOutputs()[0], &command.out});
      slots.push_back({forward.getOutputs()[1], &command.stats});
    } else {
      slots.push_back({grad.getOut(), &command.out});
      slots.push_back({grad.getGrad(), &command.grad});
      slots.push_back({grad.getStats(), &command.stats});
      ValueRange outputs = grad.getOutputs();
      slots.push_back({outputs[0], &command.queryGrad});
      slots.push_back({outputs[1], &command.keyGrad});
      slots.push_back({outputs[2], &command.valueGrad});
      slots.push_back({outputs[3], &command.delta});
    }
    // A reshaped mask (to four dimensions) is its buffer.
    for (auto [v, slot] : slots) {
      auto buffer = matrixBuffer(op, v);
      if (!buffer)
        return buffer.takeError();
      *slot = *buffer;
    }
    return command;
  }

  /// kiln.fused_layer_norm or its gradient, on buffers.
  Expected<kiln::CudaCommand> buildLayerNorm(Operation *op) {
    auto forward = dyn_cast<kiln::FusedLayerNormOp>(op);
    auto grad = dyn_cast<kiln::FusedLayerNormGradOp>(op);
    if (forward ? !forward.hasBufferSemantics() : !grad.hasBufferSemantics())
      return located(op, "computes on tensors: bufferize it first");
    kiln::CudaLayerNorm command;
    command.backward = grad != nullptr;
    Value input = forward ? forward.getInput() : grad.getInput();
    auto inputType = cast<MemRefType>(input.getType());
    command.rows = inputType.getDimSize(0);
    command.cols = inputType.getDimSize(1);
    command.epsilon = static_cast<float>(
        op->getAttrOfType<FloatAttr>("epsilon").getValueAsDouble());
    SmallVector<std::pair<Value, kiln::CudaBuffer *>> slots = {
        {input, &command.input},
        {forward ? forward.getScale() : grad.getScale(), &command.scale}};
    if (forward) {
      Value output = forward.getOutputs()[0];
      command.outputElement =
          cast<MemRefType>(output.getType()).getElementType();
      if (forward.getBias())
        slots.push_back({forward.getBias(), &command.bias});
      slots.push_back({output, &command.output});
      if (forward.getResidual()) {
        slots.push_back({forward.getResidual(), &command.residual});
        slots.push_back({forward.getOutputs()[1], &command.sum});
      }
      // The output rounded for products, if the op has it.
      if (Value copy = forward.getCopy()) {
        command.copyElement = cast<MemRefType>(copy.getType()).getElementType();
        slots.push_back({copy, &command.copy});
      }
    } else {
      ValueRange outputs = grad.getOutputs();
      slots.push_back({grad.getGrad(), &command.grad});
      if (grad.getAccumulate())
        slots.push_back({grad.getAccumulate(), &command.accumulate});
      slots.push_back({outputs[0], &command.inputGrad});
      slots.push_back({outputs[1], &command.scaleGrad});
      slots.push_back({outputs[2], &command.biasGrad});
      slots.push_back({outputs[3], &command.partials});
      // The input's gradient rounded for products, if the op has it.
      if (outputs.size() > 4) {
        command.outputElement =
            cast<MemRefType>(outputs[4].getType()).getElementType();
        slots.push_back({outputs[4], &command.output});
      }
    }
    // A reshaped tensor is its buffer.
    for (auto [v, slot] : slots) {
      auto buffer = matrixBuffer(op, v);
      if (!buffer)
        return buffer.takeError();
      *slot = *buffer;
    }
    // What it reads in 16 bits (a product stored it so, kiln-amp).
    auto narrow = [](Value v) -> Type {
      Type element = v ? getElementTypeOrSelf(v.getType()) : Type();
      return element && !element.isF32() ? element : Type();
    };
    if (forward) {
      command.inputElement = narrow(forward.getInput());
      command.residualElement = narrow(forward.getResidual());
    } else {
      command.gradElement = narrow(grad.getGrad());
      command.accumulateElement = narrow(grad.getAccumulate());
    }
    return command;
  }

  Expected<kiln::CudaCommand> buildGemm(linalg::GenericOp op) {
    std::optional<kiln::GemmDescription> gemm = kiln::describeGemm(op);
    if (!gemm)
      return located(op, "linalg op left outside a kernel that is not a "
                         "matrix product on buffers stored as matrices");
    kiln::CudaGemm command;
    command.element = cast<MemRefType>(gemm->out.getType()).getElementType();
    command.inputElement =
        cast<MemRefType>(gemm->lhs.getType()).getElementType();
    command.transposeA = gemm->transposeLhs;
    command.transposeB = gemm->transposeRhs;
    command.m = gemm->m;
    command.n = gemm->n;
    command.k = gemm->k;
    command.batch = gemm->batch;
    llvm::copy(gemm->ld, command.ld);
    llvm::copy(gemm->batchStride, command.batchStride);
    command.beta = gemm->overwrite || gemm->zeroFill ? 0.0f : 1.0f;
    if (gemm->zeroFill)
      return located(op, "matrix product still has its zero fill (run "
                         "kiln-gpu-outline-kernels first)");
    for (auto [value, slot] :
         {std::pair{gemm->lhs, &command.a}, std::pair{gemm->rhs, &command.b},
          std::pair{gemm->out, &command.c}}) {
      auto buffer = gemmMatrix(op, value);
      if (!buffer)
        return buffer.takeError();
      *slot = *buffer;
    }
    if (gemm->biasGrad) {
      if (gemm->biasGradFill)
        return located(op, "matrix product's bias gradient still has its "
                           "zero fill (run kiln-gpu-outline-kernels first)");
      auto biasGrad = rootBuffer(op, gemm->biasGrad);
      if (!biasGrad)
        return biasGrad.takeError();
      command.biasGrad = *biasGrad;
      command.biasGradOfA = gemm->biasGradOfLhs;
    }
    if (gemm->biasInit && biasInits.erase(gemm->biasInit)) {
      auto bias = rootBuffer(op, gemm->bias);
      if (!bias)
        return bias.takeError();
      command.bias = *bias;
      command.beta = 0.0f;
    }
    auto flags = op->getAttrOfType<DictionaryAttr>("kiln.matmul");
    if (flags && (flags.contains("gelu") || flags.contains("dgelu"))) {
      // The product writes its GELU epilogue's output instead of its own
      // (kiln-gpu-outline-kernels checked that it may).
      Value aux;
      linalg::GenericOp epilogue = kiln::geluEpilogueOf(op, aux);
      if (!epilogue || command.batch != 1 || command.beta != 0.0f)
        return located(op, "matrix product marked for a GELU epilogue has no "
                           "epilogue it can compute");
      auto output = matrixBuffer(op, epilogue.getDpsInits()[0]);
      if (!output)
        return output.takeError();
      command.c = *output;
      if (aux) {
        auto auxBuffer = matrixBuffer(op, aux);
        if (!auxBuffer)
          return auxBuffer.takeError();
        command.aux = *auxBuffer;
      }
      command.epilogue = flags.contains("dgelu")
                             ? kiln::CudaGemm::Epilogue::GeluGrad
                             : kiln::CudaGemm::Epilogue::Gelu;
      geluEpilogues.insert(epilogue);
    }
    return command;
  }

  func::FuncOp entry;
  const llvm::StringMap<unsigned> &kernelIndex;
  kiln::CudaProgram program;
  /// Bias broadcasts seen whose product has not come yet.
  llvm::SmallPtrSet<Operation *, 4> biasInits;
  /// GELU epilogues a product computed, not yet seen.
  llvm::SmallPtrSet<Operation *, 4> geluEpilogues;
  /// Reductions started and not yet waited for, and how many were started.
  /// A collective in flight: its request and the bytes it reads or writes.
  struct Pending {
    unsigned request;
    SmallVector<kiln::CudaBuffer, 2> buffers;
  };
  SmallVector<Pending> pending;
  unsigned requests = 0;
};

/// Assembles `ptx` into a cubin for `arch` with the toolkit's ptxas.
Expected<std::string> assemble(StringRef ptx, StringRef arch, StringRef ptxas) {
  return kiln::runToolOnBytes(
      ptx, "ptx", "cubin", ptxas,
      [&](StringRef input, StringRef output) {
        return std::vector<std::string>{ptxas.str(), ("-arch=" + arch).str(),
                                        "-O3",       input.str(),
                                        "-o",        output.str()};
      },
      "assembling the kernels");
}

/// Where ptxas is: in the toolkit, else on PATH.
Expected<std::string> findPtxas(StringRef toolkit) {
  if (!toolkit.empty()) {
    SmallString<128> path(toolkit);
    llvm::sys::path::append(path, "bin", "ptxas");
    if (llvm::sys::fs::can_execute(path))
      return path.str().str();
  }
  if (auto found = llvm::sys::findProgramByName("ptxas"))
    return *found;
  return makeError(
      "ptxas not found" +
      (toolkit.empty() ? llvm::Twine("") : " in " + toolkit + "/bin") +
      " or on PATH: the CUDA target needs the CUDA toolkit "
      "(pass its directory with --cuda-path)");
}

} // namespace

llvm::Error kiln::checkCudaArchs(const std::vector<std::string> &archs) {
  if (archs.empty())
    return makeError("no CUDA architecture given");
  llvm::Regex pattern("^sm_([0-9]+)a?$");
  for (const std::string &arch : archs) {
    SmallVector<StringRef> groups;
    unsigned version = 0;
    if (!pattern.match(arch, &groups) || groups[1].getAsInteger(10, version) ||
        version < 75)
      return makeError("unknown CUDA architecture '" + arch +
                       "': expected sm_XY or sm_XYa with XY at least 75, "
                       "e.g. sm_80, sm_90a");
  }
  return llvm::Error::success();
}

Expected<kiln::CUDACode>
kiln::compileForCUDA(ModuleOp module, const CUDATargetOptions &options) {
  if (llvm::Error error = checkCudaArchs(options.archs))
    return std::move(error);
  std::string toolkit = options.toolkitPath.empty()
                            ? std::string(KILN_DEFAULT_CUDA_TOOLKIT)
                            : options.toolkitPath;
  auto ptxas = findPtxas(toolkit);
  if (!ptxas)
    return ptxas.takeError();
  MLIRContext *context = module.getContext();
  context->loadDialect<gpu::GPUDialect, NVVM::NVVMDialect, LLVM::LLVMDialect>();
  NVVM::registerNVVMTargetInterfaceExternalModels(*context);

  {
    PassManager pm(context);
    KilnGPUOutlineKernelsOptions outline;
    outline.blockSize = options.blockSize;
    pm.addPass(createKilnGPUOutlineKernels(outline));
    pm.addPass(createKilnGPUMergeLaunches());
    if (llvm::Error error = kiln::runPasses(pm, module, "building GPU kernels"))
      return std::move(error);
  }

  CUDACode code;
  llvm::StringMap<unsigned> kernelIndex;
  gpu::GPUModuleOp kernels;
  for (auto gpuModule : module.getOps<gpu::GPUModuleOp>())
    kernels = gpuModule;
  // A model whose every value folded away (or whose tensors are empty) has
  // no kernels; its code is then a module that defines none.
  if (!kernels) {
    OpBuilder b(module.getBodyRegion());
    b.setInsertionPointToEnd(module.getBody());
    kernels = gpu::GPUModuleOp::create(b, module.getLoc(), "kiln_kernels");
  }
  if (kernels)
    for (auto function : kernels.getOps<gpu::GPUFuncOp>()) {
      kernelIndex[function.getName()] = code.kernels.size();
      code.kernels.push_back(function.getName().str());
    }
  for (auto function : module.getOps<func::FuncOp>()) {
    if (function.isExternal())
      continue;
    auto program = ProgramBuilder(function, kernelIndex).build();
    if (!program)
      return program.takeError();
    code.programs.push_back(std::move(*program));
  }

  // One PTX per architecture, from LLVM's NVPTX backend.
  SmallVector<Attribute> targets;
  for (const std::string &arch : options.archs)
    targets.push_back(NVVM::NVVMTargetAttr::get(context, /*optLevel=*/3,
                                                "nvptx64-nvidia-cuda", arch));
  kernels.setTargetsAttr(ArrayAttr::get(context, targets));
  {
    PassManager pm(context);
    OpPassManager &device = pm.nest<gpu::GPUModuleOp>();
    device.addPass(createLowerAffinePass());
    device.addPass(memref::createExpandStridedMetadataPass());
    device.addPass(createLowerAffinePass());
    device.addPass(createSCFToControlFlowPass());
    ConvertGpuOpsToNVVMOpsOptions nvvm;
    // Each kernel argument is one pointer, as the runtime passes it.
    nvvm.useBarePtrCallConv = true;
    device.addPass(createConvertGpuOpsToNVVMOps(nvvm));
    device.addPass(createCanonicalizerPass());
    device.addPass(createReconcileUnrealizedCastsPass());
    GpuModuleToBinaryPassOptions binary;
    binary.compilationTarget = "isa";
    binary.toolkitPath = toolkit;
    pm.addPass(createGpuModuleToBinaryPass(binary));
    if (llvm::Error error = kiln::runPasses(pm, module, "generating PTX"))
      return std::move(error);
  }
  gpu::BinaryOp binary;
  for (auto op : module.getOps<gpu::BinaryOp>())
    binary = op;
  if (!binary || binary.getObjects().size() != options.archs.size())
    return makeError("generating PTX gave no object per architecture");

  for (auto [arch, object] : llvm::zip(
           options.archs, binary.getObjects().getAsRange<gpu::ObjectAttr>())) {
    StringRef ptx = object.getObject().getValue();
    auto cubin = assemble(ptx, arch, *ptxas);
    if (!cubin)
      return makeError("assembling the kernels for " + arch + ": " +
                       llvm::toString(cubin.takeError()));
    code.images.push_back({CudaImage::Cubin, arch, std::move(*cubin)});
  }
  // The PTX of the first architecture, for GPUs none of the cubins fits.
  StringRef firstPtx =
      cast<gpu::ObjectAttr>(binary.getObjects()[0]).getObject().getValue();
  std::string virtualArch = "compute_" + options.archs[0].substr(3);
  // ptxas and the driver take PTX text with its terminating NUL.
  code.images.push_back(
      {CudaImage::Ptx, virtualArch, firstPtx.str() + std::string(1, '\0')});
  return code;
}
