//===- Gemm.cpp - matrix products on buffers, described for libraries -----===//

#include "kiln/Transforms/Utils/Gemm.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/CallInterfaces.h"

using namespace mlir;

namespace {

bool isContiguous(MemRefType type) {
  return type && type.hasStaticShape() && type.getLayout().isIdentity();
}

/// The zero fill of `init` (an output of `op`) just before `op`, if nothing
/// in between may touch `init`. Fills of `op`'s other outputs do not.
linalg::FillOp findZeroFill(linalg::GenericOp op, Value init) {
  for (Operation *prev = op->getPrevNode(); prev; prev = prev->getPrevNode()) {
    auto fill = dyn_cast<linalg::FillOp>(prev);
    if (fill && fill.hasPureBufferSemantics() && fill.getDpsInits()[0] == init)
      return matchPattern(fill.getDpsInputs()[0], m_AnyZeroFloat())
                 ? fill
                 : linalg::FillOp();
    if (fill && fill.hasPureBufferSemantics() &&
        llvm::is_contained(op.getDpsInits(), fill.getDpsInits()[0]))
      continue;
    // Anything else that may touch the output ends the search.
    if (llvm::is_contained(prev->getOperands(), init) ||
        prev->getNumRegions() > 0 || isa<CallOpInterface>(prev))
      return {};
  }
  return {};
}

/// The kiln.gemm_bias broadcast into `init` just before `op`, if nothing in
/// between may touch `init` (or anything else: a kernel in between might
/// write the bias, which the epilogue reads later than the broadcast did).
linalg::GenericOp findBiasInit(Operation *op, Value init) {
  for (Operation *prev = op->getPrevNode(); prev; prev = prev->getPrevNode()) {
    auto generic = dyn_cast<linalg::GenericOp>(prev);
    if (generic && generic->hasAttr("kiln.gemm_bias") &&
        generic.hasPureBufferSemantics() && generic.getNumDpsInputs() == 1 &&
        generic.getNumDpsInits() == 1 && generic.getDpsInits()[0] == init)
      return generic;
    if (!isPure(prev) || prev->getNumRegions() > 0)
      return {};
  }
  return {};
}

} // namespace

linalg::GenericOp kiln::zeroFilledProduct(Value v,
                                          tensor::ExpandShapeOp &expand) {
  expand = v.getDefiningOp<tensor::ExpandShapeOp>();
  if (expand) {
    if (!v.hasOneUse())
      return {};
    v = expand.getSrc();
  }
  auto product = v.getDefiningOp<linalg::GenericOp>();
  if (!product || !product->hasAttr("kiln.matmul") || !v.hasOneUse() ||
      !product.hasPureTensorSemantics() || product.getNumDpsInits() != 1)
    return {};
  auto fill = product.getDpsInits()[0].getDefiningOp<linalg::FillOp>();
  if (!fill || !matchPattern(fill.getDpsInputs()[0], m_AnyZeroFloat()))
    return {};
  return product;
}

std::optional<kiln::MatrixLayout> kiln::matrixLayout(MemRefType type) {
  if (!type || !type.hasStaticShape() || type.getRank() < 2)
    return std::nullopt;
  SmallVector<int64_t> strides;
  int64_t offset;
  if (failed(type.getStridesAndOffset(strides, offset)) ||
      ShapedType::isDynamic(offset) ||
      llvm::any_of(strides, ShapedType::isDynamic))
    return std::nullopt;
  ArrayRef<int64_t> shape = type.getShape();
  int64_t rank = type.getRank();
  int64_t rows = shape[rank - 2], cols = shape[rank - 1];
  MatrixLayout layout;
  layout.offset = offset;
  // A dimension of one element has a stride nothing reads.
  if (cols > 1 && strides[rank - 1] != 1)
    return std::nullopt;
  layout.leadingDim = rows > 1 ? strides[rank - 2] : cols;
  if (layout.leadingDim < cols)
    return std::nullopt;
  // The batch dimensions, innermost first, must step as one dimension.
  int64_t next = rows * layout.leadingDim;
  layout.batchStride = 0;
  for (int64_t d = rank - 3; d >= 0; --d) {
    if (shape[d] == 1)
      continue;
    if (layout.batchStride == 0) {
      if (strides[d] < next)
        return std::nullopt;
      layout.batchStride = strides[d];
    } else if (strides[d] != next) {
      return std::nullopt;
    }
    next = strides[d] * shape[d];
  }
  if (layout.batchStride == 0)
    layout.batchStride = rows * layout.leadingDim;
  return layout;
}

std::optional<kiln::GemmDescription> kiln::describeGemm(linalg::GenericOp op) {
  auto flags = op->getAttrOfType<DictionaryAttr>("kiln.matmul");
  bool biasGrad = flags && flags.contains("bias_grad");
  if (!flags || !op.hasPureBufferSemantics() || op.getNumDpsInputs() != 2 ||
      op.getNumDpsInits() != (biasGrad ? 2u : 1u))
    return std::nullopt;
  GemmDescription gemm;
  gemm.lhs = op.getDpsInputs()[0];
  gemm.rhs = op.getDpsInputs()[1];
  gemm.out = op.getDpsInits()[0];
  auto lhsType = dyn_cast<MemRefType>(gemm.lhs.getType());
  auto rhsType = dyn_cast<MemRefType>(gemm.rhs.getType());
  auto outType = dyn_cast<MemRefType>(gemm.out.getType());
  MemRefType types[3] = {lhsType, rhsType, outType};
  for (int i = 0; i < 3; ++i) {
    std::optional<MatrixLayout> layout = matrixLayout(types[i]);
    if (!layout)
      return std::nullopt;
    gemm.ld[i] = layout->leadingDim;
    gemm.batchStride[i] = layout->batchStride;
  }
  if (lhsType.getRank() != outType.getRank() ||
      rhsType.getRank() != outType.getRank() ||
      lhsType.getElementType() != rhsType.getElementType())
    return std::nullopt;
  // Operands of the output's type, or 16-bit floats accumulated in f32
  // (kiln-amp).
  Type input = lhsType.getElementType(), output = outType.getElementType();
  if (input != output && !((input.isBF16() || input.isF16()) && output.isF32()))
    return std::nullopt;
  gemm.transposeLhs = flags.contains("transpose_lhs");
  gemm.transposeRhs = flags.contains("transpose_rhs");
  int64_t rank = outType.getRank();
  gemm.m = outType.getDimSize(rank - 2);
  gemm.n = outType.getDimSize(rank - 1);
  gemm.k = lhsType.getDimSize(rank - (gemm.transposeLhs ? 2 : 1));
  for (int64_t d = 0; d < rank - 2; ++d)
    gemm.batch *= outType.getDimSize(d);
  if (biasGrad) {
    gemm.biasGrad = op.getDpsInits()[1];
    gemm.biasGradOfLhs = flags.contains("bias_grad_of_lhs");
    auto type = dyn_cast<MemRefType>(gemm.biasGrad.getType());
    if (rank != 2 || !isContiguous(type) || type.getRank() != 1 ||
        type.getElementType() != output ||
        type.getDimSize(0) != (gemm.biasGradOfLhs ? gemm.m : gemm.n))
      return std::nullopt;
    if (!flags.contains("bias_grad_overwrite")) {
      gemm.biasGradFill = findZeroFill(op, gemm.biasGrad);
      if (!gemm.biasGradFill)
        return std::nullopt;
    }
  }
  gemm.overwrite = flags.contains("overwrite");
  if (!gemm.overwrite)
    gemm.zeroFill = findZeroFill(op, gemm.out);
  if (!gemm.overwrite && !gemm.zeroFill) {
    gemm.biasInit = findBiasInit(op, gemm.out);
    if (gemm.biasInit)
      gemm.bias = gemm.biasInit.getDpsInputs()[0];
  }
  return gemm;
}

bool kiln::hasBiasGradOutput(linalg::GenericOp op) {
  auto flags = op->getAttrOfType<DictionaryAttr>("kiln.matmul");
  return flags && flags.contains("bias_grad") && op.getNumDpsInits() == 2;
}

linalg::GenericOp kiln::splitBiasGrad(linalg::GenericOp op) {
  MLIRContext *context = op.getContext();
  NamedAttrList flags(op->getAttrOfType<DictionaryAttr>("kiln.matmul"));
  bool ofLhs = flags.get("bias_grad_of_lhs") != nullptr;
  bool overwrite = flags.get("bias_grad_overwrite") != nullptr;
  for (StringRef flag :
       {"bias_grad", "bias_grad_of_lhs", "bias_grad_overwrite"})
    flags.erase(flag);
  OpBuilder b(op);
  Location loc = op.getLoc();
  Value vector = op.getDpsInits()[1];
  Value operand = op.getDpsInputs()[ofLhs ? 0 : 1];
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  maps.pop_back();
  auto product = linalg::GenericOp::create(
      b, loc, TypeRange{}, op.getDpsInputs(), op.getDpsInits()[0], maps,
      op.getIteratorTypesArray());
  IRMapping mapping;
  op.getRegion().cloneInto(&product.getRegion(), mapping);
  Block *body = product.getBody();
  auto yield = cast<linalg::YieldOp>(body->getTerminator());
  yield->eraseOperand(1);
  for (Operation &inner : llvm::make_early_inc_range(llvm::reverse(*body)))
    if (&inner != yield && inner.use_empty() && isPure(&inner))
      inner.erase();
  body->eraseArgument(body->getNumArguments() - 1);
  product->setAttr("kiln.matmul", flags.getDictionary(context));

  Type element = cast<MemRefType>(vector.getType()).getElementType();
  if (overwrite)
    linalg::FillOp::create(
        b, loc,
        arith::ConstantOp::create(b, loc, b.getZeroAttr(element)).getResult(),
        vector);
  AffineMap rows = AffineMap::getMultiDimIdentityMap(2, context);
  AffineMap columns = AffineMap::get(2, 0, getAffineDimExpr(1, context));
  linalg::GenericOp::create(
      b, loc, TypeRange{}, operand, vector, ArrayRef<AffineMap>{rows, columns},
      ArrayRef<utils::IteratorType>{utils::IteratorType::reduction,
                                    utils::IteratorType::parallel},
      [&](OpBuilder &nb, Location nloc, ValueRange args) {
        Value term = args[0];
        if (term.getType() != element)
          term = arith::ExtFOp::create(nb, nloc, element, term);
        linalg::YieldOp::create(
            nb, nloc,
            ValueRange{arith::AddFOp::create(nb, nloc, args[1], term)});
      });
  op.erase();
  return product;
}

/// `v` without the reshapes that view it.
static Value unreshaped(Value v) {
  while (Operation *def = v.getDefiningOp()) {
    if (!isa<memref::ExpandShapeOp, memref::CollapseShapeOp>(def))
      break;
    v = def->getOperand(0);
  }
  return v;
}

linalg::GenericOp
kiln::geluEpilogueOf(linalg::GenericOp product, Value &aux,
                     llvm::SmallVectorImpl<Operation *> *between) {
  aux = {};
  auto flags = product->getAttrOfType<DictionaryAttr>("kiln.matmul");
  if (!flags || !(flags.contains("gelu") || flags.contains("dgelu")) ||
      !product.hasPureBufferSemantics() || product.getNumDpsInits() != 1)
    return {};
  Value out = unreshaped(product.getDpsInits()[0]);
  for (Operation *op = product->getNextNode(); op; op = op->getNextNode()) {
    auto epilogue = dyn_cast<linalg::GenericOp>(op);
    bool readsProduct = false;
    Value other;
    if (epilogue && epilogue->hasAttr("kiln.gemm_epilogue") &&
        epilogue.hasPureBufferSemantics() && epilogue.getNumDpsInits() == 1)
      for (Value input : epilogue.getDpsInputs()) {
        if (unreshaped(input) == out)
          readsProduct = true;
        else
          other = unreshaped(input);
      }
    if (!readsProduct) {
      if (between && !isPure(op))
        between->push_back(op);
      continue;
    }
    if (flags.contains("dgelu")) {
      if (!other)
        return {};
      aux = other;
    } else if (flags.contains("gelu_aux")) {
      aux = out;
    }
    return epilogue;
  }
  return {};
}

void kiln::dropGeluEpilogue(linalg::GenericOp product,
                            linalg::GenericOp epilogue) {
  NamedAttrList flags(product->getAttrOfType<DictionaryAttr>("kiln.matmul"));
  for (StringRef flag : {"gelu", "gelu_aux", "dgelu"})
    flags.erase(flag);
  product->setAttr("kiln.matmul", flags.getDictionary(product.getContext()));
  if (epilogue)
    epilogue->removeAttr("kiln.gemm_epilogue");
}
