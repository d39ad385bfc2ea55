//===- AutoMixedPrecision.cpp - products on 16-bit operands ---------------===//
//
// Matrix products dominate a training step's arithmetic and run on tensor
// cores only with 16-bit operands. Rounding just their operands to bf16 (or
// f16), and keeping the f32 accumulation, the f32 master weights and f32
// everything else, is the usual mixed precision of training frameworks;
// bf16 keeps f32's exponent range, f16 needs the loss scaling of
// kiln-train-step.
//
//===----------------------------------------------------------------------===//

#include "NarrowStorage.h"

#include "kiln/KilnOps.h"
#include "kiln/Target/CUDA/Passes.h"
#include "kiln/Transforms/Utils/NarrowType.h"

#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"

namespace kiln {
#define GEN_PASS_DEF_KILNAUTOMIXEDPRECISION
#include "kiln/Target/CUDA/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace {

/// `value` (an f32 tensor) rounded to `element`, by a new elementwise op
/// after its definition.
Value roundAfter(OpBuilder &b, Value value, FloatType element) {
  auto type = cast<RankedTensorType>(value.getType());
  Location loc = value.getLoc();
  auto rounded = RankedTensorType::get(type.getShape(), element);
  Value init = tensor::EmptyOp::create(b, loc, type.getShape(), element);
  AffineMap identity = b.getMultiDimIdentityMap(type.getRank());
  SmallVector<utils::IteratorType> parallel(type.getRank(),
                                            utils::IteratorType::parallel);
  auto round = linalg::GenericOp::create(
      b, loc, TypeRange{rounded}, ValueRange{value}, ValueRange{init},
      ArrayRef<AffineMap>{identity, identity}, parallel,
      [&](OpBuilder &nb, Location nloc, ValueRange args) {
        linalg::YieldOp::create(
            nb, nloc,
            ValueRange{arith::TruncFOp::create(nb, nloc, element, args[0])});
      });
  return round.getResult(0);
}

/// The elementwise op computing `value` when it can also write `value`
/// rounded: a generic on tensors, all of whose loops are parallel, that is
/// no product, writing `value` through a permutation of its loops at a
/// static shape. Null otherwise.
linalg::GenericOp roundableProducer(Value value) {
  auto op = value.getDefiningOp<linalg::GenericOp>();
  if (!op || !op.hasPureTensorSemantics() || op->hasAttr("kiln.matmul") ||
      op.getNumLoops() != op.getNumParallelLoops() ||
      !cast<RankedTensorType>(value.getType()).hasStaticShape())
    return {};
  if (!op.getIndexingMapMatchingResult(cast<OpResult>(value)).isPermutation())
    return {};
  return op;
}

/// Whether an elementwise op or a transpose computes `value`, seen through
/// reshapes: roundWhereComputed then rounds it without a kernel of its own.
bool computedRoundable(Value value) {
  Operation *def = value.getDefiningOp();
  if (isa_and_nonnull<tensor::CollapseShapeOp, tensor::ExpandShapeOp>(def))
    return computedRoundable(def->getOperand(0));
  if (auto transpose = dyn_cast_or_null<linalg::TransposeOp>(def))
    return transpose.hasPureTensorSemantics();
  return roundableProducer(value) != nullptr;
}

/// `op` rebuilt with one more result, its last: its result `value` rounded
/// to `element`, computed by the same thread from the same element, so the
/// rounding costs no kernel and no second read. `op`'s results are replaced
/// by the new op's and `op` is erased.
linalg::GenericOp roundInProducer(linalg::GenericOp op, OpResult value,
                                  FloatType element) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  auto type = cast<RankedTensorType>(value.getType());
  SmallVector<Value> outputs(op.getDpsInits());
  outputs.push_back(tensor::EmptyOp::create(b, loc, type.getShape(), element));
  SmallVector<Type> resultTypes(op.getResultTypes());
  resultTypes.push_back(RankedTensorType::get(type.getShape(), element));
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  maps.push_back(op.getIndexingMapMatchingResult(value));
  auto rounding =
      linalg::GenericOp::create(b, loc, resultTypes, op.getDpsInputs(), outputs,
                                maps, op.getIteratorTypesArray());
  rounding->setDiscardableAttrs(op->getDiscardableAttrDictionary());
  rounding.getRegion().takeBody(op.getRegion());
  Block *body = rounding.getBody();
  body->addArgument(element, loc);
  auto yield = cast<linalg::YieldOp>(body->getTerminator());
  b.setInsertionPoint(yield);
  Value narrow = arith::TruncFOp::create(
      b, loc, element, yield.getOperand(value.getResultNumber()));
  yield->insertOperands(yield->getNumOperands(), narrow);
  op->replaceAllUsesWith(
      rounding->getResults().take_front(op->getNumResults()));
  op.erase();
  return rounding;
}

/// `op` without the results nothing reads (unless its body reads their
/// initial values), such as a result whose only reader was a product that
/// now reads its rounded copy.
void dropUnreadResults(linalg::GenericOp op) {
  IRRewriter rewriter(op);
  (void)linalg::deduplicateOperandsAndRemoveDeadResults(rewriter, op,
                                                        /*removeOutputs=*/true);
}

struct KilnAutoMixedPrecisionPass
    : kiln::impl::KilnAutoMixedPrecisionBase<KilnAutoMixedPrecisionPass> {
  using KilnAutoMixedPrecisionBase::KilnAutoMixedPrecisionBase;

  void runOnOperation() override {
    MLIRContext *context = &getContext();
    FloatType element = kiln::narrowFloatType(context, type);
    if (!element) {
      getOperation().emitError("kiln-amp: type must be bf16 or f16, not '")
          << type << "'";
      return signalPassFailure();
    }
    getOperation().walk([&](func::FuncOp function) {
      SmallVector<linalg::GenericOp> products;
      function.walk([&](linalg::GenericOp op) {
        if (op->hasAttr("kiln.matmul") && op.hasPureTensorSemantics() &&
            op.getNumDpsInputs() == 2 &&
            llvm::all_of(op.getDpsInputOperands(), [](OpOperand *input) {
              return getElementTypeOrSelf(input->get().getType()).isF32();
            }))
          products.push_back(op);
      });
      llvm::DenseMap<Value, Value> rounded;
      for (linalg::GenericOp op : products) {
        Block &body = op.getRegion().front();
        for (OpOperand *input : op.getDpsInputOperands()) {
          Value narrow = rounded.lookup(input->get());
          if (!narrow)
            narrow = round(input->get(), element, rounded);
          input->set(narrow);
          // The body reads the narrow element and widens it (exactly).
          kiln::widenWhereDefined(body.getArgument(input->getOperandNumber()),
                                  element);
        }
      }
      if (store)
        kiln::narrowProductStorage(function, element, [&](Value bias) {
          Value narrow = rounded.lookup(bias);
          return narrow ? narrow : round(bias, element, rounded);
        });
      // Concatenations and reshapes that only rounded copies were read
      // from go first (the later first), so that their producers' f32
      // results, and f32 layer norms now written rounded, go too.
      SmallVector<Operation *> views;
      function.walk([&](Operation *op) {
        if (isa<tensor::InsertSliceOp, tensor::CollapseShapeOp,
                tensor::ExpandShapeOp>(op))
          views.push_back(op);
      });
      for (Operation *op : llvm::reverse(views))
        if (op->use_empty())
          op->erase();
      for (linalg::GenericOp op : roundedInProducer)
        dropUnreadResults(op);
      roundedInProducer.clear();
      for (kiln::FusedLayerNormOp op : roundedLayerNorms)
        if (op->use_empty())
          op.erase();
      roundedLayerNorms.clear();
    });
  }

  /// The ops roundWhereComputed rebuilt, in this function.
  llvm::SetVector<linalg::GenericOp> roundedInProducer;
  /// The f32 layer norms roundLayerNorm replaced, in this function.
  llvm::SetVector<kiln::FusedLayerNormOp> roundedLayerNorms;

  /// A fused layer norm gradient's input gradient, rounded by the same
  /// kernel as a fifth result (the op is rebuilt with it); the f32 one
  /// stays, for the residual's gradient.
  Value roundLayerNormGrad(kiln::FusedLayerNormGradOp op, OpResult value,
                           FloatType element,
                           llvm::DenseMap<Value, Value> &rounded) {
    if (op.hasBufferSemantics() || value.getResultNumber() != 0 ||
        op->getNumResults() != 4)
      return {};
    return withRoundedResult(
        op, element, rounded, [&](OpBuilder &b, TypeRange types) {
          return kiln::FusedLayerNormGradOp::create(
              b, op.getLoc(), types, op.getInput(), op.getScale(), op.getGrad(),
              op.getAccumulate(), ValueRange{}, op.getEpsilonAttr());
        });
  }

  /// `op` rebuilt by `create` with one more result, its result 0 rounded
  /// to `element`: the old results' uses (and their entries in `rounded`)
  /// go to the new op's, and `rounded` maps its result 0 to the new one.
  template <typename OpT, typename Create>
  static Value withRoundedResult(OpT op, FloatType element,
                                 llvm::DenseMap<Value, Value> &rounded,
                                 Create create) {
    OpBuilder b(op);
    SmallVector<Type, 5> types(op->getResultTypes());
    types.push_back(cast<RankedTensorType>(types[0]).clone(element));
    OpT rebuilt = create(b, types);
    for (auto [old, now] : llvm::zip(op->getResults(), rebuilt->getResults()))
      if (Value narrow = rounded.lookup(old)) {
        rounded.erase(old);
        rounded[now] = narrow;
      }
    op->replaceAllUsesWith(
        rebuilt->getResults().take_front(op->getNumResults()));
    op.erase();
    return rounded[rebuilt->getResult(0)] = rebuilt->getResults().back();
  }

  /// Whether only products (through reshapes) read `value`: once they read
  /// a rounded copy, nothing needs it.
  static bool readOnlyByProducts(Value value) {
    return llvm::all_of(value.getUsers(), [](Operation *user) {
      if (isa<tensor::CollapseShapeOp, tensor::ExpandShapeOp>(user))
        return readOnlyByProducts(user->getResult(0));
      return user->hasAttr("kiln.matmul");
    });
  }

  /// A fused layer norm's f32 result that only products read, as the same
  /// layer norm writing it rounded (the kernels round as they store), so
  /// no kernel rounds it after; the f32 one goes once nothing reads it.
  /// (Not its residual's sum, which a kernel after it rounds.)
  Value roundLayerNorm(kiln::FusedLayerNormOp op, OpResult result,
                       FloatType element,
                       llvm::DenseMap<Value, Value> &rounded) {
    if (result.getResultNumber() != 0 || op.hasBufferSemantics() ||
        !getElementTypeOrSelf(result.getType()).isF32() || op.getCopy())
      return {};
    if (!readOnlyByProducts(result))
      return copyLayerNorm(op, element, rounded);
    OpBuilder b(op);
    SmallVector<Type, 2> types(op->getResultTypes());
    types[0] = cast<RankedTensorType>(types[0]).clone(element);
    auto narrow = kiln::FusedLayerNormOp::create(
        b, op.getLoc(), types, op.getInput(), op.getScale(), op.getBias(),
        op.getResidual(), ValueRange{}, op.getEpsilonAttr());
    // The residual's sum (f32 either way) is the new op's.
    if (op.getResidual())
      op.getResults()[1].replaceAllUsesWith(narrow.getResults()[1]);
    roundedLayerNorms.insert(op);
    return rounded[result] = narrow.getResults()[0];
  }

  /// A fused layer norm's f32 result that products and others read (a
  /// post-norm residual stream), as the same layer norm also writing it
  /// rounded, a copy for the products (the op is rebuilt with it).
  Value copyLayerNorm(kiln::FusedLayerNormOp op, FloatType element,
                      llvm::DenseMap<Value, Value> &rounded) {
    return withRoundedResult(
        op, element, rounded, [&](OpBuilder &b, TypeRange types) {
          return kiln::FusedLayerNormOp::create(
              b, op.getLoc(), types, op.getInput(), op.getScale(), op.getBias(),
              op.getResidual(), ValueRange{}, op.getEpsilonAttr());
        });
  }

  /// A concatenation (slices inserted into an empty tensor, as attention's
  /// q, k and v gradients into the qkv projection's) rounded as the same
  /// slices of its pieces, each rounded where computed, when every piece is
  /// computed so: one rounding kernel fewer, and the f32 concatenation goes
  /// if nothing else reads it. Null otherwise.
  Value roundConcatenation(tensor::InsertSliceOp last, FloatType element,
                           llvm::DenseMap<Value, Value> &rounded) {
    SmallVector<tensor::InsertSliceOp> chain;
    Value base = last.getResult();
    while (auto insert = base.getDefiningOp<tensor::InsertSliceOp>()) {
      chain.push_back(insert);
      base = insert.getDest();
    }
    auto empty = base.getDefiningOp<tensor::EmptyOp>();
    if (!empty || !empty.getType().hasStaticShape() ||
        !llvm::all_of(chain, [&](tensor::InsertSliceOp insert) {
          return rounded.lookup(insert.getSource()) ||
                 computedRoundable(insert.getSource());
        }))
      return {};
    OpBuilder b(last);
    Value narrow = tensor::EmptyOp::create(b, empty.getLoc(),
                                           empty.getType().getShape(), element);
    for (tensor::InsertSliceOp insert : llvm::reverse(chain)) {
      Value piece = rounded.lookup(insert.getSource());
      if (!piece)
        piece = round(insert.getSource(), element, rounded);
      narrow = tensor::InsertSliceOp::create(
          b, insert.getLoc(), piece, narrow, insert.getMixedOffsets(),
          insert.getMixedSizes(), insert.getMixedStrides());
    }
    return rounded[last.getResult()] = narrow;
  }

  /// `value` rounded to `element` and recorded in `rounded`: where it is
  /// computed (roundWhereComputed), else by a new op after it.
  Value round(Value value, FloatType element,
              llvm::DenseMap<Value, Value> &rounded) {
    if (Value narrow = roundWhereComputed(value, element, rounded))
      return narrow;
    OpBuilder b(value.getContext());
    if (Operation *def = value.getDefiningOp())
      b.setInsertionPointAfter(def);
    else
      b.setInsertionPointToStart(cast<BlockArgument>(value).getOwner());
    return rounded[value] = roundAfter(b, value, element);
  }

  /// `value` rounded by the elementwise op that computes it
  /// (roundableProducer), seen through reshapes (which then reshape the
  /// rounded tensor too); a transpose becomes such an op first. Records it
  /// in `rounded`, where a rebuilt op's results take the old ones' places.
  /// Null when `value` is not computed so.
  Value roundWhereComputed(Value value, FloatType element,
                           llvm::DenseMap<Value, Value> &rounded) {
    Operation *def = value.getDefiningOp();
    if (isa_and_nonnull<tensor::CollapseShapeOp, tensor::ExpandShapeOp>(def)) {
      Value source = def->getOperand(0);
      Value narrowSource = rounded.lookup(source);
      if (!narrowSource)
        narrowSource = roundWhereComputed(source, element, rounded);
      if (!narrowSource)
        return {};
      OpBuilder b(def);
      b.setInsertionPointAfterValue(narrowSource);
      IRMapping mapping;
      mapping.map(def->getOperand(0), narrowSource);
      Operation *reshape = b.clone(*def, mapping);
      auto type = cast<RankedTensorType>(value.getType());
      reshape->getResult(0).setType(
          RankedTensorType::get(type.getShape(), element));
      return rounded[value] = reshape->getResult(0);
    }
    if (auto insert = dyn_cast_or_null<tensor::InsertSliceOp>(def))
      return roundConcatenation(insert, element, rounded);
    if (auto transpose = dyn_cast_or_null<linalg::TransposeOp>(def)) {
      if (!transpose.hasPureTensorSemantics())
        return {};
      IRRewriter rewriter(transpose);
      FailureOr<linalg::GenericOp> generic =
          linalg::generalizeNamedOp(rewriter, transpose);
      if (failed(generic))
        return {};
      value = generic->getResult(0);
    }
    if (auto layerNorm = dyn_cast_or_null<kiln::FusedLayerNormOp>(def))
      return roundLayerNorm(layerNorm, cast<OpResult>(value), element, rounded);
    if (auto grad = dyn_cast_or_null<kiln::FusedLayerNormGradOp>(def))
      return roundLayerNormGrad(grad, cast<OpResult>(value), element, rounded);
    linalg::GenericOp producer = roundableProducer(value);
    if (!producer)
      return {};
    SmallVector<Value> old(producer->getResults());
    unsigned number = cast<OpResult>(value).getResultNumber();
    linalg::GenericOp rebuilt =
        roundInProducer(producer, cast<OpResult>(value), element);
    for (auto [i, result] : llvm::enumerate(old))
      if (Value narrow = rounded.lookup(result)) {
        rounded.erase(result);
        rounded[rebuilt->getResult(i)] = narrow;
      }
    roundedInProducer.remove(producer);
    roundedInProducer.insert(rebuilt);
    return rounded[rebuilt->getResult(number)] = rebuilt->getResults().back();
  }
};

} // namespace

FloatType kiln::narrowFloatType(MLIRContext *context, StringRef name) {
  if (name == "bf16")
    return BFloat16Type::get(context);
  if (name == "f16")
    return Float16Type::get(context);
  return {};
}
