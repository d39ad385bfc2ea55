//===- FlashAttentionHost.cpp - the attention kernels' host version -------===//
//
// kiln/abi/attention.h: what the tensor-core attention kernels compute, row by
// row, for bundles that emulate the CUDA target on the CPU. The statistics
// and delta mean what the kernels' do, so an emulated step hands them from
// the forward to the backward as the GPU's does.
//
//===----------------------------------------------------------------------===//

#include "kiln/abi/attention.h"

#include "cuda/FlashAttention.h"

#include <cmath>
#include <vector>

namespace {

using kiln::flash::kInf;
using kiln::flash::kLog2e;

struct Shape {
  int64_t element, batch, heads, queries, keys, headSize;
  int64_t maskBatch, maskHeads, maskQueries;
  bool causal;
  float scale;
  /// The key's and value's heads, a divisor of `heads`.
  int64_t keyHeads;

  /// The 16-bit value at `index` as the kernels read it.
  float read(const void *data, int64_t index) const {
    uint16_t bits = static_cast<const uint16_t *>(data)[index];
    return element == 0 ? kiln::flash::BF16::toFloat(bits)
                        : kiln::flash::F16::toFloat(bits);
  }
  /// `value` rounded to the 16-bit type, as the kernels round product
  /// operands.
  float round(float value) const {
    return element == 0
               ? kiln::flash::BF16::toFloat(kiln::flash::BF16::fromFloat(value))
               : kiln::flash::F16::toFloat(kiln::flash::F16::fromFloat(value));
  }
  int64_t row(int64_t bh, int64_t r, int64_t rows) const {
    return (bh * rows + r) * headSize;
  }
  /// Where key (or value) row j of query head bh starts: its group's head.
  int64_t keyRow(int64_t bh, int64_t j) const {
    int64_t b = bh / heads, h = bh % heads;
    return row(b * keyHeads + h / (heads / keyHeads), j, keys);
  }
  /// Score (query i, key j) of head bh in log2 units, -inf where dropped
  /// (a finite mask stays finite, as in the kernels).
  float score(const void *q, const void *k, const float *mask, int64_t bh,
              int64_t i, int64_t j) const {
    if (causal && j > i)
      return -kInf;
    float dot = 0;
    int64_t qi = row(bh, i, queries), kj = keyRow(bh, j);
    for (int64_t d = 0; d < headSize; ++d)
      dot += read(q, qi + d) * read(k, kj + d);
    return dot * scale * kLog2e + maskAt(mask, bh, i, j);
  }
  /// The mask's value (log2 units, as the kernels hold it) for query i and
  /// key j of head bh; 0 without a mask.
  float maskAt(const float *mask, int64_t bh, int64_t i, int64_t j) const {
    if (!mask)
      return 0.0f;
    int64_t b = bh / heads, h = bh % heads;
    int64_t at =
        (((maskBatch == 1 ? 0 : b) * maskHeads + (maskHeads == 1 ? 0 : h)) *
             maskQueries +
         (maskQueries == 1 ? 0 : i)) *
            keys +
        j;
    return kiln::flash::maskInLog2(mask[at]);
  }
};

} // namespace

extern "C" {

void kiln_flash_attention_forward_grouped_host(
    const void *query, const void *key, const void *value, const float *mask,
    float *out, float *stats, int64_t element, int64_t batch, int64_t heads,
    int64_t queries, int64_t keys, int64_t head_size, int64_t mask_batch,
    int64_t mask_heads, int64_t mask_queries, int64_t causal, double scale,
    int64_t key_heads) {
  Shape shape{element,
              batch,
              heads,
              queries,
              keys,
              head_size,
              mask_batch,
              mask_heads,
              mask_queries,
              causal != 0,
              static_cast<float>(scale),
              key_heads};
  std::vector<float> s(keys), o(head_size);
  for (int64_t bh = 0; bh < batch * heads; ++bh)
    for (int64_t i = 0; i < queries; ++i) {
      float max = -kInf;
      for (int64_t j = 0; j < keys; ++j)
        max = std::fmax(max, s[j] = shape.score(query, key, mask, bh, i, j));
      float shift = max == -kInf ? 0.0f : max, sum = 0;
      std::fill(o.begin(), o.end(), 0.0f);
      for (int64_t j = 0; j < keys; ++j) {
        float p = std::exp2(s[j] - shift);
        sum += p;
        float weight = shape.round(p);
        int64_t vj = shape.keyRow(bh, j);
        for (int64_t d = 0; d < head_size; ++d)
          o[d] += weight * shape.read(value, vj + d);
      }
      float *row = out + shape.row(bh, i, queries);
      for (int64_t d = 0; d < head_size; ++d)
        row[d] = o[d] / sum;
      stats[2 * (bh * queries + i)] = shift;
      stats[2 * (bh * queries + i) + 1] = sum;
    }
}

void kiln_flash_attention_backward_grouped_host(
    const void *query, const void *key, const void *value, const float *out,
    const float *grad, const float *stats, const float *mask, float *query_grad,
    float *key_grad, float *value_grad, float *delta, int64_t element,
    int64_t batch, int64_t heads, int64_t queries, int64_t keys,
    int64_t head_size, int64_t mask_batch, int64_t mask_heads,
    int64_t mask_queries, int64_t causal, double scale, int64_t masked_fill,
    int64_t causal_fill, int64_t key_heads) {
  Shape shape{element,
              batch,
              heads,
              queries,
              keys,
              head_size,
              mask_batch,
              mask_heads,
              mask_queries,
              causal != 0,
              static_cast<float>(scale),
              key_heads};
  kiln::flash::Params filling;
  filling.maskedFill = mask && masked_fill ? 1 : 0;
  filling.causalFill = causal_fill ? 1 : 0;
  int64_t keyElements = batch * key_heads * keys * head_size;
  std::fill(key_grad, key_grad + keyElements, 0.0f);
  std::fill(value_grad, value_grad + keyElements, 0.0f);
  std::vector<float> dO(head_size), dq(head_size);
  for (int64_t bh = 0; bh < batch * heads; ++bh)
    for (int64_t i = 0; i < queries; ++i) {
      int64_t qi = shape.row(bh, i, queries);
      float centre = 0;
      for (int64_t d = 0; d < head_size; ++d) {
        centre += grad[qi + d] * out[qi + d];
        dO[d] = shape.round(grad[qi + d]);
      }
      delta[bh * queries + i] = centre;
      std::fill(dq.begin(), dq.end(), 0.0f);
      float shift = stats[2 * (bh * queries + i)];
      float inverse = 1.0f / stats[2 * (bh * queries + i) + 1];
      for (int64_t j = 0; j < keys; ++j) {
        float s = shape.score(query, key, mask, bh, i, j);
        float p = s == -kInf ? 0.0f : std::exp2(s - shift) * inverse;
        int64_t kj = shape.keyRow(bh, j);
        float dp = 0;
        for (int64_t d = 0; d < head_size; ++d)
          dp += dO[d] * shape.read(value, kj + d);
        float ds = shape.round(
                  kiln::flash::scoreGrad(filling, shape.maskAt(mask, bh, i, j),
                                         i, j, p * (dp - centre))),
              pr = shape.round(p);
        for (int64_t d = 0; d < head_size; ++d) {
          dq[d] += ds * shape.read(key, kj + d);
          key_grad[kj + d] += ds * shape.read(query, qi + d) * shape.scale;
          value_grad[kj + d] += pr * dO[d];
        }
      }
      for (int64_t d = 0; d < head_size; ++d)
        query_grad[qi + d] = dq[d] * shape.scale;
    }
}

void kiln_flash_attention_forward_host(
    const void *query, const void *key, const void *value, const float *mask,
    float *out, float *stats, int64_t element, int64_t batch, int64_t heads,
    int64_t queries, int64_t keys, int64_t head_size, int64_t mask_batch,
    int64_t mask_heads, int64_t mask_queries, int64_t causal, double scale) {
  kiln_flash_attention_forward_grouped_host(
      query, key, value, mask, out, stats, element, batch, heads, queries, keys,
      head_size, mask_batch, mask_heads, mask_queries, causal, scale, heads);
}

void kiln_flash_attention_backward_host(
    const void *query, const void *key, const void *value, const float *out,
    const float *grad, const float *stats, const float *mask, float *query_grad,
    float *key_grad, float *value_grad, float *delta, int64_t element,
    int64_t batch, int64_t heads, int64_t queries, int64_t keys,
    int64_t head_size, int64_t mask_batch, int64_t mask_heads,
    int64_t mask_queries, int64_t causal, double scale, int64_t masked_fill,
    int64_t causal_fill) {
  kiln_flash_attention_backward_grouped_host(
      query, key, value, out, grad, stats, mask, query_grad, key_grad,
      value_grad, delta, element, batch, heads, queries, keys, head_size,
      mask_batch, mask_heads, mask_queries, causal, scale, masked_fill,
      causal_fill, heads);
}

} // extern "C"
