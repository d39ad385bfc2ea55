//===- Einsum.cpp - ONNX Einsum as transposes, reductions and matmuls -----===//
//
// Operands are contracted pairwise, left to right. For each pair the letters
// are sorted into batch (in both and needed later), contracted (in both, not
// needed later), and free letters of either side; the pair becomes one
// batched kiln.matmul between transposed and reshaped operands. Letters
// needed by no one else are summed out first. Repeated letters within one
// operand (diagonals) are not supported.
//
//===----------------------------------------------------------------------===//

#include "NodeContext.h"

#include "llvm/ADT/StringExtras.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::onnx_import;

namespace {

/// A tensor with one letter per dimension.
struct Labeled {
  Value value;
  std::string letters;
};

int64_t dimOf(const Labeled &t, char letter) {
  size_t at = t.letters.find(letter);
  return cast<RankedTensorType>(t.value.getType()).getDimSize(at);
}

/// Transposes `t` so that its letters are in `order`.
FailureOr<Labeled> permute(NodeContext &n, const Labeled &t, StringRef order) {
  if (t.letters == order)
    return t;
  SmallVector<int64_t> perm;
  for (char c : order)
    perm.push_back(t.letters.find(c));
  FailureOr<Value> moved =
      n.create<TransposeOp>(t.value, {n.array("permutation", perm)});
  if (failed(moved))
    return failure();
  return Labeled{*moved, order.str()};
}

/// Sums out the letters of `t` that are not in `keep`.
FailureOr<Labeled> sumOut(NodeContext &n, const Labeled &t, StringRef keep) {
  SmallVector<int64_t> dims;
  std::string rest;
  for (auto [i, c] : llvm::enumerate(t.letters)) {
    if (keep.contains(c))
      rest.push_back(c);
    else
      dims.push_back(i);
  }
  if (dims.empty())
    return t;
  FailureOr<Value> summed =
      n.create<ReduceSumOp>(t.value, {n.array("dimensions", dims)});
  if (failed(summed))
    return failure();
  return Labeled{*summed, rest};
}

FailureOr<Labeled> contract(NodeContext &n, Labeled a, Labeled b,
                            StringRef needed) {
  std::string batch, contracted, freeA, freeB;
  for (char c : a.letters) {
    bool inB = StringRef(b.letters).contains(c);
    bool later = needed.contains(c);
    if (inB && later)
      batch.push_back(c);
    else if (inB)
      contracted.push_back(c);
    else
      freeA.push_back(c);
  }
  for (char c : b.letters)
    if (!StringRef(a.letters).contains(c))
      freeB.push_back(c);
  for (char c : batch + contracted)
    if (dimOf(a, c) != dimOf(b, c))
      return n.fail(std::string("einsum letter '") + c + "' has sizes " +
                    std::to_string(dimOf(a, c)) + " and " +
                    std::to_string(dimOf(b, c)));
  auto product = [&](const Labeled &t, StringRef letters) {
    int64_t size = 1;
    for (char c : letters)
      size *= dimOf(t, c);
    return size;
  };
  FailureOr<Labeled> pa = permute(n, a, batch + freeA + contracted);
  FailureOr<Labeled> pb = permute(n, b, batch + contracted + freeB);
  if (failed(pa) || failed(pb))
    return failure();
  int64_t batchSize = product(a, batch), m = product(a, freeA),
          k = product(a, contracted), nn = product(b, freeB);
  FailureOr<Value> lhs = n.reshape(pa->value, {batchSize, m, k});
  FailureOr<Value> rhs = n.reshape(pb->value, {batchSize, k, nn});
  if (failed(lhs) || failed(rhs))
    return failure();
  FailureOr<Value> mm = n.create<MatmulOp>(ValueRange{*lhs, *rhs});
  if (failed(mm))
    return failure();
  SmallVector<int64_t> shape;
  for (char c : batch)
    shape.push_back(dimOf(a, c));
  for (char c : freeA)
    shape.push_back(dimOf(a, c));
  for (char c : freeB)
    shape.push_back(dimOf(b, c));
  FailureOr<Value> result = n.reshape(*mm, shape);
  if (failed(result))
    return failure();
  return Labeled{*result, batch + freeA + freeB};
}

LogicalResult importEinsum(NodeContext &n) {
  if (n.numInputs() < 1)
    return n.fail("expected at least one input");
  std::string equation = n.getString("equation", "");
  equation.erase(llvm::remove_if(equation, ::isspace), equation.end());
  auto [lhsText, outText] = StringRef(equation).split("->");
  bool explicitOutput = StringRef(equation).contains("->");
  SmallVector<StringRef> terms;
  lhsText.split(terms, ',');
  if (terms.size() != n.numInputs())
    return n.fail("equation '" + equation + "' has " + Twine(terms.size()) +
                  " operands, the node " + Twine(n.numInputs()));

  // Letters for '...' are taken from the upper case ones no term uses.
  std::string spare;
  for (char c = 'A'; c <= 'Z'; ++c)
    if (!StringRef(equation).contains(c))
      spare.push_back(c);
  size_t ellipsisRank = 0;
  SmallVector<Labeled> operands;
  for (auto [i, term] : llvm::enumerate(terms)) {
    Value value = n.input(i);
    if (!value)
      return n.fail("input " + Twine(i) + " is missing");
    int64_t rank = n.inputType(i).getRank();
    std::string letters;
    size_t dots = term.find("...");
    if (dots != StringRef::npos) {
      int64_t named = term.size() - 3;
      int64_t covered = rank - named;
      if (covered < 0 || static_cast<size_t>(covered) > spare.size())
        return n.fail("'...' does not fit operand " + Twine(i));
      if (static_cast<size_t>(covered) > ellipsisRank)
        ellipsisRank = covered;
      // Right-align the ellipsis letters so they broadcast like numpy.
      std::string fill = spare.substr(spare.size() - covered);
      letters =
          (term.take_front(dots) + fill + term.drop_front(dots + 3)).str();
    } else {
      letters = term.str();
    }
    if (static_cast<int64_t>(letters.size()) != rank)
      return n.fail("term '" + term + "' has " + Twine(letters.size()) +
                    " letters for an operand of rank " + Twine(rank));
    for (char c : letters)
      if (!llvm::isAlpha(c))
        return n.fail("equation '" + equation + "' is malformed");
    for (size_t x = 0; x < letters.size(); ++x)
      if (StringRef(letters).drop_front(x + 1).contains(letters[x]))
        return n.fail("repeated letters within one operand (diagonals) are "
                      "not supported");
    operands.push_back({value, letters});
  }
  std::string ellipsisLetters = spare.substr(spare.size() - ellipsisRank);
  std::string output;
  if (explicitOutput) {
    size_t dots = outText.find("...");
    output = dots == StringRef::npos
                 ? outText.str()
                 : (outText.take_front(dots) + ellipsisLetters +
                    outText.drop_front(dots + 3))
                       .str();
  } else {
    // Implicit output: the ellipsis, then letters used once, alphabetically.
    std::string counts(128, 0);
    for (const Labeled &t : operands)
      for (char c : t.letters)
        ++counts[c];
    // numpy orders them by character code: upper case first.
    output = ellipsisLetters;
    for (int c = 'A'; c <= 'z'; ++c)
      if (llvm::isAlpha(c) && counts[c] == 1 &&
          !StringRef(ellipsisLetters).contains(static_cast<char>(c)))
        output.push_back(static_cast<char>(c));
  }

  // Fold operands left to right, keeping letters the output or later
  // operands still need.
  Labeled result = operands.front();
  for (size_t i = 0; i < operands.size(); ++i) {
    std::string needed = output;
    for (size_t j = i + 1; j < operands.size(); ++j)
      needed += operands[j].letters;
    if (i == 0) {
      FailureOr<Labeled> summed = sumOut(n, result, needed);
      if (failed(summed))
        return failure();
      result = *summed;
      continue;
    }
    std::string neededByRight = needed + result.letters;
    FailureOr<Labeled> right = sumOut(n, operands[i], neededByRight);
    if (failed(right))
      return failure();
    FailureOr<Labeled> joined = contract(n, result, *right, needed);
    if (failed(joined))
      return failure();
    result = *joined;
  }
  FailureOr<Labeled> summed = sumOut(n, result, output);
  if (failed(summed))
    return failure();
  for (char c : output)
    if (!StringRef(summed->letters).contains(c))
      return n.fail(std::string("output letter '") + c +
                    "' appears in no operand");
  FailureOr<Labeled> ordered = permute(n, *summed, output);
  if (failed(ordered))
    return failure();
  n.setOutput(0, ordered->value);
  return success();
}

} // namespace

void kiln::onnx_import::registerEinsumOp(OpImporterTable &t) {
  t["Einsum"] = importEinsum;
}
