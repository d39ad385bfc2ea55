//===- AttentionOps.cpp - ONNX Attention and RotaryEmbedding (opset 23) ---===//
//
// Attention becomes one kiln.attention, the op kiln-fuse-attention forms
// from the written-out chain (so it has the same gradient and reaches the
// same kernels on the CUDA target): 3-D inputs are split into heads,
// grouped-query key and value heads are repeated to the query's, a boolean
// mask becomes the additive one (-inf where it drops) and is_causal a
// constant -inf above the diagonal, which the CUDA target recognises as
// causal. RotaryEmbedding becomes the slices, products and concatenations
// a model writes out for RoPE. What the operator defines only for
// inference (the key/value cache, nonpad_kv_seqlen, sliding windows) or
// that Kiln does not compute (softcap, the qk_matmul_output output) is
// refused with the reason.
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
  return n.create<SliceOp>(x, {n.array("start", starts),
                               n.array("limit", limits),
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

LogicalResult importAttention(NodeContext &n) {
  if (n.opset < 23)
    return n.fail("Attention is an operator of opset 23 and later");
  if (failed(n.expectInputs(3, n.opset >= 24 ? 7 : 6)))
    return failure();
  if (n.hasInput(4) || n.hasInput(5) || n.wantsOutput(1) || n.wantsOutput(2))
    return n.fail("the key/value cache (past_key, past_value, present_key, "
                  "present_value) is not supported yet: it serves inference");
  if (n.hasInput(6))
    return n.fail("nonpad_kv_seqlen is not supported yet");
  if (n.wantsOutput(3))
    return n.fail("the qk_matmul_output output is not supported yet");
  if (n.getFloat("softcap", 0.0) != 0.0)
    return n.fail("softcap is not supported yet");
  if (n.getInt("left_window_size", -1) != -1 ||
      n.getInt("right_window_size", -1) != -1)
    return n.fail("sliding-window attention (left_window_size, "
                  "right_window_size) is not supported yet");
  // softmax_precision only widens the softmax of 16-bit inputs; Kiln's
  // softmax of those computes in f32 already (kiln-amp), and f32 inputs
  // are what the attention op takes.
  // 16-bit inputs compute in f32 (kiln.attention's type) and the result is
  // rounded back; the CUDA target's --amp decides what its kernels read.
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
  FailureOr<Value> vRepeated =
      succeeded(kRepeated) ? repeatHeads(n, v, qHeads / kvHeads)
                           : FailureOr<Value>(failure());
  if (failed(vRepeated))
    return failure();

  // The mask, as kiln.attention's masked_fill reads it: 0 where a key is
  // kept, the lowest float where it is dropped (the boolean mask's false,
  // a float mask's -inf), anything else added to the score. Shorter than
  // the keys, it is padded with drops; is_causal adds -inf above the
  // diagonal (query i attends key j iff j <= i: there is no cache to
  // offset it). Without a mask that is a constant the CUDA target takes
  // as causal.
  auto f32 = n.b.getF32Type();
  const double lowest = -std::numeric_limits<float>::max();
  Value mask;
  bool finite = false;
  if (n.hasInput(3)) {
    mask = n.input(3);
    auto type = n.inputType(3);
    if (type.getRank() < 1)
      return n.fail("attn_mask must have rank 1 or more");
    if (type.getElementType().isInteger(1)) {
      FailureOr<Value> additive = n.create<SelectOp>(
          ValueRange{mask, n.splat(type.clone(f32), 0.0),
                     n.splat(type.clone(f32), lowest)},
          {}, {type.clone(f32)});
      if (failed(additive))
        return failure();
      mask = *additive;
      finite = true;
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
                 n.f64("value", lowest)});
      if (failed(padded))
        return failure();
      mask = *padded;
    }
  }
  if (n.getInt("is_causal", 0)) {
    auto causalType = RankedTensorType::get({queries, keys}, f32);
    SmallVector<float> values(queries * keys, 0.0f);
    for (int64_t i = 0; i < queries; ++i)
      for (int64_t j = i + 1; j < keys; ++j)
        values[i * keys + j] = -INFINITY;
    Value causal = n.constant(
        DenseElementsAttr::get(causalType, ArrayRef<float>(values)));
    if (mask) {
      SmallVector<Value> terms{mask, causal};
      if (failed(n.broadcastAll(terms)))
        return failure();
      FailureOr<Value> sum = n.create<AddOp>(terms);
      if (failed(sum))
        return failure();
      mask = *sum;
    } else {
      mask = causal;
    }
  }
  // A given mask may drop every key of a row: such a row is 0, as the
  // operator (and PyTorch's scaled_dot_product_attention) define it, where
  // a softmax of -inf alone would be NaN. So drops are the lowest float
  // (finite: the row's softmax is uniform, and masked_fill gives its
  // scores no gradient), and rows whose every score is dropped are zeroed.
  Value keptRows;
  if (n.hasInput(3)) {
    auto type = cast<RankedTensorType>(mask.getType());
    if (!finite) {
      FailureOr<Value> bounded =
          n.create<MaxOp>(ValueRange{mask, n.splat(type, lowest)});
      if (failed(bounded))
        return failure();
      mask = *bounded;
    }
    FailureOr<Value> best = n.create<ReduceMaxOp>(
        mask, {n.array("dimensions", {type.getRank() - 1}), n.unit("keepdims")});
    if (failed(best))
      return failure();
    auto bestType = cast<RankedTensorType>(best->getType());
    FailureOr<Value> kept = n.create<CompareOp>(
        ValueRange{*best, n.splat(bestType, kMaskedFillAtMost)},
        {n.named("predicate", ComparePredicateAttr::get(n.ctx,
                                                         ComparePredicate::gt))});
    if (failed(kept))
      return failure();
    keptRows = *kept;
  }

  double scale = 1.0 / std::sqrt(static_cast<double>(headSize));
  if (n.attr("scale"))
    scale = n.getFloat("scale", scale);
  SmallVector<Value> operands{q, *kRepeated, *vRepeated};
  if (mask)
    operands.push_back(mask);
  SmallVector<NamedAttribute> attrs{n.f64("scale", scale)};
  if (keptRows)
    attrs.push_back(n.unit("masked_fill"));
  FailureOr<Value> out = n.create<AttentionOp>(operands, attrs);
  if (failed(out))
    return failure();
  if (keptRows) {
    // [..., Sq, 1] -> [B, H, Sq, Dv].
    auto outType = cast<RankedTensorType>(out->getType());
    SmallVector<Value> picked{keptRows, *out, n.splat(outType, 0.0)};
    if (failed(n.broadcastAll(picked)))
      return failure();
    out = n.create<SelectOp>(picked, {}, {outType});
    if (failed(out))
      return failure();
  }
  out = n.cast(*out, resultElement);
  if (failed(out))
    return failure();
  if (rank == 4)
    return n.setResult(out);
  // [B, H, S, Dv] -> [B, S, H*Dv].
  FailureOr<Value> merged = transpose(n, *out, {0, 2, 1, 3});
  if (failed(merged))
    return failure();
  return n.setResult(n.reshape(
      *merged, {batch, queries, qHeads * v4Type.getDimSize(3)}));
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
      FailureOr<Value> rows = n.create<GatherOp>(ValueRange{cache, n.input(3)},
                                                 {n.i64("axis", 0)});
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
