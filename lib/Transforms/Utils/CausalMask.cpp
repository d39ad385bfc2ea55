//===- CausalMask.cpp - whether an attention mask is causal ---------------===//
//
// The attention passes of the CUDA target run causal attention without
// reading a mask: the kernels stop at the diagonal. A model states it with
// a mask, usually a constant (a select on a constant condition), but often
// one computed from a buffer the model registered: nanoGPT's
// `masked_fill(self.bias[:, :, :T, :T] == 0, -inf)` on `tril(ones)`. Such
// a buffer is an ONNX initializer, so a parameter here, one that no
// optimizer updates. Its value is known when kilnc compiles, and the
// runtime keeps it from changing (Parameter.fixed): a caller setting it to
// anything else gets an error, so compiling the mask's value in is exact.
//
//===----------------------------------------------------------------------===//

#include "kiln/KilnOps.h"
#include "kiln/Transforms/Attention.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Matchers.h"

#include "llvm/ADT/DenseMap.h"

#include <optional>
#include <vector>

using namespace mlir;
using namespace kiln;

namespace {

/// The elements of tensors computed elementwise from constants and from
/// parameters that nothing updates, as doubles, row-major; what it cannot
/// know (any other op, a parameter some entry point updates) is nullopt.
/// Booleans are 0 and 1; integers up to 2^53 are exact.
class KnownValues {
public:
  /// The values of `value`, or null where they are not known.
  const std::vector<double> *of(Value value) {
    auto found = cache.find(value);
    if (found != cache.end())
      return found->second ? &*found->second : nullptr;
    std::optional<std::vector<double>> computed = compute(value);
    auto &slot = cache[value];
    slot = std::move(computed);
    return slot ? &*slot : nullptr;
  }

  /// The parameters whose values those came from.
  SmallVector<Operation *> params;

private:
  /// Element count of a static tensor (-1: not one).
  static int64_t count(Value value) {
    auto type = dyn_cast<RankedTensorType>(value.getType());
    return type && type.hasStaticShape() ? type.getNumElements() : -1;
  }

  static std::optional<std::vector<double>> fromAttr(ElementsAttr attr) {
    auto dense = dyn_cast<DenseElementsAttr>(attr);
    if (!dense)
      return std::nullopt;
    std::vector<double> values;
    values.reserve(dense.getNumElements());
    Type element = dense.getElementType();
    if (element.isF32()) {
      for (float v : dense.getValues<float>())
        values.push_back(v);
    } else if (element.isInteger(1)) {
      for (bool v : dense.getValues<bool>())
        values.push_back(v);
    } else if (isa<FloatType>(element)) {
      for (APFloat v : dense.getValues<APFloat>())
        values.push_back(v.convertToDouble());
    } else if (isa<IntegerType>(element)) {
      for (APInt v : dense.getValues<APInt>())
        values.push_back(double(v.getSExtValue()));
    } else {
      return std::nullopt;
    }
    return values;
  }

  /// A function argument reading a parameter that no entry point updates,
  /// and its kiln.param op.
  static ParamOp fixableParam(Value value) {
    auto argument = dyn_cast<BlockArgument>(value);
    if (!argument)
      return nullptr;
    auto func = dyn_cast<func::FuncOp>(argument.getOwner()->getParentOp());
    if (!func)
      return nullptr;
    auto name = func.getArgAttrOfType<StringAttr>(argument.getArgNumber(),
                                                  "kiln.param");
    auto module = func->getParentOfType<ModuleOp>();
    if (!name || !module)
      return nullptr;
    auto param = module.lookupSymbol<ParamOp>(name);
    if (!param || !param.getInitialValueAttr() ||
        param->hasAttr("kiln.optimizer_state") ||
        param->hasAttr("kiln.shard_ranks"))
      return nullptr;
    for (auto entry : module.getOps<func::FuncOp>())
      for (unsigned i = 0; i < entry.getNumResults(); ++i)
        if (entry.getResultAttrOfType<StringAttr>(i, "kiln.update") == name)
          return nullptr;
    return param;
  }

  std::optional<std::vector<double>> compute(Value value) {
    int64_t n = count(value);
    if (n < 0)
      return std::nullopt;
    // A dense attribute, splat or not, gives all n elements.
    auto known = [n](std::optional<std::vector<double>> values) {
      return values && int64_t(values->size()) == n ? values : std::nullopt;
    };
    if (ParamOp param = fixableParam(value)) {
      auto values = known(fromAttr(*param.getInitialValue()));
      if (values)
        params.push_back(param);
      return values;
    }
    Operation *op = value.getDefiningOp();
    if (!op)
      return std::nullopt;
    ElementsAttr constant;
    if (matchPattern(value, m_Constant(&constant)))
      return known(fromAttr(constant));
    // Elementwise ops over operands of the result's shape.
    auto operand = [&](Value v) -> const std::vector<double> * {
      return count(v) == n ? of(v) : nullptr;
    };
    if (auto compare = dyn_cast<CompareOp>(op)) {
      const std::vector<double> *a = operand(compare.getLhs()),
                                *b = operand(compare.getRhs());
      if (!a || !b)
        return std::nullopt;
      std::vector<double> out(n);
      for (int64_t i = 0; i < n; ++i)
        out[i] = comparisonHolds(compare.getPredicate(), (*a)[i], (*b)[i]);
      return out;
    }
    if (auto select = dyn_cast<SelectOp>(op)) {
      const std::vector<double> *c = operand(select.getCond()),
                                *a = operand(select.getOnTrue()),
                                *b = operand(select.getOnFalse());
      if (!c || !a || !b)
        return std::nullopt;
      std::vector<double> out(n);
      for (int64_t i = 0; i < n; ++i)
        out[i] = (*c)[i] != 0 ? (*a)[i] : (*b)[i];
      return out;
    }
    if (auto cast = dyn_cast<CastOp>(op)) {
      const std::vector<double> *in = operand(cast.getInput());
      Type to = getElementTypeOrSelf(cast.getType());
      if (!in)
        return std::nullopt;
      std::vector<double> out(*in);
      for (double &v : out) {
        if (to.isInteger(1))
          v = v != 0;
        else if (isa<IntegerType>(to))
          v = std::trunc(v);
        else if (to.isF32())
          v = double(float(v));
        else if (!to.isF64())
          return std::nullopt; // rounding to a 16-bit float: not modelled
      }
      return out;
    }
    if (auto slice = dyn_cast<SliceOp>(op))
      return sliced(slice);
    return std::nullopt;
  }

  /// A kiln.slice's window of its input's values.
  std::optional<std::vector<double>> sliced(SliceOp slice) {
    auto inType = dyn_cast<RankedTensorType>(slice.getInput().getType());
    auto outType = dyn_cast<RankedTensorType>(slice.getType());
    if (!inType || !outType || !inType.hasStaticShape() ||
        !outType.hasStaticShape())
      return std::nullopt;
    const std::vector<double> *in = of(slice.getInput());
    if (!in)
      return std::nullopt;
    ArrayRef<int64_t> start = slice.getStart(), stride = slice.getStride();
    ArrayRef<int64_t> inShape = inType.getShape(),
                      outShape = outType.getShape();
    int64_t rank = outType.getRank();
    std::vector<double> out(outType.getNumElements());
    SmallVector<int64_t> index(rank, 0);
    for (double &v : out) {
      int64_t source = 0;
      for (int64_t d = 0; d < rank; ++d)
        source = source * inShape[d] + start[d] + index[d] * stride[d];
      v = (*in)[source];
      for (int64_t d = rank - 1; d >= 0; --d) {
        if (++index[d] < outShape[d])
          break;
        index[d] = 0;
      }
    }
    return out;
  }

  llvm::DenseMap<Value, std::optional<std::vector<double>>> cache;
};

} // namespace

bool kiln::isCausalMask(Value mask, int64_t queries, int64_t keys,
                        SmallVectorImpl<Operation *> &fixed) {
  if (!mask || queries != keys)
    return false;
  auto type = dyn_cast<RankedTensorType>(mask.getType());
  if (!type || type.getRank() < 2 ||
      type.getDimSize(type.getRank() - 1) != keys ||
      type.getDimSize(type.getRank() - 2) != queries)
    return false;
  KnownValues known;
  const std::vector<double> *values = known.of(mask);
  if (!values)
    return false;
  // -inf (or a fill that absorbs any score) after the diagonal, 0 on and
  // before it, in every batch.
  for (int64_t index = 0, n = values->size(); index < n; ++index) {
    double v = (*values)[index];
    if (isAfterDiagonal(index, queries, keys) ? !(v <= kMaskedFillAtMost)
                                              : v != 0)
      return false;
  }
  fixed.append(known.params.begin(), known.params.end());
  return true;
}

void kiln::fixParameters(ArrayRef<Operation *> params) {
  for (Operation *param : params)
    param->setAttr("kiln.fixed", UnitAttr::get(param->getContext()));
}
