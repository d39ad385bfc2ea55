//===- GPUEmulate.cpp - GPU kernels run on the host, thread by thread -----===//
//
// With no GPU at hand, the one part of the CUDA target that cannot be
// checked against a reference is what runs on the device. This pass keeps
// everything the CUDA target decided (which kernels, which thread computes
// which point, which buffers each launch gets, the order of launches and
// products) and only swaps the device for loops on the host, so the result
// can be compiled for the CPU and trained against PyTorch.
//
//===----------------------------------------------------------------------===//

#include "kiln/KilnOps.h"
#include "kiln/Target/CUDA/Passes.h"
#include "kiln/Transforms/Utils/Buffers.h"
#include "kiln/Transforms/Utils/Gemm.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/IRMapping.h"

namespace kiln {
#define GEN_PASS_DEF_KILNGPUEMULATE
#include "kiln/Target/CUDA/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace {

struct KilnGPUEmulatePass : kiln::impl::KilnGPUEmulateBase<KilnGPUEmulatePass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    llvm::StringMap<func::FuncOp> hostKernels;
    for (auto gpuModule :
         llvm::make_early_inc_range(module.getOps<gpu::GPUModuleOp>())) {
      for (auto kernel : gpuModule.getOps<gpu::GPUFuncOp>()) {
        func::FuncOp host = toHostFunction(kernel);
        if (!host)
          return signalPassFailure();
        hostKernels[(gpuModule.getName() + "::" + kernel.getName()).str()] =
            host;
      }
      // Globals the kernels read move to the host module, unless it has
      // them already (they came from there).
      for (auto global :
           llvm::make_early_inc_range(gpuModule.getOps<memref::GlobalOp>()))
        if (!module.lookupSymbol(global.getSymName()))
          global->moveBefore(module.getBody(), module.getBody()->end());
      gpuModule.erase();
    }
    SmallVector<gpu::LaunchFuncOp> launches;
    module.walk([&](gpu::LaunchFuncOp op) { launches.push_back(op); });
    for (gpu::LaunchFuncOp launch : launches) {
      std::string name = (launch.getKernelModuleName().getValue() +
                          "::" + launch.getKernelName().getValue())
                             .str();
      func::FuncOp host = hostKernels.lookup(name);
      if (!host) {
        launch.emitError("launches a kernel that is not in the module");
        return signalPassFailure();
      }
      OpBuilder b(launch);
      Location loc = launch.getLoc();
      Value zero = arith::ConstantIndexOp::create(b, loc, 0);
      Value one = arith::ConstantIndexOp::create(b, loc, 1);
      gpu::KernelDim3 grid = launch.getGridSizeOperandValues();
      gpu::KernelDim3 block = launch.getBlockSizeOperandValues();
      for (Value size : {grid.y, grid.z, block.y, block.z})
        if (getConstantIntValue(size) != 1) {
          launch.emitError("emulates only launches along x");
          return signalPassFailure();
        }
      SmallVector<Value> operands(launch.getKernelOperands());
      scf::ForOp::create(
          b, loc, zero, grid.x, one, ValueRange{},
          [&](OpBuilder &nb, Location, Value blockId, ValueRange) {
            scf::ForOp::create(
                nb, loc, zero, block.x, one, ValueRange{},
                [&](OpBuilder &tb, Location, Value threadId, ValueRange) {
                  SmallVector<Value> args = {blockId, threadId};
                  args.append(operands);
                  func::CallOp::create(tb, loc, host, args);
                  scf::YieldOp::create(tb, loc);
                });
            scf::YieldOp::create(nb, loc);
          });
      launch.erase();
    }
    module->removeAttr(gpu::GPUDialect::getContainerModuleAttrName());
    splitBiasGrads();
    restoreZeroFills();
    widenRoundOnceProducts();
    if (failed(callHostAttention()) || failed(callHostLayerNorms()))
      return signalPassFailure();
  }

  /// The address of `buffer`'s first element as an LLVM pointer, or null
  /// for no buffer.
  static Value addressOf(OpBuilder &b, Location loc, Value buffer) {
    if (!buffer)
      return LLVM::ZeroOp::create(b, loc,
                                  LLVM::LLVMPointerType::get(b.getContext()));
    return kiln::bufferAddress(b, loc, buffer);
  }

  /// Replaces `op` by a call of the runtime's function `name` with `args`.
  void replaceByRuntimeCall(Operation *op, StringRef name,
                            ArrayRef<Value> args) {
    OpBuilder b(op);
    SmallVector<Type> types;
    for (Value arg : args)
      types.push_back(arg.getType());
    func::CallOp::create(
        b, op->getLoc(),
        kiln::declareRuntimeFunction(getOperation(), name,
                                     b.getFunctionType(types, {})),
        args);
    op->erase();
  }

  /// How kiln/abi/layer_norm.h names the element type of `buffer`: 0 f32 (or
  /// no buffer), 1 bf16, 2 f16.
  static int64_t elementCode(Value buffer) {
    if (!buffer)
      return 0;
    Type element = cast<MemRefType>(buffer.getType()).getElementType();
    return element.isBF16() ? 1 : element.isF16() ? 2 : 0;
  }

  /// The layer-norm kernels' commands become calls into the runtime's host
  /// version of them (kiln/abi/layer_norm.h), on the same buffers.
  LogicalResult callHostLayerNorms() {
    ModuleOp module = getOperation();
    SmallVector<Operation *> ops;
    module.walk([&](Operation *op) {
      if (isa<kiln::FusedLayerNormOp, kiln::FusedLayerNormGradOp>(op))
        ops.push_back(op);
    });
    for (Operation *op : ops) {
      auto forward = dyn_cast<kiln::FusedLayerNormOp>(op);
      auto grad = dyn_cast<kiln::FusedLayerNormGradOp>(op);
      if (forward ? !forward.hasBufferSemantics() : !grad.hasBufferSemantics())
        return op->emitError("must be bufferized before kiln-gpu-emulate");
      OpBuilder b(op);
      Location loc = op->getLoc();
      auto address = [&](Value buffer) { return addressOf(b, loc, buffer); };
      auto integer = [&](int64_t value) -> Value {
        return arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(value));
      };
      // The forward's input and residual with their types, scale, bias,
      // output, sum and output type, and its copy with that one's type (if
      // it has one), or the gradient's input, scale, grad and accumulate
      // with their types, its four results and its rounded input gradient
      // with that one's type; then the shape and epsilon
      // (kiln/abi/layer_norm.h's _typed_ functions).
      SmallVector<Value> args;
      Value input;
      auto typed = [&](Value v) {
        args.push_back(address(v));
        args.push_back(integer(elementCode(v)));
      };
      if (forward) {
        input = forward.getInput();
        ValueRange outputs = forward.getOutputs();
        typed(forward.getInput());
        typed(forward.getResidual());
        for (Value v : {forward.getScale(), forward.getBias(), outputs[0],
                        forward.getResidual() ? outputs[1] : Value()})
          args.push_back(address(v));
        args.push_back(integer(elementCode(outputs[0])));
        typed(forward.getCopy());
      } else {
        input = grad.getInput();
        args.push_back(address(grad.getInput()));
        args.push_back(address(grad.getScale()));
        typed(grad.getGrad());
        typed(grad.getAccumulate());
        ValueRange outputs = grad.getOutputs();
        for (Value v : outputs.take_front(4))
          args.push_back(address(v));
        // The input's gradient rounded, if the op has it, and its type.
        typed(outputs.size() > 4 ? outputs[4] : Value());
      }
      auto inputType = cast<MemRefType>(input.getType());
      args.push_back(integer(inputType.getDimSize(0)));
      args.push_back(integer(inputType.getDimSize(1)));
      args.push_back(arith::ConstantOp::create(
          b, loc, op->getAttrOfType<FloatAttr>("epsilon")));
      replaceByRuntimeCall(op,
                           forward ? "kiln_layer_norm_forward_typed_host"
                                   : "kiln_layer_norm_backward_typed_host",
                           args);
    }
    return success();
  }

  /// The tensor-core attention kernels' commands become calls into the
  /// runtime's host version of them (kiln/abi/attention.h), on the same
  /// buffers. cuDNN's attention (`cudnn`) is that arithmetic too, on f32
  /// copies of its 16-bit output, output gradient and input gradients,
  /// rounded as cuDNN stores them (its statistics are then the kernels',
  /// which only the backward reads), with grouped key and value heads
  /// where cuDNN takes them.
  LogicalResult callHostAttention() {
    ModuleOp module = getOperation();
    SmallVector<Operation *> ops;
    module.walk([&](Operation *op) {
      if (isa<kiln::FlashAttentionOp, kiln::FlashAttentionGradOp>(op))
        ops.push_back(op);
    });
    for (Operation *op : ops) {
      auto forward = dyn_cast<kiln::FlashAttentionOp>(op);
      auto grad = dyn_cast<kiln::FlashAttentionGradOp>(op);
      bool buffers =
          forward ? forward.hasBufferSemantics() : grad.hasBufferSemantics();
      if (!buffers)
        return op->emitError("must be bufferized before kiln-gpu-emulate");
      OpBuilder b(op);
      Location loc = op->getLoc();
      OpBuilder after(op->getContext());
      after.setInsertionPointAfter(op);
      // A 16-bit buffer the host version takes in f32: a copy, widened
      // before the call where it is read, rounded back after it where it
      // is written.
      auto address = [&](Value buffer, bool written = false) {
        if (!buffer || elementCode(buffer) == 0)
          return addressOf(b, loc, buffer);
        auto type = cast<MemRefType>(buffer.getType());
        Value wide = memref::AllocOp::create(
            b, loc, MemRefType::get(type.getShape(), b.getF32Type()));
        if (written)
          convert(after, loc, wide, buffer);
        else
          convert(b, loc, buffer, wide);
        memref::DeallocOp::create(after, loc, wide);
        return addressOf(b, loc, wide);
      };
      // Pointers: query, key, value, then the forward's mask, out and
      // stats, or the gradient's out, grad, stats, mask, and its four
      // results.
      SmallVector<Value> args;
      Value query, key, mask;
      if (forward) {
        query = forward.getQuery();
        key = forward.getKey();
        mask = forward.getMask();
        for (Value v : {forward.getQuery(), forward.getKey(),
                        forward.getValue(), forward.getMask()})
          args.push_back(addressOf(b, loc, v));
        for (Value v : forward.getOutputs())
          args.push_back(address(v, /*written=*/true));
      } else {
        query = grad.getQuery();
        key = grad.getKey();
        mask = grad.getMask();
        for (Value v : {grad.getQuery(), grad.getKey(), grad.getValue()})
          args.push_back(addressOf(b, loc, v));
        for (Value v :
             {grad.getOut(), grad.getGrad(), grad.getStats(), grad.getMask()})
          args.push_back(address(v));
        for (Value v : grad.getOutputs())
          args.push_back(address(v, /*written=*/true));
      }
      auto queryType = cast<MemRefType>(query.getType());
      ArrayRef<int64_t> shape = queryType.getShape();
      SmallVector<int64_t, 4> maskShape{1, 1, 1};
      if (mask)
        maskShape.assign(
            cast<MemRefType>(mask.getType()).getShape().take_front(3));
      bool causal = op->hasAttr("causal");
      int64_t element = queryType.getElementType().isBF16() ? 0 : 1;
      for (int64_t value :
           {element, shape[0], shape[1], shape[2],
            cast<MemRefType>(key.getType()).getDimSize(2), shape[3],
            maskShape[0], maskShape[1], maskShape[2], int64_t(causal)})
        args.push_back(
            arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(value)));
      double scale = op->getAttrOfType<FloatAttr>("scale").getValueAsDouble();
      args.push_back(
          arith::ConstantOp::create(b, loc, b.getF64FloatAttr(scale)));
      if (grad)
        for (bool flag : {grad.getMaskedFill(), grad.getCausalFill()})
          args.push_back(arith::ConstantOp::create(
              b, loc, b.getI64IntegerAttr(flag ? 1 : 0)));
      // Grouped key and value heads (cuDNN's): the grouped entry points.
      int64_t keyHeads = cast<MemRefType>(key.getType()).getDimSize(1);
      bool grouped = keyHeads != shape[1];
      if (grouped)
        args.push_back(
            arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(keyHeads)));
      StringRef name =
          forward ? (grouped ? "kiln_flash_attention_forward_grouped_host"
                             : "kiln_flash_attention_forward_host")
                  : (grouped ? "kiln_flash_attention_backward_grouped_host"
                             : "kiln_flash_attention_backward_host");
      replaceByRuntimeCall(op, name, args);
    }
    return success();
  }

  /// Each product with a bias-gradient output becomes the product and the
  /// sum after it (kiln::splitBiasGrad): BLAS multiplies it again.
  void splitBiasGrads() {
    SmallVector<linalg::GenericOp> products;
    getOperation().walk([&](linalg::GenericOp op) {
      if (kiln::hasBiasGradOutput(op))
        products.push_back(op);
    });
    for (linalg::GenericOp op : products)
      kiln::splitBiasGrad(op);
  }

  /// A product that overwrites its output (the zero fill erased for the
  /// library) gets the fill back and loses the flag, so it means what a
  /// linalg op means again, whoever lowers it (BLAS takes the fill as
  /// beta 0 once more; one BLAS cannot multiply stays a loop nest).
  void restoreZeroFills() {
    getOperation().walk([](linalg::GenericOp op) {
      auto flags = op->getAttrOfType<DictionaryAttr>("kiln.matmul");
      if (!flags || !flags.contains("overwrite"))
        return;
      OpBuilder b(op);
      Value out = op.getDpsInits()[0];
      Type element = cast<MemRefType>(out.getType()).getElementType();
      Value zero =
          arith::ConstantOp::create(b, op.getLoc(), b.getZeroAttr(element));
      linalg::FillOp::create(b, op.getLoc(), zero, out);
      NamedAttrList entries(flags);
      entries.erase("overwrite");
      op->setAttr("kiln.matmul", entries.getDictionary(op.getContext()));
    });
  }

  /// A product that sums in f32 and rounds once as it stores into a 16-bit
  /// output (kiln-amp's `round_once`, as cuBLASLt computes it) sums into an
  /// f32 buffer of its own instead: the output's start (a zero fill or a
  /// bias broadcast, run before it) widened into it, the product, then the
  /// sum rounded into the output. A loop nest on the 16-bit output would
  /// round at every step of the sum.
  void widenRoundOnceProducts() {
    SmallVector<linalg::GenericOp> products;
    getOperation().walk([&](linalg::GenericOp op) {
      auto flags = op->getAttrOfType<DictionaryAttr>("kiln.matmul");
      if (flags && flags.contains("round_once") &&
          op.hasPureBufferSemantics() && op.getNumDpsInits() == 1)
        products.push_back(op);
    });
    for (linalg::GenericOp op : products) {
      OpBuilder b(op);
      Location loc = op.getLoc();
      Value out = op.getDpsInits()[0];
      auto outType = cast<MemRefType>(out.getType());
      Type f32 = b.getF32Type();
      Value wide = memref::AllocOp::create(
          b, loc, MemRefType::get(outType.getShape(), f32));
      convert(b, loc, out, wide);
      op.getDpsInitsMutable()[0].set(wide);
      Block *body = op.getBody();
      BlockArgument sum = body->getArguments().back();
      sum.setType(f32);
      for (Operation *user : llvm::make_early_inc_range(sum.getUsers()))
        if (auto extend = dyn_cast<arith::ExtFOp>(user);
            extend && extend.getType() == f32) {
          extend.replaceAllUsesWith(sum);
          extend.erase();
        }
      auto yield = cast<linalg::YieldOp>(body->getTerminator());
      if (auto round = yield->getOperand(0).getDefiningOp<arith::TruncFOp>()) {
        yield->setOperand(0, round.getIn());
        if (round->use_empty())
          round.erase();
      }
      NamedAttrList flags(op->getAttrOfType<DictionaryAttr>("kiln.matmul"));
      flags.erase("round_once");
      op->setAttr("kiln.matmul", flags.getDictionary(op.getContext()));
      b.setInsertionPointAfter(op);
      convert(b, loc, wide, out);
      memref::DeallocOp::create(b, loc, wide);
    }
  }

  /// `to` = `from` converted to `to`'s element type, element by element.
  static void convert(OpBuilder &b, Location loc, Value from, Value to) {
    int64_t rank = cast<MemRefType>(from.getType()).getRank();
    Type element = cast<MemRefType>(to.getType()).getElementType();
    AffineMap identity = b.getMultiDimIdentityMap(rank);
    SmallVector<utils::IteratorType> parallel(rank,
                                              utils::IteratorType::parallel);
    linalg::GenericOp::create(
        b, loc, ValueRange{from}, ValueRange{to},
        ArrayRef<AffineMap>{identity, identity}, parallel,
        [&](OpBuilder &nb, Location nloc, ValueRange args) {
          Value converted =
              element.getIntOrFloatBitWidth() >
                      args[0].getType().getIntOrFloatBitWidth()
                  ? arith::ExtFOp::create(nb, nloc, element, args[0])
                        .getResult()
                  : arith::TruncFOp::create(nb, nloc, element, args[0])
                        .getResult();
          linalg::YieldOp::create(nb, nloc, converted);
        });
  }

  /// `func.func private @<module>_<kernel>(%block, %thread, buffers...)`
  /// with the kernel's body, placed in the host module.
  func::FuncOp toHostFunction(gpu::GPUFuncOp kernel) {
    ModuleOp module = getOperation();
    if (kernel.getBody().getBlocks().size() != 1) {
      kernel.emitError("emulates only kernels of one block");
      return {};
    }
    // Block and thread indices are read at the top of the body only.
    WalkResult nested = kernel.getBody().walk([&](Operation *op) {
      if (op->getParentOp() != kernel && op->getDialect() &&
          isa<gpu::GPUDialect>(op->getDialect())) {
        op->emitError("cannot be emulated on the host");
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    if (nested.wasInterrupted())
      return {};
    OpBuilder b(module.getBodyRegion());
    b.setInsertionPointToEnd(module.getBody());
    SmallVector<Type> types = {b.getIndexType(), b.getIndexType()};
    llvm::append_range(types, kernel.getArgumentTypes());
    auto host = func::FuncOp::create(b, kernel.getLoc(),
                                     ("emulated_" + kernel.getName()).str(),
                                     b.getFunctionType(types, {}));
    host.setPrivate();
    Block *entry = host.addEntryBlock();
    b.setInsertionPointToStart(entry);
    IRMapping mapping;
    for (auto [from, to] :
         llvm::zip(kernel.getArguments(), entry->getArguments().drop_front(2)))
      mapping.map(from, to);
    for (Operation &op : kernel.getBody().front()) {
      if (isa<gpu::ReturnOp>(op)) {
        func::ReturnOp::create(b, op.getLoc());
        continue;
      }
      Value replacement;
      if (auto id = dyn_cast<gpu::BlockIdOp>(op);
          id && id.getDimension() == gpu::Dimension::x)
        replacement = entry->getArgument(0);
      else if (auto id = dyn_cast<gpu::ThreadIdOp>(op);
               id && id.getDimension() == gpu::Dimension::x)
        replacement = entry->getArgument(1);
      else if (op.getDialect() && isa<gpu::GPUDialect>(op.getDialect())) {
        op.emitError("cannot be emulated on the host");
        return {};
      }
      if (replacement) {
        mapping.map(op.getResult(0), replacement);
        continue;
      }
      b.clone(op, mapping);
    }
    return host;
  }
};

} // namespace
