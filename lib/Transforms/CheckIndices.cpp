//===- CheckIndices.cpp - count out-of-range indices in the step ----------===//
//
// Gathers and losses index with values the caller supplies (token ids,
// class labels). Lowered, an index out of range would be clamped into it,
// so a bad batch trained silently on the wrong rows and classes. This pass
// makes each entry function count, on the device and in the same run, the
// values outside the range each such index may take, and return the count
// as an extra result the runtime reads with the loss (see Passes.td).
//
//===----------------------------------------------------------------------===//

#include "kiln/KilnOps.h"
#include "kiln/Transforms/Passes.h"

#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"

namespace kiln {
#define GEN_PASS_DEF_KILNCHECKINDICES
#include "kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {

/// One index operand to bound: `value` must lie in [lo, hi), or equal
/// `ignore` where given. `input` names the entry argument it comes from;
/// `range` says in words what is allowed.
struct IndexCheck {
  Value value;
  std::string input;
  int64_t lo, hi;
  std::optional<int64_t> ignore;
  std::string range;
};

/// The entry argument `value` is, possibly through casts and reshapes (which
/// move no index to another position); a null argument for anything else,
/// such as indices the graph computes itself.
BlockArgument entryArgument(Value value, Block &entry) {
  while (Operation *op = value.getDefiningOp()) {
    if (!isa<CastOp, ReshapeOp>(op))
      return {};
    value = op->getOperand(0);
  }
  auto argument = dyn_cast<BlockArgument>(value);
  return argument && argument.getOwner() == &entry ? argument : BlockArgument();
}

std::string argumentName(func::FuncOp function, BlockArgument argument) {
  auto name = function.getArgAttrOfType<StringAttr>(argument.getArgNumber(),
                                                    "kiln.name");
  return name ? name.str() : "input" + std::to_string(argument.getArgNumber());
}

/// The checks of `function`: the indices of every gather and the labels of
/// every loss that come from its arguments, each operand once.
SmallVector<IndexCheck> collectChecks(func::FuncOp function) {
  Block &entry = function.getBody().front();
  SmallVector<IndexCheck> checks;
  // One count per input and range: two reshapes of one input (an export
  // may hold such copies) index with the same values, and two outputs of
  // one name would make the bundle invalid.
  llvm::StringSet<> seen;
  auto add = [&](Value indices, IndexCheck check) {
    BlockArgument argument = entryArgument(indices, entry);
    if (!argument)
      return;
    check.value = indices;
    check.input = argumentName(function, argument);
    if (seen.insert(check.input + "|" + check.range).second)
      checks.push_back(std::move(check));
  };
  auto labels = [&](Value labelValues, Value scores,
                    std::optional<int64_t> ignore) {
    int64_t classes = cast<RankedTensorType>(scores.getType()).getDimSize(1);
    std::string range = llvm::formatv("the class indices [0, {0})", classes);
    if (ignore)
      range += llvm::formatv(" and ignore_index {0}", *ignore);
    add(labelValues, {Value(), "", 0, classes, ignore, range});
  };
  function.walk([&](Operation *op) {
    if (auto gather = dyn_cast<GatherOp>(op)) {
      int64_t size = cast<RankedTensorType>(gather.getInput().getType())
                         .getDimSize(gather.getAxis());
      // A table the model owns (an embedding) is looked up as
      // torch.nn.Embedding does, rows [0, size); other data as ONNX's
      // Gather, where -size..-1 count from the end.
      if (auto table = gather.getInput().getDefiningOp<GetParamOp>())
        add(gather.getIndices(), {Value(), "", 0, size, std::nullopt,
                                  llvm::formatv("the rows [0, {0}) of '{1}'",
                                                size, table.getName())});
      else
        add(gather.getIndices(),
            {Value(), "", -size, size, std::nullopt,
             llvm::formatv("[-{0}, {0}), the positions of gather axis {1}",
                           size, gather.getAxis())});
    } else if (auto loss = dyn_cast<CrossEntropyOp>(op)) {
      labels(loss.getLabels(), loss.getLogits(), loss.getIgnoreIndex());
    } else if (auto grad = dyn_cast<CrossEntropyGradOp>(op)) {
      labels(grad.getLabels(), grad.getLogits(), grad.getIgnoreIndex());
    } else if (auto nll = dyn_cast<NllLossOp>(op)) {
      labels(nll.getLabels(), nll.getInput(), nll.getIgnoreIndex());
    }
  });
  return checks;
}

/// A constant of `type` (an integer tensor type) filled with `value`.
Value splat(OpBuilder &b, Location loc, RankedTensorType type, int64_t value) {
  Type element = type.getElementType();
  return ConstantOp::create(
      b, loc,
      DenseElementsAttr::get(type, APInt(element.getIntOrFloatBitWidth(),
                                         static_cast<uint64_t>(value),
                                         /*isSigned=*/true,
                                         /*implicitTrunc=*/true)));
}

/// The number of elements of `check.value` outside what it allows, as an
/// f32 scalar (exact up to 2^24 elements).
Value countOutside(OpBuilder &b, Location loc, const IndexCheck &check) {
  auto type = cast<RankedTensorType>(check.value.getType());
  auto compare = [&](ComparePredicate predicate, int64_t bound) -> Value {
    return CompareOp::create(
        b, loc, ComparePredicateAttr::get(b.getContext(), predicate),
        check.value, splat(b, loc, type, bound));
  };
  Value outside = OrOp::create(b, loc, compare(ComparePredicate::lt, check.lo),
                               compare(ComparePredicate::ge, check.hi));
  if (check.ignore)
    outside = AndOp::create(b, loc, outside,
                            compare(ComparePredicate::ne, *check.ignore));
  Value ones = CastOp::create(b, loc, type.clone(b.getF32Type()), outside);
  SmallVector<int64_t> all;
  for (int64_t d = 0; d < type.getRank(); ++d)
    all.push_back(d);
  return ReduceSumOp::create(b, loc, ones, b.getDenseI64ArrayAttr(all),
                             nullptr);
}

struct KilnCheckIndicesPass
    : kiln::impl::KilnCheckIndicesBase<KilnCheckIndicesPass> {
  using KilnCheckIndicesBase::KilnCheckIndicesBase;

  void runOnOperation() override {
    for (auto function : getOperation().getOps<func::FuncOp>())
      if (!function.isExternal())
        addChecks(function);
  }

  void addChecks(func::FuncOp function) {
    // Counted already (the pass ran before on this module).
    for (unsigned i = 0; i < function.getNumResults(); ++i)
      if (auto name = function.getResultAttrOfType<StringAttr>(i, "kiln.name"))
        if (name.getValue().starts_with(kIndexCheckPrefix))
          return;
    SmallVector<IndexCheck> checks = collectChecks(function);
    if (checks.empty())
      return;
    auto ret = cast<func::ReturnOp>(function.getBody().front().getTerminator());
    OpBuilder b(ret);
    SmallVector<Value> results(ret.getOperands());
    SmallVector<std::string> names;
    for (const IndexCheck &check : checks) {
      results.push_back(countOutside(b, check.value.getLoc(), check));
      names.push_back(std::string(kIndexCheckPrefix) + check.input + "|" +
                      check.range);
    }
    // The results keep their attributes (names, in-place updates); the
    // counts come last, named for the runtime.
    SmallVector<Attribute> attrs;
    for (unsigned i = 0; i < function.getNumResults(); ++i) {
      DictionaryAttr dict = function.getResultAttrDict(i);
      attrs.push_back(dict ? dict : b.getDictionaryAttr({}));
    }
    for (const std::string &name : names)
      attrs.push_back(b.getDictionaryAttr(
          b.getNamedAttr("kiln.name", b.getStringAttr(name))));
    ret->setOperands(results);
    function.setType(FunctionType::get(function.getContext(),
                                       function.getArgumentTypes(),
                                       ValueRange(results).getTypes()));
    function.setAllResultAttrs(attrs);
  }
};

} // namespace
