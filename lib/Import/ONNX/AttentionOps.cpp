//===- AttentionOps.cpp - ONNX Attention and RotaryEmbedding (opset 23) ---===//
//
// Attention becomes one kiln.attention, the op kiln-fuse-attention forms
// from the written-out chain (so it has the same gradient and reaches the
// same kernels on the CUDA target): 3-D inputs are split into heads,
// grouped-query key and value heads are repeated to the query's, a boolean
// mask becomes the additive one (-inf where it drops) and is_causal a
// constant -inf above the diagonal, which the CUDA target recognises as
// causal. The key/value cache (past and present), nonpad_kv_seqlen and the
// sliding window shift and extend that bias as the operator defines them;
// softcap and the qk_matmul_output output, which kiln.attention does not
// compute, write the chain out instead. RotaryEmbedding becomes the slices,
// products and concatenations a model writes out for RoPE.
//
//===----------------------------------------------------------------------===//

#include "NodeContext.h"

#include "kiln/Transforms/Attention.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace kiln;
using namespace kiln::onnx_import;

namespace {

FailureOr<Value> transpose(NodeContext &n, Value x, ArrayRef<int64_t> perm) {
  return n.create<TransposeOp>(x, {n.array("permutation", perm)});
}

/// `x[..., start:limit:stride]` along dimension `dim`.
FailureOr<Value> sliceDim(NodeContext &n, Value x, int64_t dim, int64_t start,
                          int64_t limit, int64_t stride = 1) {
  auto type = cast<RankedTensorType>(x.getType());
  SmallVector<int64_t> starts(type.getRank(), 0), limits(type.getShape()),
      strides(type.getRank(), 1);
  starts[dim] = start;
  limits[dim] = limit;
  strides[dim] = stride;
  return n.create<SliceOp>(x,
                           {n.array("start", starts), n.array("limit", limits),
                            n.array("stride", strides)});
}

/// [B, S, H*D] -> [B, H, S, D].
FailureOr<Value> splitHeads(NodeContext &n, Value x, int64_t heads,
                            StringRef what) {
  auto type = cast<RankedTensorType>(x.getType());
  int64_t hidden = type.getDimSize(2);
  if (heads < 1 || hidden % heads != 0)
    return n.fail(what + " hidden size " + Twine(hidden) +
                  " does not divide into " + Twine(heads) + " heads");
  FailureOr<Value> split = n.reshape(
      x, {type.getDimSize(0), type.getDimSize(1), heads, hidden / heads});
  if (failed(split))
    return failure();
  return transpose(n, *split, {0, 2, 1, 3});
}

/// Repeats each of the `kvHeads` heads of [B, kvHeads, S, D] `times` times,
/// consecutively ([h0, h0, h1, h1, ...]), as grouped-query attention reads
/// them.
FailureOr<Value> repeatHeads(NodeContext &n, Value x, int64_t times) {
  if (times == 1)
    return x;
  auto type = cast<RankedTensorType>(x.getType());
  int64_t B = type.getDimSize(0), H = type.getDimSize(1),
          S = type.getDimSize(2), D = type.getDimSize(3);
  FailureOr<Value> grouped = n.reshape(x, {B, H, 1, S, D});
  if (failed(grouped))
    return failure();
  FailureOr<Value> repeated = n.broadcastTo(*grouped, {B, H, times, S, D});
  if (failed(repeated))
    return failure();
  return n.reshape(*repeated, {B, H * times, S, D});
}

/// Which keys a query sees under is_causal and a sliding window, with the
/// query block `offset` keys into the sequence: query i sees key j iff
/// j <= i + offset (causal) and -right <= i + offset - j <= left (the
/// window; a side of -1 is unbounded), as the operator aligns them
/// bottom-right.
struct Frontier {
  bool causal = false;
  int64_t left = -1, right = -1;

  bool any() const { return causal || left >= 0 || right >= 0; }
  bool allows(int64_t distance) const {
    return (!causal || distance >= 0) && (left < 0 || distance <= left) &&
           (right < 0 || -distance <= right);
  }
};

FailureOr<Value> compare(NodeContext &n, Value lhs, Value rhs,
                         ComparePredicate predicate) {
  SmallVector<Value> operands{lhs, rhs};
  if (failed(n.broadcastAll(operands)))
    return failure();
  return n.create<CompareOp>(
      operands,
      {n.named("predicate", ComparePredicateAttr::get(n.ctx, predicate))});
}

FailureOr<Value> both(NodeContext &n, Value lhs, Value rhs) {
  if (!lhs)
    return rhs;
  SmallVector<Value> operands{lhs, rhs};
  if (failed(n.broadcastAll(operands)))
    return failure();
  return n.create<AndOp>(operands);
}

/// 0 where `allowed`, `drop` elsewhere, in f32.
FailureOr<Value> additive(NodeContext &n, Value allowed,
                          double drop = -INFINITY) {
  auto type = cast<RankedTensorType>(allowed.getType()).clone(n.b.getF32Type());
  return n.create<SelectOp>(
      ValueRange{allowed, n.splat(type, 0.0), n.splat(type, drop)}, {}, {type});
}

FailureOr<Value> sum(NodeContext &n, Value lhs, Value rhs) {
  if (!lhs)
    return rhs;
  SmallVector<Value> terms{lhs, rhs};
  if (failed(n.broadcastAll(terms)))
    return failure();
  return n.create<AddOp>(terms);
}

/// The [B, 1, Sq, T] bias of the key/value lengths `nonpad` ([B], i64) of a
/// cache the caller keeps: keys at or after a batch's length are dropped,
/// and the frontier's offset is that length less the queries.
FailureOr<Value> nonpadBias(NodeContext &n, Value nonpad, int64_t queries,
                            int64_t keys, const Frontier &frontier) {
  auto nonpadType = cast<RankedTensorType>(nonpad.getType());
  if (nonpadType.getRank() != 1 || !nonpadType.getElementType().isInteger(64))
    return n.fail("nonpad_kv_seqlen must be a 1-D int64 tensor");
  int64_t batch = nonpadType.getDimSize(0);
  Type i64 = n.b.getI64Type();
  FailureOr<Value> lengths = n.reshape(nonpad, {batch, 1, 1, 1});
  FailureOr<Value> key =
      n.create<IotaOp>(ValueRange{}, {n.i64("dimension", 3)},
                       {RankedTensorType::get({1, 1, 1, keys}, i64)});
  if (failed(lengths) || failed(key))
    return failure();
  FailureOr<Value> allowed = compare(n, *key, *lengths, ComparePredicate::lt);
  if (failed(allowed))
    return failure();
  if (frontier.any()) {
    // distance = i + (length - Sq) - j.
    FailureOr<Value> query = n.create<IotaOp>(
        ValueRange{}, {n.i64("dimension", 2), n.f64("start", -queries)},
        {RankedTensorType::get({1, 1, queries, 1}, i64)});
    FailureOr<Value> position =
        succeeded(query) ? sum(n, *query, *lengths) : FailureOr<Value>();
    if (failed(position))
      return failure();
    SmallVector<Value> terms{*position, *key};
    if (failed(n.broadcastAll(terms)))
      return failure();
    FailureOr<Value> distance = n.create<SubOp>(terms);
    if (failed(distance))
      return failure();
    auto distanceType = cast<RankedTensorType>(distance->getType());
    auto bound = [&](int64_t value, ComparePredicate predicate) {
      return compare(n, *distance, n.splat(distanceType, value), predicate);
    };
    SmallVector<FailureOr<Value>> conditions;
    if (frontier.causal)
      conditions.push_back(bound(0, ComparePredicate::ge));
    if (frontier.left >= 0)
      conditions.push_back(bound(frontier.left, ComparePredicate::le));
    if (frontier.right >= 0)
      conditions.push_back(bound(-frontier.right, ComparePredicate::ge));
    for (FailureOr<Value> condition : conditions) {
      if (failed(condition))
        return failure();
      allowed = both(n, *allowed, *condition);
      if (failed(allowed))
        return failure();
    }
  }
  return additive(n, *allowed);
}

LogicalResult importAttention(NodeContext &n) {
  if (n.opset < 23)
    return n.fail("Attention is an operator of opset 23 and later");
  if (failed(n.expectInputs(3, n.opset >= 24 ? 7 : 6)))
    return failure();
  if (n.hasInput(4) != n.hasInput(5))
    return n.fail("past_key and past_value must be given together");
  if (n.hasInput(6) && n.hasInput(4))
    return n.fail("nonpad_kv_seqlen cannot be combined with past_key and "
                  "past_value");
  Frontier frontier;
  frontier.causal = n.getInt("is_causal", 0) != 0;
  frontier.left = n.getInt("left_window_size", -1);
  frontier.right = n.getInt("right_window_size", -1);
  if (frontier.left < -1 || frontier.right < -1)
    return n.fail("left_window_size and right_window_size must be -1 or at "
                  "least 0");
  double softcap = n.getFloat("softcap", 0.0);
  int64_t qkMode = n.getInt("qk_matmul_output_mode", 0);
  if (qkMode < 0 || qkMode > 3)
    return n.fail("qk_matmul_output_mode " + Twine(qkMode) +
                  " is not one of 0, 1, 2 and 3");
  // softmax_precision only widens the softmax of 16-bit inputs; Kiln
  // computes attention in f32 (kiln.attention's type) and rounds the
  // results back; the CUDA target's --amp decides what its kernels read.
  Value q = n.input(0), k = n.input(1), v = n.input(2);
  auto qType = n.inputType(0);
  Type resultElement = n.inputType(2).getElementType();
  for (unsigned i = 0; i < 3; ++i)
    if (!isa<Float32Type, Float16Type, BFloat16Type>(
            n.inputType(i).getElementType()))
      return n.fail("Q, K and V must be f32, f16 or bf16");
  Type f32Type = n.b.getF32Type();
  for (Value *operand : {&q, &k, &v}) {
    FailureOr<Value> wide = n.cast(*operand, f32Type);
    if (failed(wide))
      return failure();
    *operand = *wide;
  }
  int64_t rank = qType.getRank();
  if (rank != 3 && rank != 4)
    return n.fail("Q must have rank 3 or 4");
  if (n.inputType(1).getRank() != rank || n.inputType(2).getRank() != rank)
    return n.fail("Q, K and V must have the same rank");
  if (rank == 3) {
    int64_t qHeads = n.getInt("q_num_heads", 0),
            kvHeads = n.getInt("kv_num_heads", 0);
    if (qHeads < 1 || kvHeads < 1)
      return n.fail("3-D inputs need q_num_heads and kv_num_heads");
    FailureOr<Value> q4 = splitHeads(n, q, qHeads, "Q");
    FailureOr<Value> k4 = succeeded(q4) ? splitHeads(n, k, kvHeads, "K")
                                        : FailureOr<Value>(failure());
    FailureOr<Value> v4 = succeeded(k4) ? splitHeads(n, v, kvHeads, "V")
                                        : FailureOr<Value>(failure());
    if (failed(v4))
      return failure();
    q = *q4;
    k = *k4;
    v = *v4;
  }
  // The key/value cache: the past is put before this step's keys and
  // values, and the whole is the present.
  int64_t past = 0;
  if (n.hasInput(4)) {
    for (unsigned i : {4u, 5u})
      if (n.inputType(i).getRank() != 4)
        return n.fail("past_key and past_value must have rank 4");
    past = n.inputType(4).getDimSize(2);
    for (auto [current, index] : {std::pair{&k, 4u}, std::pair{&v, 5u}}) {
      FailureOr<Value> old = n.cast(n.input(index), f32Type);
      if (failed(old))
        return failure();
      auto oldType = cast<RankedTensorType>(old->getType());
      auto newType = cast<RankedTensorType>(current->getType());
      if (oldType.getDimSize(0) != newType.getDimSize(0) ||
          oldType.getDimSize(1) != newType.getDimSize(1) ||
          oldType.getDimSize(3) != newType.getDimSize(3))
        return n.fail(Twine(index == 4 ? "past_key" : "past_value") +
                      " does not match the batch, heads and head size of " +
                      (index == 4 ? "K" : "V"));
      FailureOr<Value> joined =
          n.create<ConcatOp>(ValueRange{*old, *current}, {n.i64("axis", 2)});
      if (failed(joined))
        return failure();
      *current = *joined;
    }
  }
  for (auto [value, index] : {std::pair{k, 1u}, std::pair{v, 2u}}) {
    if (!n.wantsOutput(index))
      continue;
    FailureOr<Value> present =
        n.cast(value, n.inputType(index).getElementType());
    if (failed(present))
      return failure();
    n.setOutput(index, *present);
  }

  auto q4Type = cast<RankedTensorType>(q.getType());
  auto k4Type = cast<RankedTensorType>(k.getType());
  auto v4Type = cast<RankedTensorType>(v.getType());
  int64_t batch = q4Type.getDimSize(0), qHeads = q4Type.getDimSize(1),
          queries = q4Type.getDimSize(2), headSize = q4Type.getDimSize(3);
  int64_t kvHeads = k4Type.getDimSize(1), keys = k4Type.getDimSize(2);
  if (k4Type.getDimSize(0) != batch || v4Type.getDimSize(0) != batch)
    return n.fail("Q, K and V have different batch sizes");
  if (v4Type.getDimSize(1) != kvHeads || v4Type.getDimSize(2) != keys)
    return n.fail("K and V have different heads or sequence lengths");
  if (k4Type.getDimSize(3) != headSize)
    return n.fail("Q and K have different head sizes");
  if (kvHeads < 1 || qHeads % kvHeads != 0)
    return n.fail(Twine(qHeads) + " query heads are not a multiple of " +
                  Twine(kvHeads) + " key/value heads");
  FailureOr<Value> kRepeated = repeatHeads(n, k, qHeads / kvHeads);
  FailureOr<Value> vRepeated = succeeded(kRepeated)
                                   ? repeatHeads(n, v, qHeads / kvHeads)
                                   : FailureOr<Value>(failure());
  if (failed(vRepeated))
    return failure();

  // The additive bias of the scores: 0 where a key is kept, -inf where it
  // is dropped (the boolean mask's false, a float mask's -inf, keys after a
  // mask shorter than them, the causal and window frontiers, the padding
  // after nonpad_kv_seqlen), anything else added to the score.
  auto f32 = n.b.getF32Type();
  const double lowest = -std::numeric_limits<float>::max();
  // softcap and the qk_matmul_output output write the chain out.
  bool expanded = softcap > 0.0 || n.wantsOutput(3);
  Value bias;
  // Whether a row may drop every key: the operator defines it as 0, where
  // a softmax of -inf alone would be NaN.
  bool rowsMayEmpty = false;
  // Whether the bias drops with the lowest float rather than -inf, as the
  // fused path below wants it.
  bool dropsFinite = false;
  if (n.hasInput(3)) {
    Value mask = n.input(3);
    auto type = n.inputType(3);
    if (type.getRank() < 1)
      return n.fail("attn_mask must have rank 1 or more");
    if (type.getElementType().isInteger(1)) {
      FailureOr<Value> added = additive(n, mask, expanded ? -INFINITY : lowest);
      if (failed(added))
        return failure();
      mask = *added;
      dropsFinite = !expanded;
    } else if (isa<Float16Type, BFloat16Type>(type.getElementType())) {
      FailureOr<Value> wide = n.cast(mask, f32);
      if (failed(wide))
        return failure();
      mask = *wide;
    } else if (!type.getElementType().isF32()) {
      return n.fail("attn_mask must be a boolean or floating-point tensor");
    }
    type = cast<RankedTensorType>(mask.getType());
    int64_t maskKeys = type.getDimSize(type.getRank() - 1);
    if (maskKeys > keys)
      return n.fail("attn_mask has " + Twine(maskKeys) + " keys, more than " +
                    Twine(keys));
    if (maskKeys < keys && maskKeys != 1) {
      SmallVector<int64_t> low(type.getRank(), 0), high(type.getRank(), 0);
      high.back() = keys - maskKeys;
      FailureOr<Value> padded = n.create<PadOp>(
          mask, {n.array("low", low), n.array("high", high),
                 n.named("mode", PadModeAttr::get(n.ctx, PadMode::constant)),
                 n.f64("value", dropsFinite ? lowest : -INFINITY)});
      if (failed(padded))
        return failure();
      mask = *padded;
    }
    bias = mask;
    rowsMayEmpty = true;
  }
  if (n.hasInput(6)) {
    FailureOr<Value> padding =
        nonpadBias(n, n.input(6), queries, keys, frontier);
    if (failed(padding))
      return failure();
    FailureOr<Value> total = sum(n, bias, *padding);
    if (failed(total))
      return failure();
    bias = *total;
    rowsMayEmpty = true;
    dropsFinite = false;
  } else if (frontier.any()) {
    // A constant: without a cache (past 0) the causal one is what the CUDA
    // target takes as causal.
    auto frontierType = RankedTensorType::get({queries, keys}, f32);
    SmallVector<float> values(queries * keys, 0.0f);
    for (int64_t i = 0; i < queries; ++i) {
      bool kept = false;
      for (int64_t j = 0; j < keys; ++j) {
        if (frontier.allows(i + past - j))
          kept = true;
        else
          values[i * keys + j] = -INFINITY;
      }
      rowsMayEmpty |= !kept;
    }
    Value constant = n.constant(
        DenseElementsAttr::get(frontierType, ArrayRef<float>(values)));
    FailureOr<Value> total = sum(n, bias, constant);
    if (failed(total))
      return failure();
    bias = *total;
    dropsFinite = false;
  }

  double scale = 1.0 / std::sqrt(static_cast<double>(headSize));
  if (n.attr("scale"))
    scale = n.getFloat("scale", scale);
  Value out;
  if (!expanded) {
    // kiln.attention, as kiln-fuse-attention forms it: where rows may drop
    // every key, drops are the lowest float (finite: the row's softmax is
    // uniform, and masked_fill gives its scores no gradient) and the rows
    // whose every score is dropped are zeroed.
    Value keptRows;
    if (rowsMayEmpty) {
      auto type = cast<RankedTensorType>(bias.getType());
      if (!dropsFinite) {
        FailureOr<Value> bounded =
            n.create<MaxOp>(ValueRange{bias, n.splat(type, lowest)});
        if (failed(bounded))
          return failure();
        bias = *bounded;
      }
      FailureOr<Value> best = n.create<ReduceMaxOp>(
          bias,
          {n.array("dimensions", {type.getRank() - 1}), n.unit("keepdims")});
      if (failed(best))
        return failure();
      auto bestType = cast<RankedTensorType>(best->getType());
      FailureOr<Value> kept = compare(
          n, *best, n.splat(bestType, kMaskedFillAtMost), ComparePredicate::gt);
      if (failed(kept))
        return failure();
      keptRows = *kept;
    }
    SmallVector<Value> operands{q, *kRepeated, *vRepeated};
    if (bias)
      operands.push_back(bias);
    SmallVector<NamedAttribute> attrs{n.f64("scale", scale)};
    if (keptRows)
      attrs.push_back(n.unit("masked_fill"));
    FailureOr<Value> result = n.create<AttentionOp>(operands, attrs);
    if (failed(result))
      return failure();
    if (keptRows) {
      // [..., Sq, 1] -> [B, H, Sq, Dv].
      auto outType = cast<RankedTensorType>(result->getType());
      SmallVector<Value> picked{keptRows, *result, n.splat(outType, 0.0)};
      if (failed(n.broadcastAll(picked)))
        return failure();
      result = n.create<SelectOp>(picked, {}, {outType});
      if (failed(result))
        return failure();
    }
    out = *result;
  } else {
    // Written out, for what kiln.attention does not compute: the scores
    // capped as softcap * tanh(scores / softcap) before the bias is added,
    // and the scores or probabilities as the qk_matmul_output output
    // (modes 0 and 1: the scaled, capped scores; 2: with the bias added;
    // 3: the probabilities).
    auto scoresType =
        RankedTensorType::get({batch, qHeads, queries, keys}, f32);
    FailureOr<Value> scores = n.create<MatmulOp>(ValueRange{q, *kRepeated},
                                                 {n.unit("transpose_rhs")});
    if (succeeded(scores))
      scores = n.create<MulOp>(ValueRange{*scores, n.splat(scoresType, scale)});
    if (succeeded(scores) && softcap > 0.0) {
      scores = n.create<MulOp>(
          ValueRange{*scores, n.splat(scoresType, 1.0 / softcap)});
      if (succeeded(scores))
        scores = n.create<TanhOp>(*scores);
      if (succeeded(scores))
        scores =
            n.create<MulOp>(ValueRange{*scores, n.splat(scoresType, softcap)});
    }
    if (failed(scores))
      return failure();
    Value qkOutput = *scores;
    if (bias) {
      scores = sum(n, *scores, bias);
      if (failed(scores))
        return failure();
    }
    if (qkMode == 2)
      qkOutput = *scores;
    FailureOr<Value> probabilities =
        n.create<SoftmaxOp>(*scores, {n.i64("axis", 3)});
    if (failed(probabilities))
      return failure();
    if (rowsMayEmpty) {
      // Rows whose bias drops every key are 0, decided on the bias (not on
      // the scores, which may be NaN there).
      auto biasType = cast<RankedTensorType>(bias.getType());
      FailureOr<Value> best = n.create<ReduceMaxOp>(
          bias, {n.array("dimensions", {biasType.getRank() - 1}),
                 n.unit("keepdims")});
      if (failed(best))
        return failure();
      auto bestType = cast<RankedTensorType>(best->getType());
      FailureOr<Value> kept =
          compare(n, *best, n.splat(bestType, -INFINITY), ComparePredicate::gt);
      if (failed(kept))
        return failure();
      SmallVector<Value> picked{*kept, *probabilities,
                                n.splat(scoresType, 0.0)};
      if (failed(n.broadcastAll(picked)))
        return failure();
      probabilities = n.create<SelectOp>(picked, {}, {scoresType});
      if (failed(probabilities))
        return failure();
    }
    if (qkMode == 3)
      qkOutput = *probabilities;
    if (n.wantsOutput(3)) {
      FailureOr<Value> exposed = n.cast(qkOutput, qType.getElementType());
      if (failed(exposed))
        return failure();
      n.setOutput(3, *exposed);
    }
    FailureOr<Value> result =
        n.create<MatmulOp>(ValueRange{*probabilities, *vRepeated});
    if (failed(result))
      return failure();
    out = *result;
  }
  FailureOr<Value> rounded = n.cast(out, resultElement);
  if (failed(rounded))
    return failure();
  if (rank == 4)
    return n.setResult(rounded);
  // [B, H, S, Dv] -> [B, S, H*Dv].
  FailureOr<Value> merged = transpose(n, *rounded, {0, 2, 1, 3});
  if (failed(merged))
    return failure();
  return n.setResult(
      n.reshape(*merged, {batch, queries, qHeads * v4Type.getDimSize(3)}));
}

LogicalResult importRotaryEmbedding(NodeContext &n) {
  if (n.opset < 23)
    return n.fail("RotaryEmbedding is an operator of opset 23 and later");
  if (failed(n.expectInputs(3, 4)))
    return failure();
  Value x = n.input(0);
  auto type = n.inputType(0);
  int64_t rank = type.getRank();
  // Work on [B, H, S, D]: 3-D inputs [B, S, H*D] are split into heads.
  if (rank == 3) {
    FailureOr<Value> heads =
        splitHeads(n, x, n.getInt("num_heads", 0), "the input's");
    if (failed(heads))
      return failure();
    x = *heads;
  } else if (rank != 4) {
    return n.fail("the input must have rank 3 or 4");
  }
  auto xType = cast<RankedTensorType>(x.getType());
  int64_t B = xType.getDimSize(0), H = xType.getDimSize(1),
          S = xType.getDimSize(2), D = xType.getDimSize(3);
  int64_t rotated = n.getInt("rotary_embedding_dim", 0);
  if (rotated == 0)
    rotated = D;
  if (rotated < 2 || rotated > D || rotated % 2 != 0)
    return n.fail("rotary_embedding_dim " + Twine(rotated) +
                  " is not an even number of at most the head size " +
                  Twine(D));
  int64_t half = rotated / 2;
  bool interleaved = n.getInt("interleaved", 0) != 0;

  // cos and sin as [B, S, half]: gathered at the positions, or given so.
  Value caches[2] = {n.input(1), n.input(2)};
  for (Value &cache : caches) {
    if (n.hasInput(3)) {
      FailureOr<Value> rows =
          n.create<GatherOp>(ValueRange{cache, n.input(3)}, {n.i64("axis", 0)});
      if (failed(rows))
        return failure();
      cache = *rows;
    }
    auto cacheType = cast<RankedTensorType>(cache.getType());
    if (cacheType.getRank() != 3 || cacheType.getDimSize(0) != B ||
        cacheType.getDimSize(1) != S || cacheType.getDimSize(2) != half)
      return n.fail("the cos and sin caches must give [" + Twine(B) + ", " +
                    Twine(S) + ", " + Twine(half) +
                    "] (batch, sequence, rotary_embedding_dim / 2)");
    FailureOr<Value> shaped = n.reshape(cache, {B, 1, S, half});
    if (failed(shaped))
      return failure();
    FailureOr<Value> wide = n.broadcastTo(*shaped, {B, H, S, half});
    if (failed(wide))
      return failure();
    cache = *wide;
  }
  Value cos = caches[0], sin = caches[1];

  FailureOr<Value> x1 = interleaved ? sliceDim(n, x, 3, 0, rotated, 2)
                                    : sliceDim(n, x, 3, 0, half);
  FailureOr<Value> x2 = interleaved ? sliceDim(n, x, 3, 1, rotated, 2)
                                    : sliceDim(n, x, 3, half, rotated);
  if (failed(x1) || failed(x2))
    return failure();
  auto product = [&](Value a, Value b) {
    return n.create<MulOp>(ValueRange{a, b});
  };
  FailureOr<Value> cx1 = product(cos, *x1), sx2 = product(sin, *x2),
                   sx1 = product(sin, *x1), cx2 = product(cos, *x2);
  if (failed(cx1) || failed(sx2) || failed(sx1) || failed(cx2))
    return failure();
  FailureOr<Value> real = n.create<SubOp>(ValueRange{*cx1, *sx2});
  FailureOr<Value> imag = n.create<AddOp>(ValueRange{*sx1, *cx2});
  if (failed(real) || failed(imag))
    return failure();
  Value result;
  if (interleaved) {
    FailureOr<Value> r = n.reshape(*real, {B, H, S, half, 1});
    FailureOr<Value> i = n.reshape(*imag, {B, H, S, half, 1});
    if (failed(r) || failed(i))
      return failure();
    FailureOr<Value> pairs =
        n.create<ConcatOp>(ValueRange{*r, *i}, {n.i64("axis", 4)});
    if (failed(pairs))
      return failure();
    FailureOr<Value> flat = n.reshape(*pairs, {B, H, S, rotated});
    if (failed(flat))
      return failure();
    result = *flat;
  } else {
    FailureOr<Value> joined =
        n.create<ConcatOp>(ValueRange{*real, *imag}, {n.i64("axis", 3)});
    if (failed(joined))
      return failure();
    result = *joined;
  }
  if (rotated < D) {
    FailureOr<Value> rest = sliceDim(n, x, 3, rotated, D);
    if (failed(rest))
      return failure();
    FailureOr<Value> joined =
        n.create<ConcatOp>(ValueRange{result, *rest}, {n.i64("axis", 3)});
    if (failed(joined))
      return failure();
    result = *joined;
  }
  if (rank == 4)
    return n.setResult(result);
  FailureOr<Value> merged = transpose(n, result, {0, 2, 1, 3});
  if (failed(merged))
    return failure();
  return n.setResult(n.reshape(*merged, type.getShape()));
}

} // namespace

void kiln::onnx_import::registerAttentionOps(OpImporterTable &t) {
  t["Attention"] = importAttention;
  t["RotaryEmbedding"] = importRotaryEmbedding;
}
