/*===- kiln/abi/layer_norm.h - the host CUDA layer-norm kernels ----*- C -*-===*
 *
 * CPU bundles compiled with `kilnc --emulate-cuda` stand for the CUDA
 * target on the host: where the CUDA target runs its layer-norm kernels
 * (kiln.fused_layer_norm and its gradient), the emulated step calls these
 * instead, with the same buffers. libkilnrt exports them; the step's CPU
 * shared object refers to them by name.
 *
 * Each row of the dense [rows, cols] f32 `input` is normalized as the
 * LayerNorm command of the bundle format describes (schema/bundle.proto):
 * the forward writes `output` of `output_element` (0: f32, 1: bf16, 2: f16,
 * rounded to nearest even) with `bias` optional (null: none), and with
 * `residual` (null: none) normalizes input + residual, which it writes to
 * `sum` (null exactly when `residual` is); the _copy_ forward also writes
 * the output rounded to `copy_element` (1: bf16, 2: f16) into `copy`,
 * unless null (after an f32 output); the backward writes
 * `input_grad` (plus `accumulate`, unless null), that rounded to
 * `rounded_element` (1: bf16, 2: f16) into `rounded_input_grad` unless
 * null, and `scale_grad` and `bias_grad` through `partials`
 * ([ceil(rows / 32), 2, cols]: each block of 32 rows' sums of grad x̂ and
 * grad, added up block by block in order), summing in the order the
 * kernels do, so results agree with the GPU's within f32 rounding.
 *
 *===----------------------------------------------------------------------===*/

#ifndef KILN_LAYER_NORM_H
#define KILN_LAYER_NORM_H

#include <stdint.h>

#if defined(KILN_RUNTIME_BUILDING_LIBRARY)
#define KILN_LAYER_NORM_API __attribute__((visibility("default")))
#else
#define KILN_LAYER_NORM_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Rows per block of the backward's partial sums. */
#define KILN_LAYER_NORM_PARTIAL_ROWS 32

KILN_LAYER_NORM_API void
kiln_layer_norm_forward_host(const float *input, const float *residual,
                             const float *scale, const float *bias,
                             void *output, float *sum, int64_t output_element,
                             int64_t rows, int64_t cols, double epsilon);

KILN_LAYER_NORM_API void kiln_layer_norm_forward_copy_host(
    const float *input, const float *residual, const float *scale,
    const float *bias, void *output, float *sum, int64_t output_element,
    void *copy, int64_t copy_element, int64_t rows, int64_t cols,
    double epsilon);

KILN_LAYER_NORM_API void kiln_layer_norm_backward_host(
    const float *input, const float *scale, const float *grad,
    const float *accumulate, float *input_grad, float *scale_grad,
    float *bias_grad, float *partials, void *rounded_input_grad,
    int64_t rounded_element, int64_t rows, int64_t cols, double epsilon);

/* The same with the element types of what a product may have stored in 16
 * bits (0: f32, 1: bf16, 2: f16, widened exactly as read): the forward's
 * input and residual (a 16-bit input only with a residual), the backward's
 * grad and accumulate. The functions above are these with f32 throughout. */
KILN_LAYER_NORM_API void kiln_layer_norm_forward_typed_host(
    const void *input, int64_t input_element, const void *residual,
    int64_t residual_element, const float *scale, const float *bias,
    void *output, float *sum, int64_t output_element, void *copy,
    int64_t copy_element, int64_t rows, int64_t cols, double epsilon);

KILN_LAYER_NORM_API void kiln_layer_norm_backward_typed_host(
    const float *input, const float *scale, const void *grad,
    int64_t grad_element, const void *accumulate, int64_t accumulate_element,
    float *input_grad, float *scale_grad, float *bias_grad, float *partials,
    void *rounded_input_grad, int64_t rounded_element, int64_t rows,
    int64_t cols, double epsilon);

#ifdef __cplusplus
}
#endif

#endif /* KILN_LAYER_NORM_H */
