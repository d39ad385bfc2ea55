//===- LayerNormHost.cpp - the layer-norm kernels' host version -----------===//
//
// kiln/abi/layer_norm.h: what the layer-norm kernels compute, one row at a time
// with f32 sums, for bundles that emulate the CUDA target on the CPU. The
// row statistics are summed in column order where the kernels' warps sum in
// a tree, so the two agree within f32 rounding; the backward's partial sums
// go through the same [blocks, 2, cols] scratch, added in the same order.
// The residual's sum and the accumulated input gradient are single f32
// adds, as in the kernels, and the rounded input gradient rounds the f32
// value written with the same helpers.
//
//===----------------------------------------------------------------------===//

#include "kiln/abi/layer_norm.h"

#include "cuda/LayerNorm.h"

#include <algorithm>
#include <cmath>

namespace {

namespace ln = kiln::layer_norm;

static_assert(ln::kBlockRows == KILN_LAYER_NORM_PARTIAL_ROWS,
              "the kernels' and the header's partial-sum blocks differ");

struct RowStats {
  float mean, rstd;
};

/// The mean and 1 / sqrt(var + epsilon) of `x`'s `cols` values.
RowStats rowStats(const float *x, int64_t cols, float epsilon) {
  const float count = static_cast<float>(cols);
  float sum = 0;
  for (int64_t c = 0; c < cols; ++c)
    sum += x[c];
  const float mean = sum / count;
  float squares = 0;
  for (int64_t c = 0; c < cols; ++c) {
    float centred = x[c] - mean;
    squares += centred * centred;
  }
  return {mean, 1.0f / std::sqrt(squares / count + epsilon)};
}

/// Stores `value` rounded to `element` (1: bf16, 2: f16) as element
/// `index` of `output`.
void storeRounded(void *output, int64_t element, int64_t index, float value) {
  if (element == 2)
    ln::F16Output::store(output, index, value);
  else
    ln::BF16Output::store(output, index, value);
}

/// Writes row `row` of the output of `Out` (ln::F32Output, BF16Output or
/// F16Output), and that rounded to `copy_element` into `copy` unless null;
/// with a residual, normalizes input + residual, which it writes to `sum`
/// first.
template <typename Out>
void forwardRow(const void *input, int64_t input_element, const void *residual,
                int64_t residual_element, const float *scale, const float *bias,
                void *output, float *sum, void *copy, int64_t copy_element,
                int64_t row, int64_t cols, float epsilon) {
  const int64_t at = row * cols;
  const float *x = static_cast<const float *>(input) + at;
  if (residual) {
    for (int64_t c = 0; c < cols; ++c)
      sum[at + c] =
          ln::load(input, static_cast<int>(input_element), at + c) +
          ln::load(residual, static_cast<int>(residual_element), at + c);
    x = sum + at;
  }
  const RowStats stats = rowStats(x, cols, epsilon);
  for (int64_t c = 0; c < cols; ++c) {
    float y = (x[c] - stats.mean) * stats.rstd * scale[c];
    if (bias)
      y += bias[c];
    Out::store(output, at + c, y);
    if (copy)
      storeRounded(copy, copy_element, at + c, y);
  }
}

} // namespace

extern "C" {

void kiln_layer_norm_forward_host(const float *input, const float *residual,
                                  const float *scale, const float *bias,
                                  void *output, float *sum,
                                  int64_t output_element, int64_t rows,
                                  int64_t cols, double epsilon) {
  kiln_layer_norm_forward_typed_host(input, 0, residual, 0, scale, bias, output,
                                     sum, output_element, nullptr, 0, rows,
                                     cols, epsilon);
}

void kiln_layer_norm_forward_copy_host(const float *input,
                                       const float *residual,
                                       const float *scale, const float *bias,
                                       void *output, float *sum,
                                       int64_t output_element, void *copy,
                                       int64_t copy_element, int64_t rows,
                                       int64_t cols, double epsilon) {
  kiln_layer_norm_forward_typed_host(input, 0, residual, 0, scale, bias, output,
                                     sum, output_element, copy, copy_element,
                                     rows, cols, epsilon);
}

void kiln_layer_norm_forward_typed_host(
    const void *input, int64_t input_element, const void *residual,
    int64_t residual_element, const float *scale, const float *bias,
    void *output, float *sum, int64_t output_element, void *copy,
    int64_t copy_element, int64_t rows, int64_t cols, double epsilon) {
  const float eps = static_cast<float>(epsilon);
  for (int64_t row = 0; row < rows; ++row) {
    switch (output_element) {
    case 1:
      forwardRow<ln::BF16Output>(input, input_element, residual,
                                 residual_element, scale, bias, output, sum,
                                 copy, copy_element, row, cols, eps);
      break;
    case 2:
      forwardRow<ln::F16Output>(input, input_element, residual,
                                residual_element, scale, bias, output, sum,
                                copy, copy_element, row, cols, eps);
      break;
    default:
      forwardRow<ln::F32Output>(input, input_element, residual,
                                residual_element, scale, bias, output, sum,
                                copy, copy_element, row, cols, eps);
      break;
    }
  }
}

void kiln_layer_norm_backward_host(const float *input, const float *scale,
                                   const float *grad, const float *accumulate,
                                   float *input_grad, float *scale_grad,
                                   float *bias_grad, float *partials,
                                   void *rounded_input_grad,
                                   int64_t rounded_element, int64_t rows,
                                   int64_t cols, double epsilon) {
  kiln_layer_norm_backward_typed_host(
      input, scale, grad, 0, accumulate, 0, input_grad, scale_grad, bias_grad,
      partials, rounded_input_grad, rounded_element, rows, cols, epsilon);
}

void kiln_layer_norm_backward_typed_host(
    const float *input, const float *scale, const void *grad,
    int64_t grad_element, const void *accumulate, int64_t accumulate_element,
    float *input_grad, float *scale_grad, float *bias_grad, float *partials,
    void *rounded_input_grad, int64_t rounded_element, int64_t rows,
    int64_t cols, double epsilon) {
  const int gradType = static_cast<int>(grad_element);
  const int accumulateType = static_cast<int>(accumulate_element);
  const float eps = static_cast<float>(epsilon);
  const float count = static_cast<float>(cols);
  const int64_t blocks = ln::partialBlocks(rows);
  std::fill(partials, partials + blocks * 2 * cols, 0.0f);
  for (int64_t row = 0; row < rows; ++row) {
    const float *x = input + row * cols;
    auto g = [&](int64_t c) {
      return ln::load(grad, gradType, row * cols + c);
    };
    const RowStats stats = rowStats(x, cols, eps);
    // With gs = grad scale: a = mean(gs), b = mean(gs x̂).
    float sumGs = 0, sumGsXhat = 0;
    for (int64_t c = 0; c < cols; ++c) {
      float xhat = (x[c] - stats.mean) * stats.rstd;
      float gs = g(c) * scale[c];
      sumGs += gs;
      sumGsXhat += gs * xhat;
    }
    const float a = sumGs / count, b = sumGsXhat / count;
    // Rows add to their block's sums in order, as the kernel's threads do.
    float *scaleSums = partials + row / ln::kBlockRows * 2 * cols;
    float *biasSums = scaleSums + cols;
    for (int64_t c = 0; c < cols; ++c) {
      float xhat = (x[c] - stats.mean) * stats.rstd;
      const float gc = g(c);
      float gs = gc * scale[c];
      float dx = stats.rstd * (gs - a - xhat * b);
      const int64_t at = row * cols + c;
      const float value =
          accumulate ? ln::load(accumulate, accumulateType, at) + dx : dx;
      input_grad[at] = value;
      if (rounded_input_grad)
        storeRounded(rounded_input_grad, rounded_element, at, value);
      scaleSums[c] += gc * xhat;
      biasSums[c] += gc;
    }
  }
  for (int64_t c = 0; c < cols; ++c) {
    float scaleSum = 0, biasSum = 0;
    for (int64_t block = 0; block < blocks; ++block) {
      scaleSum += partials[block * 2 * cols + c];
      biasSum += partials[block * 2 * cols + cols + c];
    }
    scale_grad[c] = scaleSum;
    bias_grad[c] = biasSum;
  }
}

} // extern "C"
