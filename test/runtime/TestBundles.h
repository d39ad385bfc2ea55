//===- TestBundles.h - bundles the runtime tests run ------------*- C++ -*-===//
//
// Bundles around the kernels of kernels.c, built with the BundleWriter. The
// GoogleTest suites, the kiln-run test and the fuzzer's seed corpus use them.
//
// The "multi" bundle has four entry points:
//   add_one(x: f32[4]) -> (y: f32[4])              y = x + 1
//   affine(x: f32[2,2]) -> (y: f32[2,2])           y = x * w + b, through the
//                                                   arena
//   mixed(n: i64[3], flag: bool[3]) -> (out: f64[3])
//                                                   out = flag ? 2n : -n
//   accumulate(x: f32[4]) -> (y: f32[4])           acc += x; y = acc
// and three parameters: w = [1, 2, 3, 4], b = [0.5, 0.5, -1, 2] (f32[2,2])
// and acc = [10, 20, 30, 40] (f32[4]). The "single" bundle has only add_one.
//
// The "train" bundles hold a toy training step over batches of 3 samples:
//   train_step(x: f32[3]) -> (loss: f32[], lr: f32[], grad_norm: f32[])
//       step += 1; lr = 0.5 / step; grad_norm = acc + sum(x);
//       w += acc + sum(x); acc = 0; loss = sum(x)
// with the parameters w (f32[], 0) and the optimizer state optimizer.step
// (f32[], 0) and acc (f32[], 0). Variants: TrainWithLr (as above),
// TrainLossOnly (train_step returns only the loss, as bundles from before lr
// outputs did), and TrainAccumulating (also accumulate_step(x: f32[3]) ->
// (loss: f32[]), acc += sum(x); loss = sum(x), and the metadata
// training.grad_accum = "3").
//
// The CUDA bundles run the kernels of kernels.ptx. The "hybrid" bundle is
// the single bundle plus a CUDA target "cuda" whose add_one program launches
// the PTX add_one. The "cuda" bundle has only a CUDA target and six entry
// points (row-major matrices):
//   affine(x: f32[2,4]) -> (y: f32[2,3])   y = x w + bias: a gemm into the
//                                           arena, then add_bias
//   accumulate(x: f32[4]) -> (y: f32[4])   acc += x; y = acc
//   batched(a: f32[2,5,3], b: f32[2,4,5]) -> (c: f32[2,3,4])
//       g[i] = 0.5 a[i]^T b[i]^T + g[i] for both i (a gemm with transposes,
//       batch strides and beta 1 into the parameter g), then c = g (copy24)
//   add_one(x: f32[4]) -> (y: f32[4])      y = x + 1
//   padded(a: f32[2,6]) -> (c: f32[2,4])   c[:, :3] = a[:, :4] w: a gemm
//                                           with lda 6 and ldc 4
//   fault(x: f32[4]) -> (y: f32[4])        add_one, then the kernel fault
//                                           (a trap), then add_one again
// with the parameters w (f32[4,3], kCudaW), bias (f32[3], kCudaBias), acc
// (f32[4], kWeightAcc) and g (f32[2,3,4], 0.25 each).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TEST_RUNTIME_TESTBUNDLES_H
#define KILN_TEST_RUNTIME_TESTBUNDLES_H

#include "kiln/runtime/BundleWriter.h"

#include <string>
#include <vector>

namespace kiln::runtime::testing {

inline constexpr float kWeightW[4] = {1, 2, 3, 4};
inline constexpr float kWeightB[4] = {0.5f, 0.5f, -1, 2};
inline constexpr float kWeightAcc[4] = {10, 20, 30, 40};

/// Fills `writer` with the multi-entry bundle; `code` is the CPU code.
void buildMultiBundle(BundleWriter &writer, std::string code);

/// The multi bundle with parameters the file stores no value of: w is
/// EXTERNAL (set by the caller), acc ZEROS; b keeps its stored value.
void buildUnstoredBundle(BundleWriter &writer, std::string code);

/// Fills `writer` with the add_one-only bundle.
void buildSingleBundle(BundleWriter &writer, std::string code);

enum class ToyTraining { TrainWithLr, TrainLossOnly, TrainAccumulating };

/// Fills `writer` with a "train" bundle of the given kind.
void buildTrainBundle(BundleWriter &writer, std::string code, ToyTraining kind);

/// Fills `writer` with a "train-dp" bundle: a data-parallel toy step over
/// batches of `batch` (2 or 4) samples, with the metadata
/// training.data_parallel = "1":
///   train_step(x: f32[batch]) -> (loss: f32[], lr: f32[], grad_norm: f32[])
///       g = all-reduce-mean([mean(x), mean(x^2)]); loss = all-reduce-mean(
///       mean(x)); w += g; step += 1; lr = 0.5 / step; grad_norm = g[1]
/// with the parameter w (f32[2], 0) and optimizer.step (f32[], 0).
void buildDataParallelTrainBundle(BundleWriter &writer, std::string code,
                                  int batch);

inline constexpr float kCudaW[12] = {1,  -2, 0.5f, 3,     0,  1,
                                     -1, 2,  4,    0.25f, -3, 1};
inline constexpr float kCudaBias[3] = {0.5f, -1, 2};
inline constexpr float kCudaG = 0.25f;

/// Fills `writer` with the hybrid bundle: the single bundle's CPU code and
/// the CUDA target with `ptx` (kernels.ptx) as its compute_80 image.
void buildHybridBundle(BundleWriter &writer, std::string code, std::string ptx);

/// Fills `writer` with the CUDA-only bundle; `images` hold kernels.ptx or
/// cubins assembled from it.
void buildCudaBundle(BundleWriter &writer,
                     std::vector<BundleWriter::Image> images);

/// Fills `writer` with the "cuda-all-reduce" bundle, a CUDA-only
/// data-parallel toy over the parameter acc (f32[4], kWeightAcc):
///   mean_step(x: f32[4]) -> (y: f32[4], total: f32[4])
///     t = all-reduce-mean(x + 1) (arena, request 1); acc += x; total = acc
///     (while request 1 is in flight); acc = all-reduce-mean(acc) (request
///     2); wait 1; y = t + 1; wait 2
/// On one rank the means change nothing: y = x + 2, acc and total grow by
/// x each run.
void buildCudaAllReduceBundle(BundleWriter &writer,
                              std::vector<BundleWriter::Image> images);

/// The attention bundle's sizes: batch, heads, sequence (queries = keys,
/// not a multiple of the kernels' 64-row tiles) and head size.
inline constexpr int64_t kAttentionBatch = 2, kAttentionHeads = 2,
                         kAttentionSeq = 80, kAttentionHeadSize = 64;

/// Fills `writer` with the "cuda-attention" bundle, a CUDA-only bundle of
/// the runtime's attention kernels on dense [B, H, S, D] tensors (q, k, v
/// bf16, everything else f32; scale 1/8):
///   attention(q, k, v, mask [B, 1, 1, S]) -> (out, stats)
///   attention_grad(q, k, v, out, grad, stats, mask) -> (dq, dk, dv, delta)
///   causal(q, k, v) -> (out, stats)
void buildCudaAttentionBundle(BundleWriter &writer,
                              std::vector<BundleWriter::Image> images);

/// The layer-norm bundle's sizes: rows not a multiple of the backward's
/// 32-row blocks (nor of the forward's 8), and more columns than a block
/// has threads.
inline constexpr int64_t kLayerNormRows = 70, kLayerNormCols = 300;
inline constexpr float kLayerNormEpsilon = 1e-5f;

/// Fills `writer` with the "cuda-layer-norm" bundle, a CUDA-only bundle of
/// the runtime's layer-norm kernels on x [rows, cols], everything f32 but
/// the 16-bit outputs:
///   layer_norm(x, scale, bias) -> (y: bf16)
///   layer_norm_f32(x, scale) -> (y: f32)        no bias
///   layer_norm_grad(x, scale, grad) -> (dx, dscale, dbias,
///                                       partials [3, 2, cols])
///   layer_norm_f16(x, scale, bias) -> (y: f16)
///   layer_norm_residual(x, scale, bias, residual) -> (y: bf16, sum)
///                                       y of sum = x + residual
///   layer_norm_grad_accumulate(x, scale, grad, accumulate)
///       -> (dx, dscale, dbias, partials)   dx = accumulate + the gradient
///   layer_norm_grad_accumulate_bf16(x, scale, grad, accumulate)
///       -> (dx, dscale, dbias, partials, dx_rounded: bf16)
///                                       dx rounded to bf16 as well
///   layer_norm_grad_f16(x, scale, grad)
///       -> (dx, dscale, dbias, partials, dx_rounded: f16)
void buildCudaLayerNormBundle(BundleWriter &writer,
                              std::vector<BundleWriter::Image> images);

/// Inputs for the layer-norm tests of a [rows, cols] problem: rows of
/// different spreads around a mean of 3, so that the centring matters; the
/// residual moves the mean to about 2 and changes the spreads.
struct LayerNormInputs {
  LayerNormInputs(int64_t rows, int64_t cols);
  int64_t rows, cols;
  /// [rows, cols].
  std::vector<float> x, residual, grad, accumulate;
  /// [cols].
  std::vector<float> scale, bias;
};

/// The bias-gradient bundle's sizes: a linear layer of kBiasGradIn inputs
/// and kBiasGradOut outputs over kBiasGradRows rows.
inline constexpr int64_t kBiasGradRows = 136, kBiasGradIn = 64,
                         kBiasGradOut = 96;

/// Fills `writer` with the "cuda-bias-grad" bundle, a CUDA-only bundle of
/// two bf16 weight-gradient products (f32 C) with the bias-gradient
/// epilogue, dy [rows, out] and x [rows, in] bf16:
///   weight_out_in(dy, x) -> (dw [out, in] = dy^T x, db [out]: sums of A)
///   weight_in_out(x, dy) -> (dw [in, out] = x^T dy, db [out]: sums of B)
void buildCudaBiasGradBundle(BundleWriter &writer,
                             std::vector<BundleWriter::Image> images);

/// Bytes that stand in for CPU code where nothing loads it.
std::string standInCode();

/// A PTX image of text that stands in for kernels where nothing loads them
/// (the bundle reader checks only where images lie).
std::vector<BundleWriter::Image> standInPtxImages();

/// Reads the whole file at `path`.
Status readFile(const std::string &path, std::string &out);

/// Compiles the C file `source` into the shared object `output` with the C
/// compiler `cc`.
Status compileSharedObject(const std::string &cc, const std::string &source,
                           const std::string &output);

} // namespace kiln::runtime::testing

#endif // KILN_TEST_RUNTIME_TESTBUNDLES_H
