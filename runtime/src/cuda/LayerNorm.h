//===- LayerNorm.h - layer normalization, a warp per row --------*- C++ -*-===//
//
// The LayerNorm command's kernels (schema/bundle.proto) over the rows of a
// dense row-major [rows, cols] f32 matrix, with f32 sums throughout; what a
// product may have stored in 16 bits (the forward's input and residual,
// with a residual, the backward's grad and accumulate) is widened as read:
//
//   forward:  eight warps a block, one row a warp: its lanes stride over
//             the columns, and two warp-wide sums give the mean, then the
//             centred sum of squares (not E[x²] - mean², which cancels
//             badly when the mean is large), before each lane writes its
//             columns of the output. With a residual, the first pass adds
//             it to the input and writes the sum, which the later passes
//             read back: each lane reads only the columns it wrote.
//   backward, two kernels and no atomics (deterministic):
//     rows:    a block per 32 rows, four a warp: each warp writes its rows'
//              input gradient (plus `accumulate`, if any; also rounded to
//              16 bits into `output`, in the _bf16 and _f16 kernels) and
//              leaves their mean and 1/std in shared memory; then each
//              thread sums, for
//              its columns, grad x̂ and grad over the block's rows in order
//              into `partials` [blocks, 2, cols];
//     columns: a thread per column adds the blocks' sums up in order into
//              scale_grad and bias_grad.
//
// The kernels are written once, over a `Ctx` that supplies the thread's
// and block's indices, shared memory, the block's barrier and the warp's
// shuffle, as FlashAttention.h's are: LayerNorm.cu gives them the GPU's,
// and a test runs every thread of a block on the host. The host version
// (kiln/abi/layer_norm.h) does the same arithmetic with sequential sums.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_CUDA_LAYERNORM_H
#define KILN_RUNTIME_CUDA_LAYERNORM_H

// Its 16-bit element types, which round as the attention kernels do.
#include "FlashAttention.h"

#include <cstdint>

#if defined(__CUDACC__)
#define KILN_LN_FN __device__ __forceinline__
#else
#include <cmath>
#define KILN_LN_FN inline
#endif

namespace kiln::layer_norm {

constexpr int kWarpSize = 32;
/// Threads per block, eight warps, in every kernel.
constexpr int kThreads = 256;
constexpr int kWarps = kThreads / kWarpSize;
/// Rows of a block of the backward's partial sums
/// (KILN_LAYER_NORM_PARTIAL_ROWS), and of each of its warps.
constexpr int kBlockRows = 32;
constexpr int kRowsPerWarp = kBlockRows / kWarps;
/// The backward's rows kernel keeps each row's mean and 1/std.
constexpr int kBackwardSharedBytes = 2 * kBlockRows * 4;

/// The element types of the matrices the kernels read (kiln/abi/
/// layer_norm.h's numbering): f32, or a 16-bit type widened as it is read.
enum Element : int { kF32 = 0, kBF16 = 1, kF16 = 2 };

struct Params {
  int64_t rows = 0, cols = 0;
  float epsilon = 0;
  /// [rows, cols] of `inputType` (16-bit only in a forward with a residual,
  /// whose later passes read the f32 sum) and f32 [cols].
  const void *input = nullptr;
  const float *scale = nullptr;
  int inputType = kF32;
  /// Forward: f32 [cols], or null: none.
  const float *bias = nullptr;
  /// Forward: [rows, cols] of the kernel's output type. Backward: the
  /// input gradient rounded to the kernel's 16-bit type, [rows, cols], or
  /// unused (NoOutput).
  void *output = nullptr;
  /// Forward: the output rounded to the kernel's 16-bit copy type,
  /// [rows, cols], or unused (NoOutput).
  void *copy = nullptr;
  /// Forward, [rows, cols] of `residualType`, or both null: none. The row
  /// normalized is input + residual, written to `sum` (f32).
  const void *residual = nullptr;
  float *sum = nullptr;
  int residualType = kF32;
  /// Backward: the output's gradient [rows, cols] of `gradType`; f32: the
  /// input's gradient [rows, cols], the vectors' [cols], and
  /// [partialBlocks(rows), 2, cols] of scratch.
  const void *grad = nullptr;
  int gradType = kF32;
  /// Backward, [rows, cols] of `accumulateType` added to the input
  /// gradient, or null: none.
  const void *accumulate = nullptr;
  int accumulateType = kF32;
  float *inputGrad = nullptr, *scaleGrad = nullptr, *biasGrad = nullptr;
  float *partials = nullptr;
};

/// Blocks of the forward (a row per warp), of the backward's rows kernel
/// (and of `partials`) and of its columns kernel (a column per thread).
constexpr KILN_LN_FN int64_t forwardBlocks(int64_t rows) {
  return (rows + kWarps - 1) / kWarps;
}
constexpr KILN_LN_FN int64_t partialBlocks(int64_t rows) {
  return (rows + kBlockRows - 1) / kBlockRows;
}
constexpr KILN_LN_FN int64_t columnBlocks(int64_t cols) {
  return (cols + kThreads - 1) / kThreads;
}

/// How the forward stores an output element of each type: f32 as it is,
/// 16-bit types rounded to nearest even.
struct F32Output {
  static constexpr const char *name = "f32";
  static KILN_LN_FN void store(void *output, int64_t index, float value) {
    static_cast<float *>(output)[index] = value;
  }
};

template <typename T> struct HalfOutput {
  static constexpr const char *name = T::name;
  static KILN_LN_FN void store(void *output, int64_t index, float value) {
    static_cast<uint16_t *>(output)[index] = T::fromFloat(value);
  }
};

using BF16Output = HalfOutput<flash::BF16>;
using F16Output = HalfOutput<flash::F16>;

/// The backward without a rounded input gradient, or the forward without a
/// rounded copy: stores nothing.
struct NoOutput {
  static KILN_LN_FN void store(void *, int64_t, float) {}
};

/// Element `index` of `data`, of element type `type`, as f32 (exact).
KILN_LN_FN float load(const void *data, int type, int64_t index) {
  if (type == kBF16)
    return flash::BF16::toFloat(static_cast<const uint16_t *>(data)[index]);
  if (type == kF16)
    return flash::F16::toFloat(static_cast<const uint16_t *>(data)[index]);
  return static_cast<const float *>(data)[index];
}

KILN_LN_FN float squareRoot(float x) {
#if defined(__CUDACC__)
  return sqrtf(x);
#else
  return std::sqrt(x);
#endif
}

/// The sum of `value` over the warp's 32 lanes, in every lane. Each step
/// adds the same two numbers in both lanes of a pair, so all lanes end with
/// the same bits.
template <typename Ctx> KILN_LN_FN float warpSum(Ctx &ctx, float value) {
  for (int mask = kWarpSize / 2; mask > 0; mask /= 2)
    value += ctx.shflXor(value, mask);
  return value;
}

struct RowStats {
  float mean, rstd;
};

/// The lane's share of the sum of row `x`.
KILN_LN_FN float laneSum(const Params &p, const float *x, int lane) {
  float sum = 0;
  for (int64_t c = lane; c < p.cols; c += kWarpSize)
    sum += x[c];
  return sum;
}

/// With a residual: writes the lane's columns of input + residual's row
/// starting at element `at` to `sum`, and returns the lane's share of that
/// row's sum, as laneSum would.
KILN_LN_FN float addResidual(const Params &p, int64_t at, int lane) {
  float *sum = p.sum + at;
  float part = 0;
  for (int64_t c = lane; c < p.cols; c += kWarpSize) {
    float x = load(p.input, p.inputType, at + c) +
              load(p.residual, p.residualType, at + c);
    sum[c] = x;
    part += x;
  }
  return part;
}

/// The mean and 1 / sqrt(var + epsilon) of row `x`, whose lane's share of
/// the sum is `lanePart`, the warp's lanes together (every lane of the warp
/// must call it).
template <typename Ctx>
KILN_LN_FN RowStats rowStats(Ctx &ctx, const Params &p, const float *x,
                             float lanePart, int lane) {
  const float count = static_cast<float>(p.cols);
  const float mean = warpSum(ctx, lanePart) / count;
  float squares = 0;
  for (int64_t c = lane; c < p.cols; c += kWarpSize) {
    float centred = x[c] - mean;
    squares += centred * centred;
  }
  const float variance = warpSum(ctx, squares) / count;
  return {mean, 1.0f / squareRoot(variance + p.epsilon)};
}

/// The same, the lane summing its share of row `x` itself.
template <typename Ctx>
KILN_LN_FN RowStats rowStats(Ctx &ctx, const Params &p, const float *x,
                             int lane) {
  return rowStats(ctx, p, x, laneSum(p, x, lane), lane);
}

/// Grid forwardBlocks(rows); `Out` is F32Output, BF16Output or F16Output,
/// and `Copy` NoOutput, or with F32Output BF16Output or F16Output to write
/// the output rounded into `copy` too.
template <typename Out, typename Copy, typename Ctx>
KILN_LN_FN void forward(Ctx &ctx, const Params &p) {
  const int warp = ctx.thread / kWarpSize, lane = ctx.thread % kWarpSize;
  const int64_t row = static_cast<int64_t>(ctx.block) * kWarps + warp;
  // The whole warp leaves together (there is no block barrier), so the
  // shuffles of the warps that stay have every lane.
  if (row >= p.rows)
    return;
  const int64_t at = row * p.cols;
  // The residual's branch is the same for the whole warp. With one, the
  // later passes read the row back from `sum` (one load where recomputing
  // the add takes two): each lane its own writes, so no barrier.
  const float *x =
      p.residual ? p.sum + at : static_cast<const float *>(p.input) + at;
  const float lanePart =
      p.residual ? addResidual(p, at, lane) : laneSum(p, x, lane);
  const RowStats stats = rowStats(ctx, p, x, lanePart, lane);
  for (int64_t c = lane; c < p.cols; c += kWarpSize) {
    float y = (x[c] - stats.mean) * stats.rstd * p.scale[c];
    if (p.bias)
      y += p.bias[c];
    Out::store(p.output, at + c, y);
    Copy::store(p.copy, at + c, y);
  }
}

/// Grid partialBlocks(rows), kBackwardSharedBytes of shared memory: the
/// input gradient of the block's rows, and their partial sums. `Out` is
/// NoOutput, or BF16Output or F16Output to write the input gradient rounded
/// into `output` too.
template <typename Out, typename Ctx>
KILN_LN_FN void backwardRows(Ctx &ctx, const Params &p) {
  float *means = reinterpret_cast<float *>(ctx.shared);
  float *rstds = means + kBlockRows;
  const int warp = ctx.thread / kWarpSize, lane = ctx.thread % kWarpSize;
  const int64_t row0 = static_cast<int64_t>(ctx.block) * kBlockRows;
  // The last block may hold fewer rows.
  const int rows =
      p.rows - row0 < kBlockRows ? static_cast<int>(p.rows - row0) : kBlockRows;
  const float count = static_cast<float>(p.cols);

  for (int i = 0; i < kRowsPerWarp; ++i) {
    // Warp-uniform, and no thread returns: all of them reach the barrier.
    const int local = warp * kRowsPerWarp + i;
    if (local >= rows)
      break;
    const int64_t at = (row0 + local) * p.cols;
    const float *x = static_cast<const float *>(p.input) + at;
    const RowStats stats = rowStats(ctx, p, x, lane);
    // With gs = grad scale: a = mean(gs), b = mean(gs x̂).
    float sumGs = 0, sumGsXhat = 0;
    for (int64_t c = lane; c < p.cols; c += kWarpSize) {
      float xhat = (x[c] - stats.mean) * stats.rstd;
      float gs = load(p.grad, p.gradType, at + c) * p.scale[c];
      sumGs += gs;
      sumGsXhat += gs * xhat;
    }
    const float a = warpSum(ctx, sumGs) / count;
    const float b = warpSum(ctx, sumGsXhat) / count;
    float *dx = p.inputGrad + at;
    // Warp-uniform, as the host version: accumulate + the gradient.
    for (int64_t c = lane; c < p.cols; c += kWarpSize) {
      float xhat = (x[c] - stats.mean) * stats.rstd;
      float gs = load(p.grad, p.gradType, at + c) * p.scale[c];
      float d = stats.rstd * (gs - a - xhat * b);
      float value =
          p.accumulate ? load(p.accumulate, p.accumulateType, at + c) + d : d;
      dx[c] = value;
      Out::store(p.output, at + c, value);
    }
    if (lane == 0) {
      means[local] = stats.mean;
      rstds[local] = stats.rstd;
    }
  }
  ctx.sync();

  // A thread a column: consecutive threads read consecutive addresses of
  // each row.
  float *scaleSums = p.partials + static_cast<int64_t>(ctx.block) * 2 * p.cols;
  float *biasSums = scaleSums + p.cols;
  for (int64_t c = ctx.thread; c < p.cols; c += kThreads) {
    float scaleSum = 0, biasSum = 0;
    for (int j = 0; j < rows; ++j) {
      const int64_t at = (row0 + j) * p.cols + c;
      const float grad = load(p.grad, p.gradType, at);
      const float x = static_cast<const float *>(p.input)[at];
      scaleSum += grad * ((x - means[j]) * rstds[j]);
      biasSum += grad;
    }
    scaleSums[c] = scaleSum;
    biasSums[c] = biasSum;
  }
}

/// Grid columnBlocks(cols), after backwardRows: the blocks' partial sums
/// added up in order.
template <typename Ctx>
KILN_LN_FN void backwardColumns(Ctx &ctx, const Params &p) {
  const int64_t c = static_cast<int64_t>(ctx.block) * kThreads + ctx.thread;
  if (c >= p.cols)
    return;
  const int64_t blocks = partialBlocks(p.rows);
  float scaleSum = 0, biasSum = 0;
  for (int64_t block = 0; block < blocks; ++block) {
    const float *sums = p.partials + block * 2 * p.cols;
    scaleSum += sums[c];
    biasSum += sums[p.cols + c];
  }
  p.scaleGrad[c] = scaleSum;
  p.biasGrad[c] = biasSum;
}

} // namespace kiln::layer_norm

#endif // KILN_RUNTIME_CUDA_LAYERNORM_H
