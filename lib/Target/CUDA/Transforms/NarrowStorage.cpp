//===- NarrowStorage.cpp - products that store their results in 16 bits ---===//
//
// Under autocast, a linear layer's output is a bf16 tensor: the product sums
// in f32 and rounds once as it stores. Everything that reads it after (the
// activation, the residual addition, softmax) reads half the bytes it would
// read in f32. kiln-amp does the same for every product whose result is an
// activation or an activation's gradient; the products whose result goes,
// through elementwise work only, to what the step returns (a parameter's
// gradient on its way to the optimizer, a model's output) keep f32.
//
//===----------------------------------------------------------------------===//

#include "NarrowStorage.h"

#include "kiln/KilnOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/DenseSet.h"

using namespace mlir;

namespace {

/// Ops that only view their first operand's elements.
bool isView(Operation *op) {
  return isa<tensor::CollapseShapeOp, tensor::ExpandShapeOp,
             tensor::ExtractSliceOp>(op);
}

/// Whether `op` computes each element of its results from the same element
/// of its inputs, or a broadcast of them: a linalg.generic on tensors whose
/// loops are all parallel and that is no product.
bool isElementwise(Operation *op) {
  auto generic = dyn_cast<linalg::GenericOp>(op);
  return generic && generic.hasPureTensorSemantics() &&
         !generic->hasAttr("kiln.matmul") &&
         generic.getNumLoops() == generic.getNumParallelLoops();
}

/// Whether `use` is an operand the runtime's layer-norm kernels read in 16
/// bits too (widening each element): a forward's input or residual when it
/// has a residual (the kernels' later passes read the f32 sum), a
/// backward's grad or accumulate.
bool readsNarrow(OpOperand &use) {
  Value value = use.get();
  if (auto norm = dyn_cast<kiln::FusedLayerNormOp>(use.getOwner()))
    return !norm.hasBufferSemantics() && norm.getResidual() &&
           (value == norm.getInput() || value == norm.getResidual());
  if (auto grad = dyn_cast<kiln::FusedLayerNormGradOp>(use.getOwner()))
    return !grad.hasBufferSemantics() && value != grad.getInput() &&
           (value == grad.getGrad() || value == grad.getAccumulate());
  return false;
}

/// The operands of linalg.generic ops on tensors that read `value` as an
/// input, and of tensor.extract ops that read one of its elements (a loss
/// reading the logit of each label), seen through views (which go to
/// `views`, outer first); the layer-norm kernels' reads (readsNarrow) need
/// nothing. False when
/// anything else uses it: an op writing into it, a kernel of the runtime's,
/// the function's return.
bool collectReaders(Value value, SmallVectorImpl<OpOperand *> &readers,
                    SmallVectorImpl<Operation *> &views) {
  for (OpOperand &use : value.getUses()) {
    Operation *user = use.getOwner();
    if (isView(user) && use.getOperandNumber() == 0) {
      views.push_back(user);
      if (!collectReaders(user->getResult(0), readers, views))
        return false;
      continue;
    }
    if (readsNarrow(use))
      continue;
    auto generic = dyn_cast<linalg::GenericOp>(user);
    if (!isa<tensor::ExtractOp>(user) &&
        (!generic || !generic.hasPureTensorSemantics() ||
         !generic.isDpsInput(&use)))
      return false;
    readers.push_back(&use);
  }
  return true;
}

/// Whether `value` flows, through views, concatenations and elementwise
/// ops only, into what the function returns or into an op this pass does
/// not know (a collective): a parameter's gradient on its way to the
/// optimizer, a model's output. Products, reductions, normalizations and
/// attention end the search: what they compute is f32 again.
bool reachesOutside(Value value, llvm::DenseSet<Value> &seen) {
  if (!seen.insert(value).second)
    return false;
  Block *block = value.getParentBlock();
  for (Operation *nested : value.getUsers()) {
    // An op in the region of another (a tensor.extract in a loss kernel's
    // body) is that op's read.
    Operation *user = block->findAncestorOpInBlock(*nested);
    if (!user)
      return true;
    if (isView(user) || isa<tensor::InsertSliceOp>(user) ||
        isElementwise(user)) {
      for (Value result : user->getResults())
        if (reachesOutside(result, seen))
          return true;
      continue;
    }
    if (isa<linalg::GenericOp, kiln::FusedLayerNormOp,
            kiln::FusedLayerNormGradOp, kiln::FlashAttentionOp,
            kiln::FlashAttentionGradOp>(user))
      continue;
    return true;
  }
  return false;
}

/// The product `op`'s f32 result stored in `element` instead, when that is
/// sound: its operands are `element` already (kiln-amp rounded them), it
/// starts from zero or from a bias broadcast (kilnGemmBias) that only it
/// reads, only linalg.generic inputs read its result, and that result is no
/// parameter's gradient or output (reachesOutside). Returns whether it
/// narrowed it.
bool narrowProduct(linalg::GenericOp op, FloatType element,
                   llvm::function_ref<Value(Value)> roundBias) {
  if (!op->hasAttr("kiln.matmul") || !op.hasPureTensorSemantics() ||
      op.getNumDpsInputs() != 2 || op.getNumDpsInits() != 1 ||
      !getElementTypeOrSelf(op.getResult(0).getType()).isF32() ||
      !llvm::all_of(op.getDpsInputs(), [&](Value input) {
        return getElementTypeOrSelf(input.getType()) == element;
      }))
    return false;
  Value init = op.getDpsInits()[0];
  if (!init.hasOneUse())
    return false;
  auto fill = init.getDefiningOp<linalg::FillOp>();
  auto bias = init.getDefiningOp<linalg::GenericOp>();
  if (fill && !matchPattern(fill.getDpsInputs()[0], m_AnyZeroFloat()))
    return false;
  if (bias &&
      (!bias->hasAttr("kiln.gemm_bias") || bias.getNumDpsInputs() != 1 ||
       !bias.getDpsInits()[0].getDefiningOp<tensor::EmptyOp>()))
    return false;
  if (!fill && !bias)
    return false;
  SmallVector<OpOperand *> readers;
  SmallVector<Operation *> views;
  llvm::DenseSet<Value> seen;
  if (!collectReaders(op.getResult(0), readers, views) ||
      reachesOutside(op.getResult(0), seen))
    return false;

  OpBuilder b(op);
  Location loc = op.getLoc();
  auto type = cast<RankedTensorType>(op.getResult(0).getType());
  auto narrowType = type.clone(element);
  Value empty = tensor::EmptyOp::create(b, loc, type.getShape(), element);
  Value start;
  if (fill) {
    Value zero =
        arith::ConstantOp::create(b, loc, element, b.getZeroAttr(element));
    start = linalg::FillOp::create(b, loc, zero, empty).getResult(0);
  } else {
    // cuBLASLt's bias epilogue reads a vector of the output's type.
    Value vector = roundBias(bias.getDpsInputs()[0]);
    b.setInsertionPoint(op);
    auto broadcast = linalg::GenericOp::create(
        b, loc, TypeRange{narrowType}, ValueRange{vector}, ValueRange{empty},
        bias.getIndexingMapsArray(), bias.getIteratorTypesArray(),
        [](OpBuilder &nb, Location nloc, ValueRange args) {
          linalg::YieldOp::create(nb, nloc, ValueRange{args[0]});
        });
    broadcast->setAttr("kiln.gemm_bias", b.getUnitAttr());
    start = broadcast.getResult(0);
  }
  op.getDpsInitsMutable()[0].set(start);
  init.getDefiningOp()->erase();
  op.getResult(0).setType(narrowType);

  // The body as linalg reads it sums in `element`; the flag says that the
  // sum is f32 and rounds once, as the libraries compute it
  // (kiln-gpu-emulate widens the sum for the host).
  Block *body = op.getBody();
  kiln::widenWhereDefined(body->getArguments().back(), element);
  auto yield = cast<linalg::YieldOp>(body->getTerminator());
  OpBuilder nb(yield);
  yield->setOperand(
      0, arith::TruncFOp::create(nb, loc, element, yield->getOperand(0)));
  NamedAttrList flags(op->getAttrOfType<DictionaryAttr>("kiln.matmul"));
  flags.set("round_once", b.getUnitAttr());
  op->setAttr("kiln.matmul", flags.getDictionary(op.getContext()));

  for (Operation *view : views) {
    auto viewType = cast<RankedTensorType>(view->getResult(0).getType());
    view->getResult(0).setType(viewType.clone(element));
  }
  // Each reader widens the element as it reads it.
  for (OpOperand *reader : readers) {
    if (auto extract = dyn_cast<tensor::ExtractOp>(reader->getOwner()))
      kiln::widenWhereDefined(extract.getResult(), element);
    else
      kiln::widenWhereDefined(cast<linalg::GenericOp>(reader->getOwner())
                                  .getMatchingBlockArgument(reader),
                              element);
  }
  return true;
}

} // namespace

void kiln::widenWhereDefined(Value value, FloatType element) {
  value.setType(element);
  OpBuilder b(value.getContext());
  // At the op that owns the block, or that defines the value.
  Location loc = value.getLoc();
  if (auto argument = dyn_cast<BlockArgument>(value)) {
    b.setInsertionPointToStart(argument.getOwner());
    loc = argument.getOwner()->getParentOp()->getLoc();
  } else {
    b.setInsertionPointAfterValue(value);
  }
  Value wide = arith::ExtFOp::create(b, loc, b.getF32Type(), value);
  value.replaceAllUsesExcept(wide, wide.getDefiningOp());
}

unsigned kiln::narrowProductStorage(func::FuncOp function, FloatType element,
                                    llvm::function_ref<Value(Value)> round) {
  SmallVector<linalg::GenericOp> products;
  function.walk([&](linalg::GenericOp op) {
    if (op->hasAttr("kiln.matmul"))
      products.push_back(op);
  });
  unsigned narrowed = 0;
  for (linalg::GenericOp op : products)
    narrowed += narrowProduct(op, element, round);
  return narrowed;
}
