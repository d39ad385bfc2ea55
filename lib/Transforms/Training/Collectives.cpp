//===- Collectives.cpp - data-parallel collectives through buffers --------===//
//
// kiln.all_reduce_mean averages values over the ranks of a run. On tensors
// it bufferizes in place (each result is its operand's buffer), and on the
// CPU its buffer form becomes calls into the runtime's collectives: a
// non-blocking start where the op is, and a wait just before the buffer is
// touched again. The ops of a sharded optimizer (kiln.reduce_scatter_mean,
// kiln.all_gather, kiln.local_shard) read their input and write a new
// buffer; the first two start likewise and wait before either buffer is
// touched again, the last is a plain copy.
//
//===----------------------------------------------------------------------===//

#include "kiln/Transforms/Training/Collectives.h"
#include "kiln/KilnOps.h"
#include "kiln/Transforms/Training/Passes.h"
#include "kiln/Transforms/Utils/Buffers.h"

#include "mlir/Dialect/Bufferization/IR/BufferizableOpInterface.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/ADT/TypeSwitch.h"

namespace kiln {
#define GEN_PASS_DEF_KILNLOWERCOLLECTIVES
#include "kiln/Transforms/Training/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace mlir::bufferization;

namespace {

/// In place: result i is operand i's buffer, read and written.
struct AllReduceMeanBufferization
    : BufferizableOpInterface::ExternalModel<AllReduceMeanBufferization,
                                             kiln::AllReduceMeanOp> {
  bool bufferizesToMemoryRead(Operation *, OpOperand &,
                              const AnalysisState &) const {
    return true;
  }
  bool bufferizesToMemoryWrite(Operation *, OpOperand &,
                               const AnalysisState &) const {
    return true;
  }
  AliasingValueList getAliasingValues(Operation *op, OpOperand &operand,
                                      const AnalysisState &) const {
    return {{op->getResult(operand.getOperandNumber()),
             BufferRelation::Equivalent}};
  }
  LogicalResult bufferize(Operation *op, RewriterBase &rewriter,
                          const BufferizationOptions &options,
                          BufferizationState &state) const {
    SmallVector<Value> buffers;
    for (Value input : op->getOperands()) {
      FailureOr<Value> buffer = getBuffer(rewriter, input, options, state);
      if (failed(buffer))
        return failure();
      buffers.push_back(*buffer);
    }
    kiln::AllReduceMeanOp::create(rewriter, op->getLoc(), buffers);
    replaceOpWithBufferizedValues(rewriter, op, buffers);
    return success();
  }
};

/// Reads its input, writes a new buffer: the sharding ops.
template <typename Op>
struct ShardingBufferization
    : BufferizableOpInterface::ExternalModel<ShardingBufferization<Op>, Op> {
  bool bufferizesToMemoryRead(Operation *, OpOperand &,
                              const AnalysisState &) const {
    return true;
  }
  bool bufferizesToMemoryWrite(Operation *, OpOperand &,
                               const AnalysisState &) const {
    return false;
  }
  AliasingValueList getAliasingValues(Operation *, OpOperand &,
                                      const AnalysisState &) const {
    return {};
  }
  LogicalResult bufferize(Operation *op, RewriterBase &rewriter,
                          const BufferizationOptions &options,
                          BufferizationState &state) const {
    auto sharding = cast<Op>(op);
    FailureOr<Value> input =
        getBuffer(rewriter, sharding.getInput(), options, state);
    if (failed(input))
      return failure();
    auto type = cast<RankedTensorType>(sharding.getResult().getType());
    FailureOr<Value> output = options.createAlloc(
        rewriter, op->getLoc(),
        MemRefType::get(type.getShape(), type.getElementType()), {});
    if (failed(output))
      return failure();
    Op::create(rewriter, op->getLoc(), TypeRange{}, *input, *output,
               sharding.getRanksAttr());
    replaceOpWithBufferizedValues(rewriter, op, *output);
    return success();
  }
};

constexpr const char *kBegin = "kiln_collective_all_reduce_mean_f32_begin";
constexpr const char *kReduceScatter =
    "kiln_collective_reduce_scatter_mean_f32_begin";
constexpr const char *kAllGather = "kiln_collective_all_gather_f32_begin";
constexpr const char *kLocalShard = "kiln_collective_local_shard_f32";
constexpr const char *kWait = "kiln_collective_wait";

/// Whether `value` is, or is computed from, a value of `aliases` (a call's
/// pointer argument is the aligned pointer of a buffer plus an offset).
bool derivesFrom(Value value, const llvm::SmallPtrSetImpl<Value> &aliases,
                 int depth = 0) {
  if (aliases.contains(value))
    return true;
  Operation *def = value.getDefiningOp();
  if (!def || depth > 8 || def->getNumRegions() > 0)
    return false;
  return llvm::any_of(def->getOperands(), [&](Value operand) {
    return derivesFrom(operand, aliases, depth + 1);
  });
}

/// Whether `op` (or an op nested in it) uses a value of `aliases`, directly
/// or through a pointer computed from one.
bool touches(Operation *op, const llvm::SmallPtrSetImpl<Value> &aliases) {
  WalkResult result = op->walk([&](Operation *nested) {
    for (Value operand : nested->getOperands())
      if (isa<CallOpInterface>(nested) ? derivesFrom(operand, aliases)
                                       : aliases.contains(operand))
        return WalkResult::interrupt();
    return WalkResult::advance();
  });
  return result.wasInterrupted();
}

/// Whether `value` is the arena kiln-plan-memory placed the buffers in.
bool isArena(Value value) {
  auto argument = dyn_cast<BlockArgument>(value);
  auto function =
      argument ? dyn_cast<func::FuncOp>(argument.getOwner()->getParentOp())
               : nullptr;
  return function && function.getArgAttr(argument.getArgNumber(), "kiln.arena");
}

/// Puts a wait for `request` before the first op after `op` that touches
/// one of `buffers`, through it or a view of it; at the end of the block if
/// none does. The arena the buffers are views of does not count: the
/// planner gives bytes of a buffer to another only after its last use,
/// which is at or after that first touch (kiln-plan-memory keeps a
/// collective's buffers alive that long).
void waitBeforeNextTouch(Operation *op, ValueRange buffers, Value request,
                         func::FuncOp wait) {
  llvm::SmallPtrSet<Value, 8> aliases;
  for (Value buffer : buffers) {
    aliases.insert(buffer);
    for (Value source = buffer;
         auto view =
             dyn_cast_or_null<ViewLikeOpInterface>(source.getDefiningOp());
         source = view.getViewSource()) {
      if (isArena(view.getViewSource()))
        break;
      aliases.insert(view.getViewSource());
    }
  }
  Operation *reader = op->getNextNode();
  for (; reader && !reader->hasTrait<OpTrait::IsTerminator>();
       reader = reader->getNextNode()) {
    // Views, addresses and address arithmetic (pure ops) only name the
    // buffer; what they compute is another alias.
    if (isPure(reader) && reader->getNumRegions() == 0 &&
        llvm::any_of(reader->getOperands(),
                     [&](Value v) { return aliases.contains(v); })) {
      for (Value result : reader->getResults())
        aliases.insert(result);
      continue;
    }
    if (touches(reader, aliases))
      break;
  }
  OpBuilder waitBuilder(reader ? reader : op->getBlock()->getTerminator());
  func::CallOp::create(waitBuilder, op->getLoc(), wait, ValueRange{request});
}

struct KilnLowerCollectivesPass
    : kiln::impl::KilnLowerCollectivesBase<KilnLowerCollectivesPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<Operation *> collectives;
    module.walk([&](Operation *op) {
      if (isa<kiln::AllReduceMeanOp, kiln::ReduceScatterMeanOp,
              kiln::AllGatherOp, kiln::LocalShardOp>(op))
        collectives.push_back(op);
    });
    for (Operation *op : collectives) {
      LogicalResult lowered =
          llvm::TypeSwitch<Operation *, LogicalResult>(op)
              .Case([&](kiln::AllReduceMeanOp reduce) {
                return lower(module, reduce);
              })
              .Case([&](kiln::ReduceScatterMeanOp scatter) {
                return lowerSharding(module, scatter, kReduceScatter);
              })
              .Case([&](kiln::AllGatherOp gather) {
                return lowerSharding(module, gather, kAllGather);
              })
              .Case([&](kiln::LocalShardOp shard) {
                return lowerSharding(module, shard, kLocalShard);
              });
      if (failed(lowered))
        return signalPassFailure();
    }
  }

  LogicalResult lower(ModuleOp module, kiln::AllReduceMeanOp op) {
    if (!op.hasBufferSemantics())
      return op.emitError("must be bufferized before kiln-lower-collectives");
    MLIRContext *context = op.getContext();
    Type ptr = LLVM::LLVMPointerType::get(context);
    Type i64 = IntegerType::get(context, 64);
    func::FuncOp begin = kiln::declareRuntimeFunction(
        module, kBegin, FunctionType::get(context, {ptr, i64}, {i64}));
    func::FuncOp wait = kiln::declareRuntimeFunction(
        module, kWait, FunctionType::get(context, {i64}, {}));
    OpBuilder b(op);
    Location loc = op.getLoc();
    for (Value buffer : op.getInputs()) {
      auto type = cast<MemRefType>(buffer.getType());
      if (!kiln::isPlainBuffer(type))
        return op.emitError("averages only contiguous buffers, not ") << type;
      Value address = kiln::bufferAddress(b, loc, buffer);
      Value count = arith::ConstantOp::create(
          b, loc, b.getI64IntegerAttr(type.getNumElements()));
      Value request =
          func::CallOp::create(b, loc, begin, ValueRange{address, count})
              .getResult(0);
      waitBeforeNextTouch(op, buffer, request, wait);
    }
    op.erase();
    return success();
  }

  /// `callee(input, output, shard elements, ranks)`; a collective (one that
  /// returns a request) is waited for before either buffer is touched again.
  template <typename Op>
  LogicalResult lowerSharding(ModuleOp module, Op op, StringRef callee) {
    if (!op.hasBufferSemantics())
      return op.emitError("must be bufferized before kiln-lower-collectives");
    for (Value buffer : {Value(op.getInput()), Value(op.getOutput())})
      if (!kiln::isPlainBuffer(buffer.getType()))
        return op.emitError("works only on contiguous buffers, not ")
               << buffer.getType();
    MLIRContext *context = op.getContext();
    Type ptr = LLVM::LLVMPointerType::get(context);
    Type i64 = IntegerType::get(context, 64);
    bool collective = callee != kLocalShard;
    func::FuncOp function = kiln::declareRuntimeFunction(
        module, callee,
        FunctionType::get(context, {ptr, ptr, i64, i64},
                          collective ? TypeRange{i64} : TypeRange{}));
    OpBuilder b(op);
    Location loc = op.getLoc();
    auto shard = cast<MemRefType>(
        (isa<kiln::AllGatherOp>(op) ? op.getInput() : op.getOutput())
            .getType());
    Value count = arith::ConstantOp::create(
        b, loc, b.getI64IntegerAttr(shard.getNumElements()));
    Value ranks = arith::ConstantOp::create(
        b, loc, b.getI64IntegerAttr(static_cast<int64_t>(op.getRanks())));
    auto call = func::CallOp::create(
        b, loc, function,
        ValueRange{kiln::bufferAddress(b, loc, op.getInput()),
                   kiln::bufferAddress(b, loc, op.getOutput()), count, ranks});
    if (collective)
      waitBeforeNextTouch(
          op, ValueRange{op.getInput(), op.getOutput()}, call.getResult(0),
          kiln::declareRuntimeFunction(module, kWait,
                                       FunctionType::get(context, {i64}, {})));
    op.erase();
    return success();
  }
};

} // namespace

void kiln::registerCollectivesBufferization(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *context, KilnDialect *) {
    AllReduceMeanOp::attachInterface<AllReduceMeanBufferization>(*context);
    ReduceScatterMeanOp::attachInterface<
        ShardingBufferization<ReduceScatterMeanOp>>(*context);
    AllGatherOp::attachInterface<ShardingBufferization<AllGatherOp>>(*context);
    LocalShardOp::attachInterface<ShardingBufferization<LocalShardOp>>(
        *context);
  });
}
