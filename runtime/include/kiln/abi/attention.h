/*===- kiln/abi/attention.h - the host CUDA attention kernels ------*- C -*-===*
 *
 * CPU bundles compiled with `kilnc --emulate-cuda` stand for the CUDA
 * target on the host: where the CUDA target runs its tensor-core attention
 * kernels (kiln.flash_attention and its gradient), the emulated step calls
 * these instead, with the same buffers. libkilnrt exports them; the step's
 * CPU shared object refers to them by name.
 *
 * Query, key and value are [B, H, S, D] of 16-bit floats (`element` 0:
 * bf16, 1: f16); everything else is f32: the output and the gradients
 * [B, H, S, D], the statistics [B, H, Sq, 2], delta [B, H, Sq], the
 * optional additive mask [mask_batch, mask_heads, mask_queries, Sk], each of
 * its first three dimensions 1 (broadcast) or the scores'. `stats` holds,
 * per query row, the softmax's shift (its largest score, in base 2 units:
 * scores times log2 e) and its denominator (the sum of 2^(score - shift));
 * `delta` rowsum(grad * out). A finite mask value below the lowest float in
 * base 2 units is the lowest float there, so that a row it drops whole has
 * uniform probabilities, as the softmax gives it (-inf gives NaN).
 * With `masked_fill` (nonzero), the backward gives no gradient to the scores
 * a mask value at most -2^100 fills (kiln.attention's masked_fill); with
 * `causal_fill`, to those after each query's position (causal_fill).
 * Products accumulate in f32, and the probabilities and their gradients are
 * rounded to the 16-bit type where the kernels round them, so results agree
 * with the GPU's within that rounding.
 *
 * The `_grouped` entry points take key and value (and their gradients)
 * with `key_heads` heads, a divisor of `heads`, as cuDNN's fused attention
 * takes grouped-query attention: key head h / (heads / key_heads) serves
 * query head h, and the backward sums its gradients over the query heads
 * it serves.
 *
 *===----------------------------------------------------------------------===*/

#ifndef KILN_ATTENTION_H
#define KILN_ATTENTION_H

#include <stdint.h>

#if defined(KILN_RUNTIME_BUILDING_LIBRARY)
#define KILN_ATTENTION_API __attribute__((visibility("default")))
#else
#define KILN_ATTENTION_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

KILN_ATTENTION_API void kiln_flash_attention_forward_host(
    const void *query, const void *key, const void *value, const float *mask,
    float *out, float *stats, int64_t element, int64_t batch, int64_t heads,
    int64_t queries, int64_t keys, int64_t head_size, int64_t mask_batch,
    int64_t mask_heads, int64_t mask_queries, int64_t causal, double scale);

KILN_ATTENTION_API void kiln_flash_attention_backward_host(
    const void *query, const void *key, const void *value, const float *out,
    const float *grad, const float *stats, const float *mask, float *query_grad,
    float *key_grad, float *value_grad, float *delta, int64_t element,
    int64_t batch, int64_t heads, int64_t queries, int64_t keys,
    int64_t head_size, int64_t mask_batch, int64_t mask_heads,
    int64_t mask_queries, int64_t causal, double scale, int64_t masked_fill,
    int64_t causal_fill);

KILN_ATTENTION_API void kiln_flash_attention_forward_grouped_host(
    const void *query, const void *key, const void *value, const float *mask,
    float *out, float *stats, int64_t element, int64_t batch, int64_t heads,
    int64_t queries, int64_t keys, int64_t head_size, int64_t mask_batch,
    int64_t mask_heads, int64_t mask_queries, int64_t causal, double scale,
    int64_t key_heads);

KILN_ATTENTION_API void kiln_flash_attention_backward_grouped_host(
    const void *query, const void *key, const void *value, const float *out,
    const float *grad, const float *stats, const float *mask, float *query_grad,
    float *key_grad, float *value_grad, float *delta, int64_t element,
    int64_t batch, int64_t heads, int64_t queries, int64_t keys,
    int64_t head_size, int64_t mask_batch, int64_t mask_heads,
    int64_t mask_queries, int64_t causal, double scale, int64_t masked_fill,
    int64_t causal_fill, int64_t key_heads);

#ifdef __cplusplus
}
#endif

#endif /* KILN_ATTENTION_H */
