//===- GemmGelu.cpp - tanh GELUs and their gradients as gemm epilogues ----===//
//
// A GPT-style MLP applies the tanh GELU to its first product's result, and
// its backward pass multiplies the gradient product's result by the GELU's
// derivative at that stored result. cuBLASLt does either as it stores a
// product (its GELU and DGELU epilogues), which saves the elementwise
// kernel's read of the product. This pass pairs each such elementwise op
// with its product by marking both; the CUDA target fuses the pair where
// the buffers allow (kiln-gpu-outline-kernels), so the IR keeps its
// meaning for every other consumer.
//
//===----------------------------------------------------------------------===//

#include "kiln/Target/CUDA/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"

#include <cmath>

namespace kiln {
#define GEN_PASS_DEF_KILNGEMMGELU
#include "kiln/Target/CUDA/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace {

/// The tanh GELU and its derivative, as PyTorch's gelu(approximate="tanh")
/// and cuBLASLt's GELU epilogues define them.
double gelu(double x) {
  double inner = std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
  return 0.5 * x * (1.0 + std::tanh(inner));
}
double geluGrad(double x) {
  double inner = std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
  double t = std::tanh(inner);
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * std::sqrt(2.0 / M_PI) *
                               (1.0 + 3.0 * 0.044715 * x * x);
}

/// Where the formulas are compared: across the GELU's curved part and its
/// tails, where an erf GELU differs by up to 4e-4.
constexpr double kPoints[] = {-4.0, -2.5, -1.2, -0.6, -0.1, 0.0,
                              0.05, 0.3,  0.8,  1.7,  3.2};

bool close(double got, double want) {
  return std::isfinite(got) &&
         std::fabs(got - want) <= 1e-5 * std::max(1.0, std::fabs(want));
}

/// The value `body` yields first, in double precision, for `args` as its
/// first block arguments; std::nullopt when it reads anything else (a
/// later block argument, an index) or has an op this does not evaluate.
/// Roundings (extf, truncf) are exact here: the check is of the formula.
std::optional<double> evaluate(Block *body, ArrayRef<double> args) {
  DenseMap<Value, double> values;
  for (auto [i, value] : llvm::enumerate(args))
    values[body->getArgument(i)] = value;
  auto get = [&](Value v) -> std::optional<double> {
    if (auto it = values.find(v); it != values.end())
      return it->second;
    FloatAttr constant;
    if (matchPattern(v, m_Constant(&constant)))
      return constant.getValueAsDouble();
    return std::nullopt;
  };
  for (Operation &op : body->without_terminator()) {
    if (op.getNumResults() != 1 || !isa<FloatType>(op.getResult(0).getType()))
      return std::nullopt;
    SmallVector<double, 3> in;
    for (Value operand : op.getOperands()) {
      std::optional<double> value = get(operand);
      if (!value)
        return std::nullopt;
      in.push_back(*value);
    }
    double out;
    if (isa<arith::ConstantOp>(op)) {
      std::optional<double> value = get(op.getResult(0));
      if (!value)
        return std::nullopt;
      out = *value;
    } else if (isa<arith::ExtFOp, arith::TruncFOp>(op))
      out = in[0];
    else if (isa<arith::NegFOp>(op))
      out = -in[0];
    else if (isa<arith::AddFOp>(op))
      out = in[0] + in[1];
    else if (isa<arith::SubFOp>(op))
      out = in[0] - in[1];
    else if (isa<arith::MulFOp>(op))
      out = in[0] * in[1];
    else if (isa<arith::DivFOp>(op))
      out = in[0] / in[1];
    else if (isa<math::TanhOp>(op))
      out = std::tanh(in[0]);
    else if (isa<math::ExpOp>(op))
      out = std::exp(in[0]);
    else if (isa<math::PowFOp>(op))
      out = std::pow(in[0], in[1]);
    else if (isa<math::SqrtOp>(op))
      out = std::sqrt(in[0]);
    else if (isa<math::FmaOp>(op))
      out = in[0] * in[1] + in[2];
    else
      return std::nullopt;
    values[op.getResult(0)] = out;
  }
  auto yield = cast<linalg::YieldOp>(body->getTerminator());
  if (yield->getNumOperands() != 1)
    return std::nullopt;
  return get(yield->getOperand(0));
}

/// Whether `op` is elementwise over identity maps with `inputs` inputs, one
/// output whose initial value it does not read, all on tensors.
bool isPlainElementwise(linalg::GenericOp op, unsigned inputs) {
  if (!op.hasPureTensorSemantics() || op.getNumDpsInputs() != inputs ||
      op.getNumDpsInits() != 1 ||
      op.getNumLoops() != op.getNumParallelLoops() ||
      !llvm::all_of(op.getIndexingMapsArray(),
                    [](AffineMap map) { return map.isIdentity(); }))
    return false;
  return op.getBody()->getArgument(inputs).use_empty();
}

/// The unbatched product whose result `v` is (directly, or through a
/// tensor.expand_shape that keeps its columns), when it overwrites its
/// output (a zero fill, or with `allowBias` a kiln-gemm-bias broadcast),
/// has no bias gradient or epilogue yet and stores `element`; null
/// otherwise. `expand` receives the reshape, if any.
linalg::GenericOp productBehind(Value v, Type element, bool allowBias,
                                tensor::ExpandShapeOp &expand) {
  expand = v.getDefiningOp<tensor::ExpandShapeOp>();
  if (expand) {
    if (expand.getReassociationIndices().back().size() != 1)
      return {};
    v = expand.getSrc();
  }
  auto product = v.getDefiningOp<linalg::GenericOp>();
  if (!product || !product.hasPureTensorSemantics() ||
      product.getNumLoops() != 3 || product.getNumDpsInits() != 1 ||
      product.getNumDpsInputs() != 2)
    return {};
  auto flags = product->getAttrOfType<DictionaryAttr>("kiln.matmul");
  if (!flags || flags.contains("bias_grad") || flags.contains("gelu") ||
      flags.contains("dgelu"))
    return {};
  if (getElementTypeOrSelf(product.getResult(0).getType()) != element)
    return {};
  Operation *init = product.getDpsInits()[0].getDefiningOp();
  auto fill = dyn_cast_or_null<linalg::FillOp>(init);
  bool zeroFilled =
      fill && matchPattern(fill.getDpsInputs()[0], m_AnyZeroFloat());
  bool biased = allowBias && init && init->hasAttr("kiln.gemm_bias");
  if (!zeroFilled && !biased)
    return {};
  return product;
}

/// Whether `v` has readers other than `op`, directly or through `expand`.
bool readByOthers(Value v, tensor::ExpandShapeOp expand, Operation *op) {
  for (Operation *user : v.getUsers()) {
    if (user == expand.getOperation()) {
      for (Operation *reader : expand.getResult().getUsers())
        if (reader != op)
          return true;
    } else if (user != op) {
      return true;
    }
  }
  return false;
}

void setFlag(linalg::GenericOp product, StringRef flag) {
  NamedAttrList flags(product->getAttrOfType<DictionaryAttr>("kiln.matmul"));
  flags.set(flag, UnitAttr::get(product.getContext()));
  product->setAttr("kiln.matmul", flags.getDictionary(product.getContext()));
}

/// Marks `op` the epilogue of the product before it, and gives it an output
/// tensor of its own: a tensor.empty it shares with other ops (CSE merges
/// them) lets bufferization write its output into the buffer of a tensor
/// one of them produced once that is dead, which the product, writing the
/// output early, would clobber while it is still read.
void markEpilogue(linalg::GenericOp op) {
  op->setAttr("kiln.gemm_epilogue", UnitAttr::get(op.getContext()));
  OpOperand &init = op.getDpsInitsMutable()[0];
  auto empty = init.get().getDefiningOp<tensor::EmptyOp>();
  if (!empty || empty->hasOneUse())
    return;
  OpBuilder b(op);
  init.set(tensor::EmptyOp::create(b, empty.getLoc(), empty.getType(),
                                   empty.getDynamicSizes()));
}

struct KilnGemmGeluPass : kiln::impl::KilnGemmGeluBase<KilnGemmGeluPass> {
  void runOnOperation() override {
    SmallVector<linalg::GenericOp> candidates;
    getOperation().walk([&](linalg::GenericOp op) {
      if (!op->hasAttr("kiln.matmul") && !op->hasAttr("kiln.gemm_epilogue"))
        candidates.push_back(op);
    });
    for (linalg::GenericOp op : candidates) {
      if (matchForward(op))
        ++numForward;
      else if (matchBackward(op))
        ++numBackward;
    }
  }

  /// gelu(P): marks P `gelu` (and `gelu_aux` when P has other readers).
  bool matchForward(linalg::GenericOp op) {
    if (!isPlainElementwise(op, 1))
      return false;
    Type element = getElementTypeOrSelf(op.getResult(0).getType());
    tensor::ExpandShapeOp expand;
    linalg::GenericOp product =
        productBehind(op.getDpsInputs()[0], element, true, expand);
    if (!product)
      return false;
    for (double x : kPoints) {
      std::optional<double> got = evaluate(op.getBody(), {x});
      if (!got || !close(*got, gelu(x)))
        return false;
    }
    setFlag(product, "gelu");
    if (readByOthers(product.getResult(0), expand, op))
      setFlag(product, "gelu_aux");
    markEpilogue(op);
    return true;
  }

  /// P * gelu'(x), x of P's type: marks P `dgelu`, when only this op reads
  /// P.
  bool matchBackward(linalg::GenericOp op) {
    if (!isPlainElementwise(op, 2))
      return false;
    Type element = getElementTypeOrSelf(op.getResult(0).getType());
    for (unsigned i = 0; i < 2; ++i) {
      Value x = op.getDpsInputs()[1 - i];
      if (getElementTypeOrSelf(x.getType()) != element)
        continue;
      tensor::ExpandShapeOp expand;
      linalg::GenericOp product =
          productBehind(op.getDpsInputs()[i], element, false, expand);
      if (!product || readByOthers(product.getResult(0), expand, op))
        continue;
      bool matches = true;
      for (double g : {0.75, -1.5})
        for (double point : kPoints) {
          SmallVector<double, 2> args = {g, point};
          if (i == 1)
            std::swap(args[0], args[1]);
          std::optional<double> got = evaluate(op.getBody(), args);
          matches &= got && close(*got, g * geluGrad(point));
        }
      if (!matches)
        continue;
      setFlag(product, "dgelu");
      markEpilogue(op);
      return true;
    }
    return false;
  }
};

} // namespace
