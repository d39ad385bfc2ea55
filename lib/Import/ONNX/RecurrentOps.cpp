//===- RecurrentOps.cpp - importers of RNN, GRU and LSTM ------------------===//
//
// The recurrent ops unrolled over their static sequence: one product of the
// whole input with W up front, then per step a product of the state with R
// and the gates' elementwise work, written out as kiln ops (whose gradients
// the autodiff has). The equations are the spec's, gate orders included:
//   RNN:  H = f(x W^T + H R^T + Wb + Rb)
//   GRU:  z = f(x Wz^T + H Rz^T + Wbz + Rbz), r likewise,
//         h = g(x Wh^T + (r . H) Rh^T + Rbh + Wbh)        linear_before_reset 0
//         h = g(x Wh^T + r . (H Rh^T + Rbh) + Wbh)        otherwise
//         H = (1 - z) . h + z . H
//   LSTM: i = f(x Wi^T + H Ri^T + Pi . C + Wbi + Rbi), f likewise with Pf,
//         c = g(x Wc^T + H Rc^T + Wbc + Rbc), C = f . C + i . c,
//         o = f(x Wo^T + H Ro^T + Po . C + Wbo + Rbo), H = o . h(C)
// with every direction's own weights. Steps past a batch element's
// sequence_lens (a constant) leave its state as it was and output zeros.
//
//===----------------------------------------------------------------------===//

#include "NodeContext.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::onnx_import;

namespace {

enum class Cell { RNN, GRU, LSTM };

/// One activation of the `activations` attribute.
struct Activation {
  std::string name;
  double alpha = 0, beta = 0;
};

/// The builder of one recurrent node: its inputs cut per direction, and the
/// kiln ops of the steps.
class Recurrence {
public:
  Recurrence(NodeContext &n, Cell cell) : n(n), cell(cell) {}

  LogicalResult import();

private:
  unsigned gates() const {
    return cell == Cell::RNN ? 1 : cell == Cell::GRU ? 3 : 4;
  }

  RankedTensorType typeOf(ArrayRef<int64_t> shape) {
    return RankedTensorType::get(shape, element);
  }

  FailureOr<Value> slice(Value v, ArrayRef<int64_t> start,
                         ArrayRef<int64_t> limit) {
    SmallVector<int64_t> stride(start.size(), 1);
    return n.create<SliceOp>(v,
                             {n.array("start", start), n.array("limit", limit),
                              n.array("stride", stride)});
  }
  /// Columns [gate * hidden, (gate + 1) * hidden) of a [rows, G * hidden]
  /// value.
  FailureOr<Value> gate(Value v, int64_t index) {
    int64_t rows = cast<RankedTensorType>(v.getType()).getDimSize(0);
    return slice(v, {0, index * hidden}, {rows, (index + 1) * hidden});
  }
  /// Direction `d` of a [directions, ...] input, without that dimension.
  FailureOr<Value> direction(Value v, int64_t d) {
    auto type = cast<RankedTensorType>(v.getType());
    SmallVector<int64_t> start(type.getRank(), 0), limit(type.getShape());
    start[0] = d;
    limit[0] = d + 1;
    FailureOr<Value> one = slice(v, start, limit);
    if (failed(one))
      return failure();
    return n.reshape(*one, type.getShape().drop_front());
  }

  FailureOr<Value> add(Value a, Value b) {
    return n.create<AddOp>(ValueRange{a, b});
  }
  FailureOr<Value> mul(Value a, Value b) {
    return n.create<MulOp>(ValueRange{a, b});
  }
  FailureOr<Value> activate(const Activation &f, Value x);
  /// `x` clamped to [-clip, clip] when the node clips.
  FailureOr<Value> clipped(Value x);

  LogicalResult readActivations();
  LogicalResult runDirection(int64_t d, bool reverse,
                             SmallVectorImpl<Value> &outputs, Value &lastH,
                             Value &lastC);

  NodeContext &n;
  Cell cell;
  Type element;
  int64_t steps = 0, batch = 0, inputSize = 0, hidden = 0, directions = 1;
  bool batchFirst = false;
  std::optional<double> clip;
  SmallVector<Activation> activations;
  /// Per batch element, the steps it has (all of them without
  /// sequence_lens).
  SmallVector<int64_t> lengths;
  Value x; // [steps, batch, input]
};

FailureOr<Value> Recurrence::clipped(Value x) {
  if (!clip)
    return x;
  auto type = cast<RankedTensorType>(x.getType());
  FailureOr<Value> low = n.create<MaxOp>(ValueRange{x, n.splat(type, -*clip)});
  if (failed(low))
    return failure();
  return n.create<MinOp>(ValueRange{*low, n.splat(type, *clip)});
}

FailureOr<Value> Recurrence::activate(const Activation &f, Value x) {
  FailureOr<Value> input = clipped(x);
  if (failed(input))
    return failure();
  auto type = cast<RankedTensorType>(x.getType());
  if (f.name == "Tanh")
    return n.create<TanhOp>(*input);
  if (f.name == "Sigmoid")
    return n.create<SigmoidOp>(*input);
  if (f.name == "Relu")
    return n.create<ReluOp>(*input);
  if (f.name == "HardSigmoid") {
    FailureOr<Value> v = mul(*input, n.splat(type, f.alpha));
    if (failed(v))
      return failure();
    v = add(*v, n.splat(type, f.beta));
    if (failed(v))
      return failure();
    v = n.create<MaxOp>(ValueRange{*v, n.splat(type, 0)});
    if (failed(v))
      return failure();
    return n.create<MinOp>(ValueRange{*v, n.splat(type, 1)});
  }
  return n.fail("activation '" + f.name + "' is not supported yet");
}

LogicalResult Recurrence::readActivations() {
  SmallVector<Activation> defaults;
  switch (cell) {
  case Cell::RNN:
    defaults = {{"Tanh"}};
    break;
  case Cell::GRU:
    defaults = {{"Sigmoid"}, {"Tanh"}};
    break;
  case Cell::LSTM:
    defaults = {{"Sigmoid"}, {"Tanh"}, {"Tanh"}};
    break;
  }
  const onnx::AttributeProto *names = n.attr("activations");
  if (!names) {
    for (int64_t d = 0; d < directions; ++d)
      activations.append(defaults);
    return success();
  }
  auto alphas = n.getFloats("activation_alpha");
  auto betas = n.getFloats("activation_beta");
  if (names->strings_size() != static_cast<int>(defaults.size() * directions))
    return n.fail("expected " + Twine(defaults.size() * directions) +
                  " activations");
  for (int i = 0; i < names->strings_size(); ++i) {
    Activation f{names->strings(i)};
    // HardSigmoid's defaults, as the spec gives them.
    f.alpha =
        alphas && i < static_cast<int>(alphas->size()) ? (*alphas)[i] : 0.2;
    f.beta = betas && i < static_cast<int>(betas->size()) ? (*betas)[i] : 0.5;
    activations.push_back(f);
  }
  return success();
}

LogicalResult Recurrence::runDirection(int64_t d, bool reverse,
                                       SmallVectorImpl<Value> &outputs,
                                       Value &lastH, Value &lastC) {
  unsigned count = gates();
  FailureOr<Value> w = direction(n.input(1), d);
  FailureOr<Value> r = failed(w) ? w : direction(n.input(2), d);
  if (failed(r))
    return failure();
  auto rowType = typeOf({count * hidden});
  // Wb + Rb, except GRU's Rbh when it applies after the reset gate.
  Value inputBias, recurrentBias;
  bool resetAfter = cell == Cell::GRU && n.getInt("linear_before_reset", 0);
  if (n.hasInput(3)) {
    FailureOr<Value> both = direction(n.input(3), d);
    if (failed(both))
      return failure();
    FailureOr<Value> wb = slice(*both, {0}, {count * hidden});
    FailureOr<Value> rb = slice(*both, {count * hidden}, {2 * count * hidden});
    if (failed(wb) || failed(rb))
      return failure();
    inputBias = *wb;
    recurrentBias = *rb;
  } else {
    inputBias = n.splat(rowType, 0);
    recurrentBias = n.splat(rowType, 0);
  }
  if (cell == Cell::GRU) {
    // Rbz and Rbr join the input bias; Rbh stays apart.
    FailureOr<Value> rzr = slice(recurrentBias, {0}, {2 * hidden});
    FailureOr<Value> rh = slice(recurrentBias, {2 * hidden}, {3 * hidden});
    if (failed(rzr) || failed(rh))
      return failure();
    FailureOr<Value> padded = n.create<ConcatOp>(
        ValueRange{*rzr, n.splat(typeOf({hidden}), 0)}, {n.i64("axis", 0)});
    if (failed(padded))
      return failure();
    FailureOr<Value> sum = add(inputBias, *padded);
    if (failed(sum))
      return failure();
    inputBias = *sum;
    recurrentBias = *rh;
  } else {
    FailureOr<Value> sum = add(inputBias, recurrentBias);
    if (failed(sum))
      return failure();
    inputBias = *sum;
  }
  // x W^T + bias for every step at once: [steps * batch, G * hidden].
  FailureOr<Value> flat = n.reshape(x, {steps * batch, inputSize});
  if (failed(flat))
    return failure();
  FailureOr<Value> projected =
      n.create<MatmulOp>(ValueRange{*flat, *w}, {n.unit("transpose_rhs")});
  if (failed(projected))
    return failure();
  auto stepsType = typeOf({steps * batch, count * hidden});
  FailureOr<Value> biasRows = n.broadcastTo(inputBias, stepsType.getShape());
  if (failed(biasRows))
    return failure();
  projected = add(*projected, *biasRows);
  if (failed(projected))
    return failure();
  FailureOr<Value> recurrentRows;
  if (cell == Cell::GRU)
    recurrentRows = n.broadcastTo(recurrentBias, {batch, hidden});
  // Peepholes: Pi, Po, Pf.
  Value peep[3];
  if (cell == Cell::LSTM && n.hasInput(7)) {
    FailureOr<Value> p = direction(n.input(7), d);
    if (failed(p))
      return failure();
    for (int k = 0; k < 3; ++k) {
      FailureOr<Value> part = slice(*p, {k * hidden}, {(k + 1) * hidden});
      if (failed(part))
        return failure();
      FailureOr<Value> rows = n.broadcastTo(*part, {batch, hidden});
      if (failed(rows))
        return failure();
      peep[k] = *rows;
    }
  }
  auto stateType = typeOf({batch, hidden});
  auto initial = [&](unsigned i) -> FailureOr<Value> {
    if (!n.hasInput(i))
      return n.splat(stateType, 0);
    return direction(n.input(i), d);
  };
  FailureOr<Value> h = initial(5);
  FailureOr<Value> c = cell == Cell::LSTM ? initial(6) : h;
  if (failed(h) || failed(c))
    return failure();
  ArrayRef<Activation> fs = ArrayRef(activations)
                                .slice(d * (activations.size() / directions),
                                       activations.size() / directions);
  bool ragged = llvm::any_of(lengths, [&](int64_t l) { return l != steps; });
  outputs.assign(steps, Value());
  for (int64_t i = 0; i < steps; ++i) {
    int64_t t = reverse ? steps - 1 - i : i;
    FailureOr<Value> xt =
        slice(*projected, {t * batch, 0}, {(t + 1) * batch, count * hidden});
    if (failed(xt))
      return failure();
    FailureOr<Value> hr =
        n.create<MatmulOp>(ValueRange{*h, *r}, {n.unit("transpose_rhs")});
    if (failed(hr))
      return failure();
    Value newH, newC;
    if (cell == Cell::RNN) {
      FailureOr<Value> pre = add(*xt, *hr);
      FailureOr<Value> out = failed(pre) ? pre : activate(fs[0], *pre);
      if (failed(out))
        return failure();
      newH = *out;
    } else if (cell == Cell::GRU) {
      // Gates z, r from the summed projections; h apart.
      FailureOr<Value> xz = gate(*xt, 0), xr = gate(*xt, 1), xh = gate(*xt, 2);
      FailureOr<Value> hz = gate(*hr, 0), hrr = gate(*hr, 1);
      if (failed(xz) || failed(xr) || failed(xh) || failed(hz) || failed(hrr))
        return failure();
      FailureOr<Value> z = add(*xz, *hz);
      z = failed(z) ? z : activate(fs[0], *z);
      FailureOr<Value> reset = add(*xr, *hrr);
      reset = failed(reset) ? reset : activate(fs[0], *reset);
      if (failed(z) || failed(reset))
        return failure();
      FailureOr<Value> candidate;
      // Rh: rows [2 hidden, 3 hidden) of R.
      FailureOr<Value> rh = slice(*r, {2 * hidden, 0}, {3 * hidden, hidden});
      if (failed(rh))
        return failure();
      if (resetAfter) {
        FailureOr<Value> hh = gate(*hr, 2);
        hh = failed(hh) ? hh : add(*hh, *recurrentRows);
        hh = failed(hh) ? hh : mul(*reset, *hh);
        candidate = failed(hh) ? hh : add(*xh, *hh);
      } else {
        FailureOr<Value> rhPrev = mul(*reset, *h);
        FailureOr<Value> hh =
            failed(rhPrev) ? rhPrev
                           : n.create<MatmulOp>(ValueRange{*rhPrev, *rh},
                                                {n.unit("transpose_rhs")});
        hh = failed(hh) ? hh : add(*hh, *recurrentRows);
        candidate = failed(hh) ? hh : add(*xh, *hh);
      }
      candidate = failed(candidate) ? candidate : activate(fs[1], *candidate);
      if (failed(candidate))
        return failure();
      // H = h + z (H - h).
      FailureOr<Value> diff = n.create<SubOp>(ValueRange{*h, *candidate});
      diff = failed(diff) ? diff : mul(*z, *diff);
      diff = failed(diff) ? diff : add(*candidate, *diff);
      if (failed(diff))
        return failure();
      newH = *diff;
    } else {
      FailureOr<Value> pre = add(*xt, *hr);
      if (failed(pre))
        return failure();
      FailureOr<Value> gi = gate(*pre, 0), go = gate(*pre, 1),
                       gf = gate(*pre, 2), gc = gate(*pre, 3);
      if (failed(gi) || failed(go) || failed(gf) || failed(gc))
        return failure();
      if (peep[0]) {
        FailureOr<Value> pi = mul(peep[0], *c), pf = mul(peep[2], *c);
        if (failed(pi) || failed(pf))
          return failure();
        gi = add(*gi, *pi);
        gf = add(*gf, *pf);
        if (failed(gi) || failed(gf))
          return failure();
      }
      FailureOr<Value> in = activate(fs[0], *gi), forget = activate(fs[0], *gf),
                       cand = activate(fs[1], *gc);
      if (failed(in) || failed(forget) || failed(cand))
        return failure();
      FailureOr<Value> kept = mul(*forget, *c), added = mul(*in, *cand);
      if (failed(kept) || failed(added))
        return failure();
      FailureOr<Value> memory = add(*kept, *added);
      if (failed(memory))
        return failure();
      if (peep[1]) {
        FailureOr<Value> po = mul(peep[1], *memory);
        go = failed(po) ? po : add(*go, *po);
        if (failed(go))
          return failure();
      }
      FailureOr<Value> out = activate(fs[0], *go);
      FailureOr<Value> squashed = activate(fs[2], *memory);
      if (failed(out) || failed(squashed))
        return failure();
      FailureOr<Value> hNew = mul(*out, *squashed);
      if (failed(hNew))
        return failure();
      newH = *hNew;
      newC = *memory;
    }
    Value output = newH;
    if (ragged) {
      // Batch elements past their length keep their state, output zeros.
      SmallVector<bool> live;
      for (int64_t l : lengths)
        live.push_back(t < l);
      auto maskType =
          RankedTensorType::get({batch, 1}, IntegerType::get(n.ctx, 1));
      FailureOr<Value> mask = n.broadcastTo(
          n.constant(DenseElementsAttr::get(maskType, ArrayRef(live))),
          {batch, hidden});
      if (failed(mask))
        return failure();
      FailureOr<Value> keptH = n.create<SelectOp>(ValueRange{*mask, newH, *h});
      FailureOr<Value> zeroed =
          n.create<SelectOp>(ValueRange{*mask, newH, n.splat(stateType, 0)});
      if (failed(keptH) || failed(zeroed))
        return failure();
      newH = *keptH;
      output = *zeroed;
      if (newC) {
        FailureOr<Value> keptC =
            n.create<SelectOp>(ValueRange{*mask, newC, *c});
        if (failed(keptC))
          return failure();
        newC = *keptC;
      }
    }
    outputs[t] = output;
    h = newH;
    if (newC)
      c = newC;
  }
  lastH = *h;
  lastC = *c;
  return success();
}

LogicalResult Recurrence::import() {
  unsigned maxInputs = cell == Cell::LSTM ? 8 : 6;
  if (failed(n.expectInputs(3, maxInputs)))
    return failure();
  RankedTensorType xType = n.inputType(0);
  element = xType.getElementType();
  if (!isa<FloatType>(element) || xType.getRank() != 3)
    return n.fail("expected a float input X of rank 3");
  batchFirst = n.getInt("layout", 0) != 0;
  steps = xType.getDimSize(batchFirst ? 1 : 0);
  batch = xType.getDimSize(batchFirst ? 0 : 1);
  inputSize = xType.getDimSize(2);
  hidden = n.getInt("hidden_size", 0);
  std::string way = n.getString("direction", "forward");
  if (way != "forward" && way != "reverse" && way != "bidirectional")
    return n.fail("direction '" + way +
                  "' is not forward, reverse or bidirectional");
  directions = way == "bidirectional" ? 2 : 1;
  int64_t count = gates();
  if (hidden <= 0 ||
      n.inputType(1).getShape() !=
          ArrayRef<int64_t>{directions, count * hidden, inputSize} ||
      n.inputType(2).getShape() !=
          ArrayRef<int64_t>{directions, count * hidden, hidden})
    return n.fail("W and R must be [" + Twine(directions) + ", " +
                  Twine(count) + " * hidden_size, input or hidden size]");
  if (cell == Cell::LSTM && n.getInt("input_forget", 0))
    return n.fail("input_forget is not supported yet");
  if (n.attr("clip"))
    clip = n.getFloat("clip", 0);
  if (failed(readActivations()))
    return failure();
  lengths.assign(batch, steps);
  if (n.hasInput(4)) {
    FailureOr<SmallVector<int64_t>> given = n.constInts(4, "sequence_lens");
    if (failed(given))
      return failure();
    if (static_cast<int64_t>(given->size()) != batch)
      return n.fail("sequence_lens must hold one length per batch element");
    for (int64_t l : *given)
      if (l < 0 || l > steps)
        return n.fail("sequence length " + Twine(l) + " is outside [0, " +
                      Twine(steps) + "]");
    lengths.assign(given->begin(), given->end());
    if (way != "forward" &&
        llvm::any_of(lengths, [&](int64_t l) { return l != steps; }))
      return n.fail("sequence_lens shorter than the sequence are supported "
                    "forward only yet");
  }
  x = n.input(0);
  if (batchFirst) {
    // [batch, steps, input] -> [steps, batch, input]; the initial states
    // are [batch, directions, hidden] too.
    FailureOr<Value> swapped =
        n.create<TransposeOp>(x, {n.array("permutation", {1, 0, 2})});
    if (failed(swapped))
      return failure();
    x = *swapped;
    if (n.hasInput(5) || (cell == Cell::LSTM && n.hasInput(6)))
      return n.fail("initial states with layout 1 are not supported yet");
  }
  SmallVector<Value> ys, hs, cs;
  for (int64_t d = 0; d < directions; ++d) {
    SmallVector<Value> outputs;
    Value lastH, lastC;
    if (failed(
            runDirection(d, way == "reverse" || d == 1, outputs, lastH, lastC)))
      return failure();
    // [steps][batch, hidden] -> [steps, 1, batch, hidden].
    SmallVector<Value> steps4;
    for (Value o : outputs) {
      FailureOr<Value> shaped = n.reshape(o, {1, 1, batch, hidden});
      if (failed(shaped))
        return failure();
      steps4.push_back(*shaped);
    }
    FailureOr<Value> y = steps4.size() == 1
                             ? FailureOr<Value>(steps4.front())
                             : n.create<ConcatOp>(steps4, {n.i64("axis", 0)});
    FailureOr<Value> hFinal = n.reshape(lastH, {1, batch, hidden});
    FailureOr<Value> cFinal = n.reshape(lastC, {1, batch, hidden});
    if (failed(y) || failed(hFinal) || failed(cFinal))
      return failure();
    ys.push_back(*y);
    hs.push_back(*hFinal);
    cs.push_back(*cFinal);
  }
  auto join = [&](ArrayRef<Value> parts, int64_t axis) -> FailureOr<Value> {
    if (parts.size() == 1)
      return parts.front();
    return n.create<ConcatOp>(parts, {n.i64("axis", axis)});
  };
  FailureOr<Value> y = join(ys, 1), yh = join(hs, 0), yc = join(cs, 0);
  if (failed(y) || failed(yh) || failed(yc))
    return failure();
  if (batchFirst) {
    // Y [steps, dirs, batch, hidden] -> [batch, steps, dirs, hidden]; Y_h
    // and Y_c [dirs, batch, hidden] -> [batch, dirs, hidden].
    y = n.create<TransposeOp>(*y, {n.array("permutation", {2, 0, 1, 3})});
    yh = n.create<TransposeOp>(*yh, {n.array("permutation", {1, 0, 2})});
    yc = n.create<TransposeOp>(*yc, {n.array("permutation", {1, 0, 2})});
    if (failed(y) || failed(yh) || failed(yc))
      return failure();
  }
  n.setOutput(0, *y);
  n.setOutput(1, *yh);
  if (cell == Cell::LSTM)
    n.setOutput(2, *yc);
  return success();
}

} // namespace

void kiln::onnx_import::registerRecurrentOps(OpImporterTable &t) {
  t["RNN"] = [](NodeContext &n) { return Recurrence(n, Cell::RNN).import(); };
  t["GRU"] = [](NodeContext &n) { return Recurrence(n, Cell::GRU).import(); };
  t["LSTM"] = [](NodeContext &n) { return Recurrence(n, Cell::LSTM).import(); };
}
