//===- TrainStep.cpp - train_step, accumulate_step and eval_step ----------===//
//
// Builds the training entry points from kiln-autodiff's gradient function:
// torch.optim's update rules over every trainable parameter, a learning-rate
// schedule computed from the step count, global-norm gradient clipping and
// gradient accumulation over micro-batches.
//
//===----------------------------------------------------------------------===//

#include "kiln/KilnInterfaces.h"
#include "kiln/KilnOps.h"
#include "kiln/Transforms/Training/Passes.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/MathExtras.h"

#include <cmath>

namespace kiln {
#define GEN_PASS_DEF_KILNTRAINSTEP
#include "kiln/Transforms/Training/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {

/// `v` printed with enough digits to read back the same double.
std::string shortest(double v) {
  std::string text;
  llvm::raw_string_ostream(text) << llvm::format("%.17g", v);
  for (int digits = 1; digits < 17; ++digits) {
    std::string shorter;
    llvm::raw_string_ostream(shorter) << llvm::format("%.*g", digits, v);
    if (std::stod(shorter) == v)
      return shorter;
  }
  return text;
}

/// One trainable parameter of the step: its read and its gradient.
struct Slot {
  std::string name;
  Value param, grad;
};

/// A result of a built function: its value, its name, and the parameter it
/// updates in place (empty for plain outputs).
struct Output {
  Value value;
  std::string name, updates;
};

/// Builds kiln ops at one insertion point: tensor splats, and scalar (0-d)
/// arithmetic for the step-dependent factors, done in f64 as torch.optim does
/// them in Python floats.
struct StepBuilder {
  OpBuilder &b;
  Location loc;

  RankedTensorType scalarType(Type element) {
    return RankedTensorType::get({}, element);
  }
  Value splat(Type type, double value) {
    auto tensor = llvm::cast<RankedTensorType>(type);
    return ConstantOp::create(
        b, loc,
        DenseElementsAttr::get(tensor,
                               b.getFloatAttr(tensor.getElementType(), value)));
  }
  Value f64(double value) { return splat(scalarType(b.getF64Type()), value); }
  Value convert(Value v, Type element) {
    auto type = tensorType(v);
    if (type.getElementType() == element)
      return v;
    return CastOp::create(b, loc, type.clone(element), v);
  }
  static RankedTensorType tensorType(Value v) {
    return llvm::cast<RankedTensorType>(v.getType());
  }
  Value add(Value x, Value y) { return AddOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return SubOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return MulOp::create(b, loc, x, y); }
  Value div(Value x, Value y) { return DivOp::create(b, loc, x, y); }
  Value max(Value x, Value y) { return MaxOp::create(b, loc, x, y); }
  Value min(Value x, Value y) { return MinOp::create(b, loc, x, y); }
  Value sqrt(Value x) { return SqrtOp::create(b, loc, x); }
  Value compare(ComparePredicate predicate, Value x, Value y) {
    return CompareOp::create(b, loc, predicate, x, y);
  }
  Value select(Value cond, Value x, Value y) {
    return SelectOp::create(b, loc, cond, x, y);
  }
  /// Whether `x` is 0 exactly.
  Value isZero(Value x) {
    return compare(ComparePredicate::eq, x, splat(x.getType(), 0.0));
  }
  /// `x` times the constant `c`, in x's type.
  Value scale(Value x, double c) { return mul(x, splat(x.getType(), c)); }
  /// `x` times the 0-d `factor`, cast to x's element type and broadcast.
  Value scale(Value x, Value factor) { return mul(x, like(x, factor)); }
  /// The sum of all elements of `x`, as a 0-d tensor. A tensor of rank 2 or
  /// more is summed over its inner dimensions first, then over the first:
  /// each kernel of a reduction keeps its outer points parallel, so a
  /// device target spreads the first stage over as many threads as `x` has
  /// rows instead of summing the whole tensor on one.
  Value sumAll(Value x) {
    auto type = tensorType(x);
    int64_t rank = type.getRank();
    if (rank >= 2)
      x = ReduceSumOp::create(
          b, loc, x,
          b.getDenseI64ArrayAttr(llvm::to_vector(llvm::seq<int64_t>(1, rank))),
          nullptr);
    if (rank >= 1)
      x = ReduceSumOp::create(b, loc, x, b.getDenseI64ArrayAttr({0}), nullptr);
    return x;
  }
  /// `x` divided by the 0-d `divisor`, cast and broadcast likewise.
  Value divide(Value x, Value divisor) { return div(x, like(x, divisor)); }
  /// The 0-d `v` cast to x's element type and broadcast to its shape.
  Value like(Value x, Value v) {
    auto type = tensorType(x);
    v = convert(v, type.getElementType());
    if (type.getRank() != 0)
      v = BroadcastOp::create(b, loc, type, v);
    return v;
  }
};

struct KilnTrainStepPass : kiln::impl::KilnTrainStepBase<KilnTrainStepPass> {
  using KilnTrainStepBase::KilnTrainStepBase;

  /// A zero-initialized (or `init`) optimizer state symbol, read at the start
  /// of `block`.
  Value stateParam(OpBuilder &b, ModuleOp module, Location loc, StringRef name,
                   Type type, Block &block, double init = 0.0) {
    auto tensor = cast<RankedTensorType>(type);
    if (!module.lookupSymbol(name)) {
      OpBuilder mb(module.getBodyRegion());
      mb.setInsertionPointToEnd(module.getBody());
      auto state = ParamOp::create(
          mb, loc, mb.getStringAttr(name), TypeAttr::get(tensor),
          cast<ElementsAttr>(DenseElementsAttr::get(
              tensor, mb.getFloatAttr(tensor.getElementType(), init))));
      state->setAttr("kiln.optimizer_state", mb.getUnitAttr());
    }
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&block);
    return GetParamOp::create(b, loc, type, name);
  }

  LogicalResult checkOptions(ModuleOp module) {
    auto error = [&]() { return module.emitError("kiln-train-step: "); };
    if (!llvm::is_contained({"sgd", "adam", "adamw", "adagrad"}, optimizer))
      return error() << "unknown optimizer '" << optimizer.getValue()
                     << "' (expected sgd, adam, adamw or adagrad)";
    if (!llvm::is_contained({"constant", "linear", "cosine"}, schedule))
      return error() << "unknown schedule '" << schedule.getValue()
                     << "' (expected constant, linear or cosine)";
    if (lr < 0)
      return error() << "the learning rate must not be negative, not "
                     << lr.getValue();
    if (momentum < 0 || weightDecay < 0 || lrDecay < 0 || gradClip < 0 ||
        initialAccumulator < 0)
      return error() << "momentum, weight decay, lr decay, gradient clipping "
                        "and the initial accumulator must not be negative";
    if (nesterov && (optimizer != "sgd" || momentum <= 0))
      return error() << "Nesterov momentum needs --optimizer=sgd and a "
                        "positive momentum";
    if (beta1 < 0 || beta1 >= 1 || beta2 < 0 || beta2 >= 1)
      return error() << "beta1 and beta2 must lie in [0, 1)";
    if (warmupSteps < 0 || totalSteps < 0)
      return error() << "warm-up and total steps must not be negative";
    if (schedule != "constant" && totalSteps <= warmupSteps)
      return error() << "the " << schedule.getValue()
                     << " schedule needs total steps (" << totalSteps.getValue()
                     << ") greater than the warm-up steps ("
                     << warmupSteps.getValue() << ")";
    if (gradAccum < 1)
      return error() << "gradient accumulation needs at least 1 micro-batch, "
                        "not "
                     << gradAccum.getValue();
    if (lossScale < 0 || !std::isfinite(lossScale))
      return error() << "the loss scale must be a finite positive number "
                        "(0: none), not "
                     << lossScale.getValue();
    if (lossScale > 0 &&
        (lossScaleGrowthInterval < 1 || lossScaleGrowthInterval > (1 << 24)))
      return error() << "the loss-scale growth interval must lie in [1, "
                        "2^24], not "
                     << lossScaleGrowthInterval.getValue();
    if (shardOptimizer < 0)
      return error() << "shard-optimizer must be a number of ranks, not "
                     << shardOptimizer.getValue();
    if (shardOptimizer > 0 && !dataParallel)
      return error() << "shard-optimizer needs data-parallel";
    if (shardOptimizer > 0 && optimizer == "sgd" && momentum == 0)
      return error() << "shard-optimizer: SGD without momentum keeps no "
                        "optimizer state to shard";
    for (StringRef name : {"train_step", "eval_step", "accumulate_step"})
      if (module.lookupSymbol(name))
        return error() << "'" << name << "' already exists";
    return success();
  }

  /// The learning-rate factor of the update following `done` (0-d f64)
  /// earlier ones.
  Value scheduleFactor(StepBuilder &k, Value done) {
    double warmup = static_cast<double>(warmupSteps);
    double total = static_cast<double>(totalSteps);
    Value after;
    Value span = k.f64(std::max(1.0, total - warmup));
    if (schedule == "constant") {
      after = k.f64(1.0);
    } else if (schedule == "linear") {
      after = k.max(k.f64(0.0), k.div(k.sub(k.f64(total), done), span));
    } else {
      {
        Value progress = k.div(k.sub(done, k.f64(warmup)), span);
        Value angle = k.scale(progress, llvm::numbers::pi);
        Value cosine =
            k.scale(k.add(k.f64(1.0), CosOp::create(k.b, k.loc, angle)), 0.5);
        after = k.max(k.f64(0.0), cosine);
      }
    }
    if (warmupSteps == 0)
      return after;
    Value ramp = k.div(done, k.f64(std::max(1.0, warmup)));
    Value warming = k.compare(ComparePredicate::lt, done, k.f64(warmup));
    return k.select(warming, ramp, after);
  }

  /// Scales the gradients to a global norm of at most gradClip; returns the
  /// norm before clipping.
  Value clipGradients(StepBuilder &k, MutableArrayRef<Slot> slots) {
    Type f32 = k.b.getF32Type();
    Value sumOfSquares = k.splat(k.scalarType(f32), 0.0);
    for (Slot &slot : slots)
      sumOfSquares = k.add(
          sumOfSquares, k.convert(k.sumAll(k.mul(slot.grad, slot.grad)), f32));
    Value norm = k.sqrt(sumOverRanks(k, sumOfSquares));
    Value coef = k.div(k.splat(norm.getType(), gradClip),
                       k.add(norm, k.splat(norm.getType(), 1e-6)));
    coef = k.min(coef, k.splat(norm.getType(), 1.0));
    for (Slot &slot : slots)
      slot.grad = k.scale(slot.grad, coef);
    return norm;
  }

  /// The updates of one parameter with learning rate `lrNow` (0-d f64) at
  /// update `t` (0-d f64, from 1).
  void update(StepBuilder &k, ModuleOp module, Block &block, Slot &slot,
              Value lrNow, Value t, SmallVectorImpl<Output> &outputs) {
    Value p = slot.param, g = slot.grad;
    Type type = p.getType();
    auto state = [&](StringRef suffix, double init = 0.0) {
      std::string name = slot.name + suffix.str();
      return std::make_pair(
          stateParam(k.b, module, k.loc, name, type, block, init), name);
    };
    if (weightDecay != 0 && optimizer != "adamw")
      g = k.add(g, k.scale(p, weightDecay));
    if (optimizer == "sgd") {
      if (momentum != 0) {
        auto [buf, name] = state(".momentum_buffer");
        Value next = k.add(k.scale(buf, momentum), g);
        outputs.push_back({next, name, name});
        g = nesterov ? k.add(g, k.scale(next, momentum)) : next;
      }
      outputs.push_back({k.sub(p, k.scale(g, lrNow)), slot.name, slot.name});
      return;
    }
    if (optimizer == "adagrad") {
      auto [sum, name] = state(".sum", initialAccumulator);
      Value clr = k.div(
          lrNow, k.add(k.f64(1.0), k.scale(k.sub(t, k.f64(1.0)), lrDecay)));
      Value next = k.add(sum, k.mul(g, g));
      Value std = k.add(k.sqrt(next), k.splat(type, eps));
      outputs.push_back({next, name, name});
      outputs.push_back(
          {k.sub(p, k.scale(k.div(g, std), clr)), slot.name, slot.name});
      return;
    }
    // Adam and AdamW.
    if (optimizer == "adamw" && weightDecay != 0)
      p = k.scale(p, k.sub(k.f64(1.0), k.scale(lrNow, weightDecay)));
    auto [m, mName] = state(".exp_avg");
    auto [v, vName] = state(".exp_avg_sq");
    Value m2 = k.add(k.scale(m, beta1), k.scale(g, 1 - beta1));
    Value v2 = k.add(k.scale(v, beta2), k.scale(k.mul(g, g), 1 - beta2));
    auto correction = [&](double beta) {
      return k.sub(k.f64(1.0), PowOp::create(k.b, k.loc, k.f64(beta), t));
    };
    Value stepSize = k.div(lrNow, correction(beta1));
    Value denom = k.add(k.divide(k.sqrt(v2), k.sqrt(correction(beta2))),
                        k.splat(type, eps));
    outputs.push_back({m2, mName, mName});
    outputs.push_back({v2, vName, vName});
    outputs.push_back(
        {k.sub(p, k.scale(k.div(m2, denom), stepSize)), slot.name, slot.name});
  }

  /// Gives `f` exactly `outputs` as its results.
  void setResults(func::FuncOp f, ArrayRef<Output> outputs) {
    auto ret = cast<func::ReturnOp>(f.getBody().front().getTerminator());
    OpBuilder b(ret);
    SmallVector<Value> values;
    for (const Output &o : outputs)
      values.push_back(o.value);
    ret->setOperands(values);
    f.setType(FunctionType::get(f.getContext(), f.getArgumentTypes(),
                                ValueRange(values).getTypes()));
    for (auto [i, o] : llvm::enumerate(outputs)) {
      SmallVector<NamedAttribute> attrs{b.getNamedAttr(
          "kiln.name",
          b.getStringAttr(o.updates.empty() ? o.name : o.name + ".next"))};
      if (!o.updates.empty())
        attrs.push_back(
            b.getNamedAttr("kiln.update", b.getStringAttr(o.updates)));
      f.setResultAttrs(i, b.getDictionaryAttr(attrs));
    }
  }

  /// The loss scale (0-d f32 state), read at the start of `block`.
  Value lossScaleParam(OpBuilder &b, ModuleOp module, Location loc,
                       Block &block) {
    return stateParam(b, module, loc, "amp.loss_scale",
                      RankedTensorType::get({}, b.getF32Type()), block,
                      lossScale);
  }

  /// Starts the backward pass of `f` from the loss scale instead of 1.
  LogicalResult scaleSeed(ModuleOp module, func::FuncOp f) {
    ConstantOp seed;
    f.walk([&](ConstantOp op) {
      if (op->hasAttr("kiln.grad_seed"))
        seed = op;
    });
    if (!seed)
      return f.emitError("kiln-train-step: loss scaling needs the gradient "
                         "seed kiln-autodiff marks (kiln.grad_seed); run "
                         "kiln-train-step right after kiln-autodiff");
    Block &block = f.getBody().front();
    OpBuilder b(f.getContext());
    Value scale = lossScaleParam(b, module, seed.getLoc(), block);
    b.setInsertionPointAfterValue(scale);
    StepBuilder k{b, seed.getLoc()};
    // With K micro-batches, as `scaler.scale(loss / K).backward()`: each
    // backward pass starts from S / K, so what the f16 products see, and
    // where they overflow, is what PyTorch's accumulation sees; the sum of
    // the K gradients is then the mean's, scaled by S.
    if (gradAccum > 1)
      scale = k.div(scale,
                    k.splat(scale.getType(), static_cast<double>(gradAccum)));
    Value scaled = k.like(seed.getResult(), scale);
    seed.getResult().replaceAllUsesWith(scaled);
    seed.erase();
    return success();
  }

  /// Divides the scaled gradients by the loss scale; returns whether all of
  /// them are finite (0-d i1). An infinity or NaN times 0 is NaN, so the sum
  /// of every gradient times 0 is 0 exactly when all are finite.
  Value unscaleGradients(StepBuilder &k, ModuleOp module, Block &block,
                         MutableArrayRef<Slot> slots) {
    Type f32 = k.b.getF32Type();
    Value scale = lossScaleParam(k.b, module, k.loc, block);
    // As GradScaler: the reciprocal in f64, rounded to f32.
    Value inverse =
        k.convert(k.div(k.f64(1.0), k.convert(scale, k.b.getF64Type())), f32);
    Value poison = k.splat(k.scalarType(f32), 0.0);
    for (Slot &slot : slots) {
      slot.grad = k.scale(slot.grad, inverse);
      Value zeros = k.mul(slot.grad, k.splat(slot.grad.getType(), 0.0));
      poison = k.add(poison, k.convert(k.sumAll(zeros), f32));
    }
    return k.isZero(sumOverRanks(k, poison));
  }

  /// GradScaler's update of the scale: halved after a step with a
  /// non-finite gradient, doubled after lossScaleGrowthInterval finite ones
  /// in a row.
  void updateLossScale(StepBuilder &k, ModuleOp module, Block &block,
                       Value finite, SmallVectorImpl<Output> &outputs) {
    auto scalar = k.scalarType(k.b.getF32Type());
    Value scale = lossScaleParam(k.b, module, k.loc, block);
    Value tracker =
        stateParam(k.b, module, k.loc, "amp.growth_tracker", scalar, block);
    Value successes = k.add(tracker, k.splat(scalar, 1.0));
    Value grow = k.compare(
        ComparePredicate::eq, successes,
        k.splat(scalar, static_cast<double>(lossScaleGrowthInterval)));
    Value zero = k.splat(scalar, 0.0);
    // As GradScaler, a doubling that would overflow keeps the scale (an
    // infinity times 0 is NaN, not 0).
    Value doubled = k.scale(scale, 2.0);
    Value doubledFinite =
        k.compare(ComparePredicate::eq, k.mul(doubled, zero), zero);
    Value grown =
        k.select(grow, k.select(doubledFinite, doubled, scale), scale);
    Value nextScale = k.select(finite, grown, k.scale(scale, 0.5));
    Value nextTracker = k.select(finite, k.select(grow, zero, successes), zero);
    outputs.push_back({nextScale, "amp.loss_scale", "amp.loss_scale"});
    outputs.push_back(
        {nextTracker, "amp.growth_tracker", "amp.growth_tracker"});
  }

  /// Each of `updates` takes effect only when `finite`; otherwise the value
  /// it updates stays as it was.
  void skipUnlessFinite(StepBuilder &k, Block &block, Value finite,
                        MutableArrayRef<Output> updates) {
    for (Output &o : updates) {
      auto type = StepBuilder::tensorType(o.value);
      Value old;
      {
        OpBuilder::InsertionGuard guard(k.b);
        k.b.setInsertionPointToStart(&block);
        old = GetParamOp::create(k.b, k.loc, type, o.updates);
      }
      Value cond = finite;
      if (type.getRank() != 0)
        cond = BroadcastOp::create(k.b, k.loc, type.clone(k.b.getI1Type()),
                                   finite);
      o.value = k.select(cond, o.value, old);
    }
  }

  /// A copy of `grad` named `name`, inserted after `after`, and its trainable
  /// parameters with their gradients.
  func::FuncOp cloneGrad(ModuleOp module, func::FuncOp grad, Operation *after,
                         StringRef name, Value &loss,
                         SmallVectorImpl<Slot> &slots) {
    func::FuncOp f = grad.clone();
    f.setName(name);
    module.insert(std::next(Block::iterator(after)), f);
    Block &block = f.getBody().front();
    auto ret = cast<func::ReturnOp>(block.getTerminator());
    DenseMap<StringAttr, Value> reads;
    for (auto read : block.getOps<GetParamOp>())
      reads.try_emplace(read.getNameAttr().getAttr(), read.getResult());
    loss = ret.getOperand(0);
    if (lossScale > 0)
      if (failed(scaleSeed(module, f)))
        return nullptr;
    for (unsigned i = 1; i < ret.getNumOperands(); ++i) {
      auto gradName = f.getResultAttrOfType<StringAttr>(i, "kiln.name");
      StringRef param = gradName.getValue().drop_back(strlen(".grad"));
      if (Value p = reads.lookup(StringAttr::get(f.getContext(), param)))
        slots.push_back({param.str(), p, ret.getOperand(i)});
    }
    return f;
  }

  /// `eval_step`: the forward function returning only the loss.
  LogicalResult buildEvalStep(ModuleOp module, func::FuncOp grad,
                              Operation *after) {
    auto forward = module.lookupSymbol<func::FuncOp>(function);
    auto lossName = grad.getResultAttrOfType<StringAttr>(0, "kiln.name");
    if (!forward || !lossName)
      return grad.emitError("kiln-train-step: cannot find the loss of '")
             << function << "'";
    std::optional<unsigned> index;
    for (unsigned i = 0; i < forward.getNumResults(); ++i)
      if (forward.getResultAttrOfType<StringAttr>(i, "kiln.name") == lossName)
        index = i;
    if (!index)
      return forward.emitError("kiln-train-step: '")
             << function << "' has no result named " << lossName;
    func::FuncOp eval = forward.clone();
    eval.setName("eval_step");
    module.insert(std::next(Block::iterator(after)), eval);
    auto ret = cast<func::ReturnOp>(eval.getBody().front().getTerminator());
    setResults(eval, {{ret.getOperand(*index), lossName.str(), ""}});
    return success();
  }

  /// The op of `step`'s block that computes `v` (null for block arguments).
  static Operation *positionOf(func::FuncOp step, Value v) {
    Operation *def = v.getDefiningOp();
    return def ? step.getBody().front().findAncestorOpInBlock(*def) : nullptr;
  }

  /// A builder right after the last of `values` is computed in `step`.
  static OpBuilder builderAfter(func::FuncOp step, ArrayRef<Value> values) {
    Operation *last = nullptr;
    for (Value value : values)
      if (Operation *def = positionOf(step, value))
        if (!last || last->isBeforeInBlock(def))
          last = def;
    OpBuilder b(step.getContext());
    if (last)
      b.setInsertionPointAfter(last);
    else
      b.setInsertionPointToStart(&step.getBody().front());
    return b;
  }

  /// The slots in buckets of at most bucketBytes of gradients, in the order
  /// the backward pass finishes them.
  SmallVector<SmallVector<Slot *>>
  bucketsInBackwardOrder(func::FuncOp step, MutableArrayRef<Slot> slots) {
    SmallVector<Slot *> order;
    for (Slot &slot : slots)
      order.push_back(&slot);
    llvm::stable_sort(order, [&](Slot *x, Slot *y) {
      Operation *a = positionOf(step, x->grad), *b = positionOf(step, y->grad);
      if (!a || !b)
        return a == nullptr && b != nullptr;
      return a->isBeforeInBlock(b);
    });
    SmallVector<SmallVector<Slot *>> buckets;
    int64_t bytes = 0;
    for (Slot *slot : order) {
      auto type = cast<RankedTensorType>(slot->grad.getType());
      int64_t size = type.getNumElements() * 4;
      if (buckets.empty() || bytes + size > bucketBytes) {
        buckets.emplace_back();
        bytes = 0;
      }
      buckets.back().push_back(slot);
      bytes += size;
    }
    return buckets;
  }

  /// `values` (in place) replaced by their means over all ranks, right
  /// after the last of them is computed.
  void averageNow(func::FuncOp step, ArrayRef<Value *> values) {
    SmallVector<Value> inputs;
    for (Value *value : values)
      inputs.push_back(*value);
    OpBuilder b = builderAfter(step, inputs);
    auto op = AllReduceMeanOp::create(
        b, withPhase(step.getLoc(), StepPhase::Backward), inputs);
    for (auto [value, result] : llvm::zip(values, op.getResults()))
      *value = result;
  }

  /// Data parallelism: every rank computed the loss and gradients of its own
  /// batch; their means over all ranks replace them. Gradients go in buckets
  /// of at most bucketBytes, in the order the backward pass finishes them,
  /// each bucket right after its last gradient, so its communication
  /// overlaps the backward kernels that follow; the loss goes last.
  void averageOverRanks(func::FuncOp step, Value &loss,
                        MutableArrayRef<Slot> slots) {
    for (ArrayRef<Slot *> bucket : bucketsInBackwardOrder(step, slots)) {
      SmallVector<Value *> grads;
      for (Slot *slot : bucket)
        grads.push_back(&slot->grad);
      averageNow(step, grads);
    }
    averageNow(step, {&loss});
  }

  /// One bucket of a sharded optimizer (ZeRO-1): its parameters flattened
  /// and joined, padded to a multiple of the ranks; each rank updates one
  /// shard of that, as if it were one parameter (`shard`).
  struct ShardedBucket {
    SmallVector<Slot *> slots;
    int64_t padding = 0;
    Slot shard;
  };

  /// `values` flattened and joined, with `padding` zeros after them.
  static Value flatJoin(StepBuilder &k, ArrayRef<Value> values,
                        int64_t padding) {
    SmallVector<Value> pieces;
    for (Value value : values) {
      auto type = StepBuilder::tensorType(value);
      pieces.push_back(ReshapeOp::create(
          k.b, k.loc,
          RankedTensorType::get({type.getNumElements()}, type.getElementType()),
          value));
    }
    if (padding > 0)
      pieces.push_back(
          k.splat(RankedTensorType::get({padding}, k.b.getF32Type()), 0.0));
    if (pieces.size() == 1)
      return pieces.front();
    return ConcatOp::create(k.b, k.loc, pieces, 0);
  }

  /// Sharded data parallelism: each bucket's gradients, flattened, are
  /// reduce-scattered right after the last of them is computed, so each
  /// rank receives the mean of its shard only; the loss is averaged.
  SmallVector<ShardedBucket> shardOverRanks(func::FuncOp step, Value &loss,
                                            MutableArrayRef<Slot> slots) {
    SmallVector<ShardedBucket> buckets;
    for (ArrayRef<Slot *> slotsOfBucket : bucketsInBackwardOrder(step, slots)) {
      ShardedBucket &bucket = buckets.emplace_back();
      bucket.slots.assign(slotsOfBucket.begin(), slotsOfBucket.end());
      SmallVector<Value> grads;
      int64_t elements = 0;
      for (Slot *slot : bucket.slots) {
        grads.push_back(slot->grad);
        elements += StepBuilder::tensorType(slot->grad).getNumElements();
      }
      int64_t shardSize = llvm::divideCeil(elements, shardOptimizer);
      bucket.padding = shardSize * shardOptimizer - elements;
      OpBuilder b = builderAfter(step, grads);
      StepBuilder k{b, withPhase(step.getLoc(), StepPhase::Backward)};
      Value flat = flatJoin(k, grads, bucket.padding);
      auto shardType = RankedTensorType::get({shardSize}, b.getF32Type());
      bucket.shard.name =
          "optimizer.bucket" + std::to_string(buckets.size() - 1);
      bucket.shard.grad =
          ReduceScatterMeanOp::create(b, k.loc, shardType, flat, Value(),
                                      b.getI64IntegerAttr(shardOptimizer))
              .getResult();
    }
    averageNow(step, {&loss});
    return buckets;
  }

  /// The shard of each bucket's parameters this rank updates.
  void takeParameterShards(StepBuilder &k,
                           MutableArrayRef<ShardedBucket> buckets) {
    for (ShardedBucket &bucket : buckets) {
      SmallVector<Value> params;
      for (Slot *slot : bucket.slots)
        params.push_back(slot->param);
      Value flat = flatJoin(k, params, bucket.padding);
      bucket.shard.param =
          LocalShardOp::create(k.b, k.loc, bucket.shard.grad.getType(), flat,
                               Value(), k.b.getI64IntegerAttr(shardOptimizer))
              .getResult();
    }
  }

  /// Replaces the update of `bucket`'s shard in `outputs` by the updates of
  /// its parameters: every rank's updated shard, gathered and cut back
  /// into parameters. Marks the shard's optimizer state as sharded.
  void gatherUpdate(StepBuilder &k, ModuleOp module, ShardedBucket &bucket,
                    SmallVectorImpl<Output> &outputs) {
    StringRef name = bucket.shard.name;
    auto it = llvm::find_if(outputs,
                            [&](const Output &o) { return o.updates == name; });
    Value shard = it->value;
    outputs.erase(it);
    for (auto param : module.getOps<ParamOp>())
      if (param.getSymName().starts_with((name + ".").str()))
        param->setAttr("kiln.shard_ranks",
                       k.b.getI64IntegerAttr(shardOptimizer));
    auto flatType = RankedTensorType::get(
        {StepBuilder::tensorType(shard).getNumElements() * shardOptimizer},
        k.b.getF32Type());
    Value flat = AllGatherOp::create(k.b, k.loc, flatType, shard, Value(),
                                     k.b.getI64IntegerAttr(shardOptimizer))
                     .getResult();
    SmallVector<int64_t> sizes;
    for (Slot *slot : bucket.slots)
      sizes.push_back(StepBuilder::tensorType(slot->param).getNumElements());
    if (bucket.padding > 0)
      sizes.push_back(bucket.padding);
    SmallVector<Type> types;
    for (int64_t n : sizes)
      types.push_back(RankedTensorType::get({n}, k.b.getF32Type()));
    SmallVector<Value> pieces{flat};
    if (sizes.size() > 1)
      pieces = llvm::to_vector_of<Value>(
          SplitOp::create(k.b, k.loc, types, flat, 0, sizes).getResults());
    for (auto [slot, piece] : llvm::zip_first(bucket.slots, pieces))
      outputs.push_back(
          {ReshapeOp::create(k.b, k.loc, slot->param.getType(), piece),
           slot->name, slot->name});
  }

  /// With a sharded optimizer, `value` (0-d, a rank's part of a sum) summed
  /// over all ranks: their mean times their number.
  Value sumOverRanks(StepBuilder &k, Value value) {
    if (shardOptimizer == 0)
      return value;
    Value mean =
        AllReduceMeanOp::create(k.b, k.loc, ValueRange{value}).getResult(0);
    return k.scale(mean, static_cast<double>(shardOptimizer));
  }

  void recordMetadata(ModuleOp module) {
    OpBuilder b(module.getContext());
    NamedAttrList entries;
    if (auto existing = module->getAttrOfType<DictionaryAttr>("kiln.metadata"))
      entries.append(existing.getValue());
    auto set = [&](StringRef key, const Twine &value) {
      entries.set(b.getStringAttr(key), b.getStringAttr(value.str()));
    };
    set("training.optimizer", optimizer);
    set("training.lr", shortest(lr));
    set("training.schedule", schedule);
    set("training.grad_accum", std::to_string(gradAccum));
    if (dataParallel)
      set("training.data_parallel", "1");
    if (shardOptimizer > 0)
      set("training.shard_optimizer", std::to_string(shardOptimizer));
    if (gradClip != 0)
      set("training.grad_clip", shortest(gradClip));
    if (lossScale > 0)
      set("training.loss_scale", "dynamic");
    module->setAttr("kiln.metadata",
                    entries.getDictionary(module.getContext()));
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::string gradName = function + "_grad";
    auto grad = module.lookupSymbol<func::FuncOp>(gradName);
    if (!grad) {
      module.emitError("kiln-train-step: no gradient function '")
          << gradName << "'; run kiln-autodiff first";
      return signalPassFailure();
    }
    if (failed(checkOptions(module)))
      return signalPassFailure();
    if (eps < 0)
      eps = optimizer == "adagrad" ? 1e-10 : 1e-8;
    Location loc = withPhase(grad.getLoc(), StepPhase::Optimizer);

    Operation *last = grad;
    if (gradAccum > 1) {
      // accumulate_step: the loss, and each accumulator plus this
      // micro-batch's gradient.
      Value loss;
      SmallVector<Slot> slots;
      func::FuncOp accumulate =
          cloneGrad(module, grad, last, "accumulate_step", loss, slots);
      if (!accumulate)
        return signalPassFailure();
      Block &block = accumulate.getBody().front();
      // Its loss is reported with train_step's, a mean over the ranks; the
      // gradients are averaged once, in train_step.
      if (dataParallel)
        averageOverRanks(accumulate, loss, {});
      OpBuilder b(block.getTerminator());
      StepBuilder k{b, loc};
      SmallVector<Output> outputs{{loss, "loss", ""}};
      for (Slot &slot : slots) {
        std::string name = slot.name + ".grad_accum";
        Value sum =
            stateParam(b, module, loc, name, slot.grad.getType(), block);
        outputs.push_back({k.add(sum, slot.grad), name, name});
      }
      setResults(accumulate, outputs);
      last = accumulate;
    }

    Value loss;
    SmallVector<Slot> slots;
    func::FuncOp step =
        cloneGrad(module, grad, last, "train_step", loss, slots);
    if (!step)
      return signalPassFailure();
    Block &block = step.getBody().front();
    OpBuilder b(block.getTerminator());
    StepBuilder k{b, loc};
    SmallVector<Output> updates;

    // The update count t (from 1), kept as f32 state like torch.optim's.
    // With loss scaling, the updates from here on are skipped together.
    auto f32Scalar = k.scalarType(b.getF32Type());
    Value stepCount =
        stateParam(b, module, loc, "optimizer.step", f32Scalar, block);
    Value newStepCount = k.add(stepCount, k.splat(f32Scalar, 1.0));
    updates.push_back({newStepCount, "optimizer.step", "optimizer.step"});
    Value t = k.convert(newStepCount, b.getF64Type());

    if (gradAccum > 1) {
      double inverse = 1.0 / static_cast<double>(gradAccum);
      for (Slot &slot : slots) {
        std::string name = slot.name + ".grad_accum";
        Value sum =
            stateParam(b, module, loc, name, slot.grad.getType(), block);
        slot.grad = k.add(sum, slot.grad);
        // With loss scaling the seeds carried the 1 / K.
        if (lossScale == 0)
          slot.grad = k.scale(slot.grad, inverse);
        updates.push_back({k.splat(sum.getType(), 0.0), name, name});
      }
    }
    // With a sharded optimizer each rank updates its shard of each bucket
    // (`shards`), from here on in place of the parameters.
    SmallVector<ShardedBucket> buckets;
    SmallVector<Slot> shards;
    if (shardOptimizer > 0) {
      buckets = shardOverRanks(step, loss, slots);
      takeParameterShards(k, buckets);
      for (ShardedBucket &bucket : buckets)
        shards.push_back(bucket.shard);
    } else if (dataParallel) {
      averageOverRanks(step, loss, slots);
    }
    MutableArrayRef<Slot> updated = shardOptimizer > 0 ? shards : slots;
    SmallVector<Output> outputs{{loss, "loss", ""}};
    Value finite;
    if (lossScale > 0) {
      outputs.push_back(
          {lossScaleParam(b, module, loc, block), "loss_scale", ""});
      finite = unscaleGradients(k, module, block, updated);
    }
    Value lrNow = k.f64(lr);
    if (schedule != "constant" || warmupSteps != 0)
      lrNow = k.scale(scheduleFactor(k, k.sub(t, k.f64(1.0))), lr);
    outputs.push_back({k.convert(lrNow, b.getF32Type()), "lr", ""});
    if (gradClip != 0)
      outputs.push_back({clipGradients(k, updated), "grad_norm", ""});
    // Each bucket's shards are gathered as soon as they are updated, while
    // the next bucket's update runs.
    for (auto [i, slot] : llvm::enumerate(updated)) {
      update(k, module, block, slot, lrNow, t, updates);
      if (!buckets.empty())
        gatherUpdate(k, module, buckets[i], updates);
    }
    if (finite) {
      // A skipped update leaves the update count, the parameters and the
      // optimizer state as they were; the accumulators (which follow the
      // count) are cleared either way.
      size_t clears = gradAccum > 1 ? slots.size() : 0;
      skipUnlessFinite(k, block, finite,
                       MutableArrayRef(updates).take_front(1));
      skipUnlessFinite(k, block, finite,
                       MutableArrayRef(updates).drop_front(1 + clears));
      updateLossScale(k, module, block, finite, updates);
    }
    outputs.append(updates.begin(), updates.end());
    setResults(step, outputs);

    if (failed(buildEvalStep(module, grad, step)))
      return signalPassFailure();
    recordMetadata(module);
    if (!keepGradFunction)
      grad.erase();
  }
};

} // namespace
