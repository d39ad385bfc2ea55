//===- Collectives.cpp - data-parallel collectives through buffers --------===//
//
// kiln.all_reduce_mean averages values over the ranks of a run. On tensors
// it bufferizes in place (each result is its operand's buffer), and on the
// CPU its buffer form becomes calls into the runtime's collectives: a
// non-blocking start where the op is, and a wait just before the buffer is
// touched again.
//
//===----------------------------------------------------------------------===//

#include "kiln/KilnOps.h"
#include "kiln/Transforms/Collectives.h"
#include "kiln/Transforms/Passes.h"

#include "mlir/Dialect/Bufferization/IR/BufferizableOpInterface.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

namespace kiln {
#define GEN_PASS_DEF_KILNLOWERCOLLECTIVES
#include "kiln/Transforms/Passes.h.inc"
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

constexpr const char *kBegin = "kiln_collective_all_reduce_mean_f32_begin";
constexpr const char *kWait = "kiln_collective_wait";

func::FuncOp declare(ModuleOp module, StringRef name, FunctionType type) {
  if (auto existing = module.lookupSymbol<func::FuncOp>(name))
    return existing;
  OpBuilder b(module.getBodyRegion());
  auto function = func::FuncOp::create(b, module.getLoc(), name, type);
  function.setPrivate();
  return function;
}

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

struct KilnLowerCollectivesPass
    : kiln::impl::KilnLowerCollectivesBase<KilnLowerCollectivesPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<kiln::AllReduceMeanOp> collectives;
    module.walk([&](kiln::AllReduceMeanOp op) { collectives.push_back(op); });
    for (kiln::AllReduceMeanOp op : collectives)
      if (failed(lower(module, op)))
        return signalPassFailure();
  }

  LogicalResult lower(ModuleOp module, kiln::AllReduceMeanOp op) {
    if (!op.hasBufferSemantics())
      return op.emitError("must be bufferized before kiln-lower-collectives");
    MLIRContext *context = op.getContext();
    Type ptr = LLVM::LLVMPointerType::get(context);
    Type i64 = IntegerType::get(context, 64);
    func::FuncOp begin = declare(module, kBegin,
                                 FunctionType::get(context, {ptr, i64}, {i64}));
    func::FuncOp wait =
        declare(module, kWait, FunctionType::get(context, {i64}, {}));
    OpBuilder b(op);
    Location loc = op.getLoc();
    for (Value buffer : op.getInputs()) {
      auto type = cast<MemRefType>(buffer.getType());
      if (!type.getLayout().isIdentity())
        return op.emitError("averages only contiguous buffers, not ") << type;
      Value base = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, buffer);
      Value integer = arith::IndexCastOp::create(b, loc, i64, base);
      Value address = LLVM::IntToPtrOp::create(b, loc, ptr, integer);
      Value count = arith::ConstantOp::create(
          b, loc, b.getI64IntegerAttr(type.getNumElements()));
      Value request =
          func::CallOp::create(b, loc, begin, ValueRange{address, count})
              .getResult(0);
      // The wait goes before the first later op that touches the buffer,
      // through it or a view of it.
      llvm::SmallPtrSet<Value, 8> aliases;
      aliases.insert(buffer);
      for (Value source = buffer; auto view = dyn_cast_or_null<
                                      ViewLikeOpInterface>(source.getDefiningOp());
           source = view.getViewSource())
        aliases.insert(view.getViewSource());
      Operation *reader = op->getNextNode();
      for (; reader && !reader->hasTrait<OpTrait::IsTerminator>();
           reader = reader->getNextNode()) {
        // Views, addresses and address arithmetic (pure ops) only name
        // the buffer; what they compute is another alias.
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
      func::CallOp::create(waitBuilder, loc, wait, ValueRange{request});
    }
    op.erase();
    return success();
  }
};

} // namespace

void kiln::registerCollectivesBufferization(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *context, KilnDialect *) {
    AllReduceMeanOp::attachInterface<AllReduceMeanBufferization>(*context);
  });
}
