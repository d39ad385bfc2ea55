//===- FuseGelu.cpp - GELU written out as elementwise ops -> kiln.gelu ----===//
//
// Exporters write GELU out when the opset has no Gelu operator:
//   0.5 * x * (1 + erf(x / sqrt(2)))                                 (exact)
//   0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))        (tanh)
// with the products and sums grouped in any order. Kept as ten ops, a
// training step saves most of their intermediates for the backward pass (a
// quarter of the GPT-2-style model's activations); as kiln.gelu it saves x.
//
//===----------------------------------------------------------------------===//

#include "kiln/KilnOps.h"
#include "kiln/Transforms/Passes.h"

#include "Splat.h"

#include <cmath>

namespace kiln {
#define GEN_PASS_DEF_KILNFUSEGELU
#include "kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {

/// The value of a splat float constant, possibly broadcast, if `v` is one.
std::optional<double> splatValue(Value v) {
  if (auto broadcast = v.getDefiningOp<BroadcastOp>())
    v = broadcast.getInput();
  return floatSplatValue(v);
}

bool near(double value, double expected) {
  return std::abs(value - expected) <= 1e-5 * std::abs(expected);
}

/// A value as a product: a constant factor times the other factors. Single-
/// use products and quotients by constants are opened up (their ops are
/// recorded in `inner`); anything else is one factor.
struct Product {
  double scale = 1.0;
  SmallVector<Value> factors;
  SmallVector<Operation *> inner;
};

void collectProduct(Value v, bool open, Product &p) {
  if (std::optional<double> c = splatValue(v)) {
    p.scale *= *c;
    return;
  }
  Operation *op = v.getDefiningOp();
  if (open && op && (isa<MulOp>(op) || isa<DivOp>(op))) {
    if (auto div = dyn_cast<DivOp>(op)) {
      std::optional<double> divisor = splatValue(div.getRhs());
      if (!divisor || *divisor == 0) {
        p.factors.push_back(v);
        return;
      }
      p.scale /= *divisor;
    }
    p.inner.push_back(op);
    for (Value operand :
         isa<DivOp>(op) ? op->getOperands().take_front() : op->getOperands())
      collectProduct(operand, operand.hasOneUse(), p);
    return;
  }
  // pow(y, 3) is y * y * y.
  if (auto pow = dyn_cast_or_null<PowOp>(op)) {
    std::optional<double> exponent = splatValue(pow.getRhs());
    if (open && exponent && *exponent == 3.0) {
      p.inner.push_back(op);
      p.factors.append(3, pow.getLhs());
      return;
    }
  }
  p.factors.push_back(v);
}

Product productOf(Value v, bool openRoot) {
  Product p;
  collectProduct(v, openRoot, p);
  return p;
}

/// A value as a sum: a constant term plus the other terms, opening up
/// single-use sums like collectProduct.
struct Sum {
  double constant = 0.0;
  SmallVector<Value> terms;
  SmallVector<Operation *> inner;
};

void collectSum(Value v, bool open, Sum &s) {
  if (std::optional<double> c = splatValue(v)) {
    s.constant += *c;
    return;
  }
  auto add = v.getDefiningOp<AddOp>();
  if (!open || !add) {
    s.terms.push_back(v);
    return;
  }
  s.inner.push_back(add);
  for (Value operand : add->getOperands())
    collectSum(operand, operand.hasOneUse(), s);
}

/// Whether `p` is exactly `scale` times `x` taken `count` times.
bool isPowerOf(const Product &p, Value x, unsigned count, double scale) {
  return near(p.scale, scale) && p.factors.size() == count &&
         llvm::all_of(p.factors, [&](Value f) { return f == x; });
}

/// If `root` computes GELU of some x, returns x and the approximation, and
/// appends the ops that computed it (root last) to `ops`.
std::optional<std::pair<Value, GeluApproximation>>
matchGelu(MulOp root, SmallVectorImpl<Operation *> &ops) {
  // 0.5 * x * s, s = 1 + t.
  Product outer = productOf(root.getResult(), /*openRoot=*/true);
  if (!near(outer.scale, 0.5) || outer.factors.size() != 2)
    return std::nullopt;
  for (unsigned which = 0; which < 2; ++which) {
    Value x = outer.factors[which], s = outer.factors[1 - which];
    if (!s.hasOneUse())
      continue;
    Sum sum;
    collectSum(s, /*open=*/true, sum);
    if (!near(sum.constant, 1.0) || sum.terms.size() != 1 ||
        !sum.terms[0].hasOneUse())
      continue;
    Operation *t = sum.terms[0].getDefiningOp();
    if (!t || !isa<ErfOp, TanhOp>(t) || !t->getOperand(0).hasOneUse())
      continue;
    Product arg = productOf(t->getOperand(0), /*openRoot=*/true);
    SmallVector<Operation *> matched(outer.inner);
    matched.append(sum.inner);
    matched.push_back(t);
    matched.append(arg.inner);
    GeluApproximation kind;
    if (isa<ErfOp>(t)) {
      // erf(x / sqrt(2)).
      if (!isPowerOf(arg, x, 1, M_SQRT1_2))
        continue;
      kind = GeluApproximation::none;
    } else {
      // tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)).
      if (!near(arg.scale, M_2_SQRTPI * M_SQRT1_2) || arg.factors.size() != 1 ||
          !arg.factors[0].hasOneUse())
        continue;
      Sum cubic;
      collectSum(arg.factors[0], /*open=*/true, cubic);
      if (cubic.constant != 0.0 || cubic.terms.size() != 2)
        continue;
      matched.append(cubic.inner);
      bool found = false;
      for (unsigned i = 0; i < 2 && !found; ++i) {
        if (cubic.terms[i] != x || !cubic.terms[1 - i].hasOneUse())
          continue;
        Product cube = productOf(cubic.terms[1 - i], /*openRoot=*/true);
        if (isPowerOf(cube, x, 3, 0.044715)) {
          matched.append(cube.inner);
          found = true;
        }
      }
      if (!found)
        continue;
      kind = GeluApproximation::tanh;
    }
    ops.append(matched);
    return std::make_pair(x, kind);
  }
  return std::nullopt;
}

struct KilnFuseGeluPass : kiln::impl::KilnFuseGeluBase<KilnFuseGeluPass> {
  void runOnOperation() override {
    // From the last op back, so that the outermost product of a chain is
    // tried before the products inside it.
    SmallVector<MulOp> candidates;
    getOperation().walk([&](MulOp op) { candidates.push_back(op); });
    DenseSet<Operation *> erased;
    for (MulOp root : llvm::reverse(candidates)) {
      if (erased.contains(root))
        continue;
      SmallVector<Operation *> ops;
      auto match = matchGelu(root, ops);
      if (!match)
        continue;
      auto [x, kind] = *match;
      if (x.getType() != root.getType())
        continue;
      OpBuilder b(root);
      Value gelu =
          GeluOp::create(b, root.getLoc(), root.getType(), x,
                         GeluApproximationAttr::get(&getContext(), kind));
      root.getResult().replaceAllUsesWith(gelu);
      // The matched ops now compute nothing anyone reads.
      eraseDead(ops, erased);
    }
  }

  /// Erases the ops of `ops` whose results are unused, until none is left.
  static void eraseDead(ArrayRef<Operation *> ops,
                        DenseSet<Operation *> &erased) {
    bool changed = true;
    while (changed) {
      changed = false;
      for (Operation *op : ops)
        if (!erased.contains(op) && op->use_empty()) {
          erased.insert(op);
          op->erase();
          changed = true;
        }
    }
  }
};

} // namespace
