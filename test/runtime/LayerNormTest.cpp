//===- LayerNormTest.cpp - the layer-norm kernels and their host version --===//
//
// The host version of the layer-norm kernels (kiln/abi/layer_norm.h), and the
// kernels of runtime/src/cuda/LayerNorm.h themselves run on the host, each
// thread of a block a thread of its own with real barriers for
// __syncthreads and the warp's shuffles, checked against layer
// normalization in double precision from the same inputs: every output
// type, with and without a bias, with and without a residual added first
// (and the sum it writes), the backward's input gradient with and without
// one accumulated onto it, and rounded to bf16 or f16 (the f32 values
// written, rounded to the bit), its vector gradients and the partial sums'
// [blocks, 2, cols] layout, on shapes whose last block of rows is partial.
// Nothing may be written past the tensors, nor to a sum without a residual,
// nor to the output of a backward that rounds nothing.
// On a GPU, the CUDA backend's tests run the same kernels compiled by nvcc.
//
//===----------------------------------------------------------------------===//

#include "cuda/LayerNorm.h"
#include "HostBarrier.h"
#include "TestBundles.h"
#include "kiln/abi/layer_norm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

namespace {

namespace ln = kiln::layer_norm;
using kiln::flash::BF16;
using kiln::flash::F16;
using kiln::runtime::testing::Barrier;

constexpr float kEpsilon = 1e-5f;
/// Elements past each tensor that nothing may write.
constexpr int64_t kGuard = 64;
constexpr float kGuardValue = 12345.0f;
constexpr uint16_t kGuardBits = 0x7bad;

//===----------------------------------------------------------------------===//
// The kernels on host threads
//===----------------------------------------------------------------------===//

/// One block's shared state: its shared memory, its barriers, and where
/// lanes leave what a shuffle exchanges.
struct HostBlock {
  explicit HostBlock(int sharedBytes)
      : shared((sharedBytes + 7) / 8 + 1), block(ln::kThreads) {
    for (int w = 0; w < ln::kWarps; ++w)
      warps.push_back(std::make_unique<Barrier>(ln::kWarpSize));
  }
  std::vector<uint64_t> shared;
  Barrier block;
  std::vector<std::unique_ptr<Barrier>> warps;
  float floats[ln::kThreads];
};

/// A thread of a block, as the kernels' `Ctx`.
struct HostCtx {
  int thread, block;
  char *shared;
  HostBlock *host;

  void sync() { host->block.arriveAndWait(); }
  void warpSync() { host->warps[thread / ln::kWarpSize]->arriveAndWait(); }

  float shflXor(float v, int mask) {
    host->floats[thread] = v;
    warpSync();
    int lane = thread % ln::kWarpSize;
    float other = host->floats[thread - lane + (lane ^ mask)];
    warpSync();
    return other;
  }
};

template <typename Kernel>
void runGrid(int64_t blocks, int sharedBytes, Kernel kernel) {
  for (int64_t b = 0; b < blocks; ++b) {
    HostBlock block(sharedBytes);
    std::vector<std::thread> threads;
    for (int i = 0; i < ln::kThreads; ++i)
      threads.emplace_back([&, i] {
        HostCtx ctx{i, static_cast<int>(b),
                    reinterpret_cast<char *>(block.shared.data()), &block};
        kernel(ctx);
      });
    for (std::thread &thread : threads)
      thread.join();
  }
}

//===----------------------------------------------------------------------===//
// Problems and their reference
//===----------------------------------------------------------------------===//

enum class Output { F32, BF16, F16 };

/// kiln/abi/layer_norm.h's `output_element`.
int64_t outputElement(Output type) {
  return type == Output::BF16 ? 1 : type == Output::F16 ? 2 : 0;
}

struct Problem : kiln::runtime::testing::LayerNormInputs {
  using LayerNormInputs::LayerNormInputs;
  int64_t blocks() const { return ln::partialBlocks(rows); }
};

/// Layer normalization in double precision, of x or (with a residual) of
/// x + residual rounded to f32, the sum the command writes; the input
/// gradient without and with the accumulated one.
struct Reference {
  Reference(const Problem &p, bool withBias, bool withResidual = false)
      : withResidual(withResidual), sum(withResidual ? p.rows * p.cols : 0),
        y(p.rows * p.cols), dx(p.rows * p.cols), accumulatedDx(p.rows * p.cols),
        scaleGrad(p.cols, 0.0), biasGrad(p.cols, 0.0),
        partials(p.blocks() * 2 * p.cols, 0.0) {
    // Two floats' sum is exact in double here, so rounding it once is f32's
    // add.
    for (size_t i = 0; i < sum.size(); ++i)
      sum[i] = static_cast<float>(double(p.x[i]) + double(p.residual[i]));
    std::vector<double> xhat(p.cols), gs(p.cols);
    for (int64_t r = 0; r < p.rows; ++r) {
      const float *x = &(withResidual ? sum : p.x)[r * p.cols],
                  *g = &p.grad[r * p.cols];
      double mean = 0, variance = 0;
      for (int64_t c = 0; c < p.cols; ++c)
        mean += x[c];
      mean /= p.cols;
      for (int64_t c = 0; c < p.cols; ++c)
        variance += (x[c] - mean) * (x[c] - mean);
      variance /= p.cols;
      double rstd = 1 / std::sqrt(variance + kEpsilon);
      double a = 0, b = 0;
      for (int64_t c = 0; c < p.cols; ++c) {
        xhat[c] = (x[c] - mean) * rstd;
        gs[c] = double(g[c]) * p.scale[c];
        a += gs[c];
        b += gs[c] * xhat[c];
        y[r * p.cols + c] = xhat[c] * p.scale[c] + (withBias ? p.bias[c] : 0);
      }
      a /= p.cols;
      b /= p.cols;
      double *blockSums = &partials[r / 32 * 2 * p.cols];
      for (int64_t c = 0; c < p.cols; ++c) {
        dx[r * p.cols + c] = rstd * (gs[c] - a - xhat[c] * b);
        accumulatedDx[r * p.cols + c] =
            p.accumulate[r * p.cols + c] + dx[r * p.cols + c];
        scaleGrad[c] += g[c] * xhat[c];
        biasGrad[c] += g[c];
        blockSums[c] += g[c] * xhat[c];
        blockSums[p.cols + c] += g[c];
      }
    }
  }
  bool withResidual;
  std::vector<float> sum;
  std::vector<double> y, dx, accumulatedDx, scaleGrad, biasGrad, partials;
};

/// What one implementation wrote, each tensor followed by kGuard elements
/// that must keep their guard value.
struct Result {
  Result(const Problem &p, Output type)
      : type(type), count(p.rows * p.cols),
        output(count * (type == Output::F32 ? 4 : 2) + kGuard * 4),
        sum(count + kGuard, kGuardValue), dx(count + kGuard, kGuardValue),
        scaleGrad(p.cols + kGuard, kGuardValue),
        biasGrad(p.cols + kGuard, kGuardValue),
        partials(p.blocks() * 2 * p.cols + kGuard, kGuardValue) {
    if (type == Output::F32)
      std::fill_n(reinterpret_cast<float *>(output.data()), count + kGuard,
                  kGuardValue);
    else
      std::fill_n(reinterpret_cast<uint16_t *>(output.data()),
                  count + 2 * kGuard, kGuardBits);
  }

  /// Output element `i` as a float.
  float y(int64_t i) const {
    if (type == Output::F32)
      return reinterpret_cast<const float *>(output.data())[i];
    uint16_t bits = reinterpret_cast<const uint16_t *>(output.data())[i];
    return type == Output::BF16 ? BF16::toFloat(bits) : F16::toFloat(bits);
  }

  /// Whether the output's guard elements are untouched.
  bool outputGuardKept() const {
    if (type == Output::F32) {
      const float *y = reinterpret_cast<const float *>(output.data());
      return std::all_of(y + count, y + count + kGuard,
                         [](float v) { return v == kGuardValue; });
    }
    const uint16_t *y = reinterpret_cast<const uint16_t *>(output.data());
    return std::all_of(y + count, y + count + 2 * kGuard,
                       [](uint16_t v) { return v == kGuardBits; });
  }

  Output type;
  int64_t count;
  std::vector<uint8_t> output;
  std::vector<float> sum, dx, scaleGrad, biasGrad, partials;
  /// The forward's 16-bit copy of an f32 output, of `copyType` (F32: none,
  /// left as guard bits).
  Output copyType = Output::F32;
  std::vector<uint16_t> copy =
      std::vector<uint16_t>(count + 2 * kGuard, kGuardBits);
};

/// 2^-8 relative (bf16 keeps 8 significant bits, and rounds to the
/// nearest), 2^-11 for f16; f32 results differ from the reference by f32
/// rounding only.
double roundingOf(Output type) {
  return type == Output::BF16  ? std::ldexp(1.0, -8)
         : type == Output::F16 ? std::ldexp(1.0, -11)
                               : 0.0;
}

/// Each of the first want.size() values of `got` within `relative` of its
/// reference plus 1e-5 of the largest reference magnitude; the kGuard after
/// them untouched.
template <typename At>
void expectClose(At got, const std::vector<double> &want, double relative,
                 const char *what) {
  double largest = 0;
  for (double w : want)
    largest = std::max(largest, std::abs(w));
  int failures = 0;
  for (size_t i = 0; i < want.size() && failures < 5; ++i) {
    double g = got(i), bound = relative * std::abs(want[i]) + 1e-5 * largest;
    if (!(std::abs(g - want[i]) <= bound)) {
      ADD_FAILURE() << what << " element " << i << ": " << g << ", expected "
                    << want[i] << " within " << bound;
      ++failures;
    }
  }
}

void expectClose(const std::vector<float> &got, const std::vector<double> &want,
                 const char *what) {
  expectClose([&](size_t i) { return double(got[i]); }, want, 0.0, what);
  EXPECT_TRUE(std::all_of(got.begin() + want.size(), got.end(),
                          [](float v) { return v == kGuardValue; }))
      << what << " was written past its end";
}

/// The output; with a residual, the sum, f32's add to the bit; without,
/// nothing written to the sum.
void expectForward(const Result &got, const Reference &want) {
  expectClose([&](size_t i) { return double(got.y(i)); }, want.y,
              roundingOf(got.type), "output");
  EXPECT_TRUE(got.outputGuardKept()) << "the output was written past its end";
  int failures = 0;
  for (size_t i = 0; i < want.sum.size() && failures < 5; ++i)
    if (got.sum[i] != want.sum[i]) {
      ADD_FAILURE() << "sum element " << i << ": " << got.sum[i]
                    << ", expected " << want.sum[i];
      ++failures;
    }
  EXPECT_TRUE(std::all_of(got.sum.begin() + want.sum.size(), got.sum.end(),
                          [](float v) { return v == kGuardValue; }))
      << (want.withResidual ? "the sum was written past its end"
                            : "the sum was written without a residual");
}

/// The forward's copy: each f32 output element rounded to nearest even to
/// the copy's type, to the bit, and nothing past its end; without one,
/// nothing written.
void expectCopy(const Result &got) {
  int failures = 0;
  for (int64_t i = 0; i < got.count && failures < 5; ++i) {
    uint16_t want = got.copyType == Output::BF16  ? BF16::fromFloat(got.y(i))
                    : got.copyType == Output::F16 ? F16::fromFloat(got.y(i))
                                                  : kGuardBits;
    if (got.copy[i] != want) {
      ADD_FAILURE() << "copy element " << i << ": 0x" << std::hex << got.copy[i]
                    << ", expected 0x" << want << std::dec;
      ++failures;
    }
  }
  EXPECT_TRUE(std::all_of(got.copy.begin() + got.count, got.copy.end(),
                          [](uint16_t v) { return v == kGuardBits; }))
      << "the copy was written past its end";
}

/// The backward's output: of a bf16 or f16 Result, each f32 input gradient
/// written rounded to nearest even, to the bit; of an f32 one, untouched.
void expectRoundedInputGrad(const Result &got) {
  if (got.type == Output::F32) {
    const float *y = reinterpret_cast<const float *>(got.output.data());
    EXPECT_TRUE(std::all_of(y, y + got.count + kGuard, [](float v) {
      return v == kGuardValue;
    })) << "the output was written without a rounded input gradient";
    return;
  }
  const uint16_t *bits = reinterpret_cast<const uint16_t *>(got.output.data());
  int failures = 0;
  for (int64_t i = 0; i < got.count && failures < 5; ++i) {
    uint16_t want = got.type == Output::BF16 ? BF16::fromFloat(got.dx[i])
                                             : F16::fromFloat(got.dx[i]);
    if (bits[i] != want) {
      ADD_FAILURE() << "rounded input_grad element " << i << ": 0x" << std::hex
                    << bits[i] << ", expected 0x" << want << std::dec << " for "
                    << got.dx[i];
      ++failures;
    }
  }
  EXPECT_TRUE(got.outputGuardKept())
      << "the rounded input gradient was written past its end";
}

/// The gradients, the input's with the accumulated one added or not, and
/// the output as expectRoundedInputGrad checks it.
void expectBackward(const Result &got, const Reference &want,
                    bool accumulated = false) {
  expectClose(got.dx, accumulated ? want.accumulatedDx : want.dx, "input_grad");
  expectClose(got.scaleGrad, want.scaleGrad, "scale_grad");
  expectClose(got.biasGrad, want.biasGrad, "bias_grad");
  expectClose(got.partials, want.partials, "partials");
  expectRoundedInputGrad(got);
}

//===----------------------------------------------------------------------===//
// The two implementations
//===----------------------------------------------------------------------===//

/// The forward; `copy` BF16 or F16 (with an F32 `type`) also writes the
/// output rounded to it into the Result's copy, F32 writes none. Without a
/// copy it calls the entry point without one.
Result runHostForward(const Problem &p, Output type, bool withBias,
                      bool withResidual = false, Output copy = Output::F32) {
  Result r(p, type);
  r.copyType = copy;
  const float *residual = withResidual ? p.residual.data() : nullptr;
  const float *bias = withBias ? p.bias.data() : nullptr;
  float *sum = withResidual ? r.sum.data() : nullptr;
  if (copy == Output::F32)
    kiln_layer_norm_forward_host(p.x.data(), residual, p.scale.data(), bias,
                                 r.output.data(), sum, outputElement(type),
                                 p.rows, p.cols, kEpsilon);
  else
    kiln_layer_norm_forward_copy_host(
        p.x.data(), residual, p.scale.data(), bias, r.output.data(), sum,
        outputElement(type), r.copy.data(), outputElement(copy), p.rows, p.cols,
        kEpsilon);
  return r;
}

/// The backward; `rounded` BF16 or F16 also writes the input gradient
/// rounded to it into the Result's output, F32 rounds nothing.
Result runHostBackward(const Problem &p, bool withAccumulate = false,
                       Output rounded = Output::F32) {
  Result r(p, rounded);
  kiln_layer_norm_backward_host(
      p.x.data(), p.scale.data(), p.grad.data(),
      withAccumulate ? p.accumulate.data() : nullptr, r.dx.data(),
      r.scaleGrad.data(), r.biasGrad.data(), r.partials.data(),
      rounded == Output::F32 ? nullptr : r.output.data(),
      outputElement(rounded), p.rows, p.cols, kEpsilon);
  return r;
}

ln::Params kernelParams(const Problem &p, Result &r) {
  ln::Params params;
  params.rows = p.rows;
  params.cols = p.cols;
  params.epsilon = kEpsilon;
  params.input = p.x.data();
  params.scale = p.scale.data();
  params.output = r.output.data();
  params.grad = p.grad.data();
  params.inputGrad = r.dx.data();
  params.scaleGrad = r.scaleGrad.data();
  params.biasGrad = r.biasGrad.data();
  params.partials = r.partials.data();
  return params;
}

/// The forward, `copy` as runHostForward's: F32 runs a NoOutput copy (with
/// `copy` still pointing at the Result's, which it must not write).
Result runKernelForward(const Problem &p, Output type, bool withBias,
                        bool withResidual = false, Output copy = Output::F32) {
  Result r(p, type);
  r.copyType = copy;
  ln::Params params = kernelParams(p, r);
  params.bias = withBias ? p.bias.data() : nullptr;
  params.copy = r.copy.data();
  if (withResidual) {
    params.residual = p.residual.data();
    params.sum = r.sum.data();
  }
  runGrid(ln::forwardBlocks(p.rows), 0, [&](HostCtx &ctx) {
    if (copy == Output::BF16)
      ln::forward<ln::F32Output, ln::BF16Output>(ctx, params);
    else if (copy == Output::F16)
      ln::forward<ln::F32Output, ln::F16Output>(ctx, params);
    else if (type == Output::F32)
      ln::forward<ln::F32Output, ln::NoOutput>(ctx, params);
    else if (type == Output::BF16)
      ln::forward<ln::BF16Output, ln::NoOutput>(ctx, params);
    else
      ln::forward<ln::F16Output, ln::NoOutput>(ctx, params);
  });
  return r;
}

/// The backward, `rounded` as runHostBackward's: F32 runs the NoOutput
/// kernel (with `output` still pointing at the Result's, which it must not
/// write).
Result runKernelBackward(const Problem &p, bool withAccumulate = false,
                         Output rounded = Output::F32) {
  Result r(p, rounded);
  ln::Params params = kernelParams(p, r);
  params.accumulate = withAccumulate ? p.accumulate.data() : nullptr;
  runGrid(ln::partialBlocks(p.rows), ln::kBackwardSharedBytes,
          [&](HostCtx &ctx) {
            switch (rounded) {
            case Output::F32:
              ln::backwardRows<ln::NoOutput>(ctx, params);
              break;
            case Output::BF16:
              ln::backwardRows<ln::BF16Output>(ctx, params);
              break;
            case Output::F16:
              ln::backwardRows<ln::F16Output>(ctx, params);
              break;
            }
          });
  runGrid(ln::columnBlocks(p.cols), 0,
          [&](HostCtx &ctx) { ln::backwardColumns(ctx, params); });
  return r;
}

//===----------------------------------------------------------------------===//
// Tests
//===----------------------------------------------------------------------===//

struct ForwardCase {
  Output type;
  bool withBias, withResidual;
  const char *name;
  /// F32: no copy.
  Output copy = Output::F32;
};
const ForwardCase kForwardCases[] = {
    {Output::F32, true, false, "f32 with a bias"},
    {Output::F32, false, false, "f32 without"},
    {Output::BF16, true, false, "bf16 with a bias"},
    {Output::BF16, false, false, "bf16 without"},
    {Output::F16, true, false, "f16 with a bias"},
    {Output::F32, true, true, "f32 with a bias and a residual"},
    {Output::BF16, false, true, "bf16 with a residual"},
    {Output::F16, true, true, "f16 with a bias and a residual"},
    {Output::F32, true, true, "f32 with a bias, a residual and a bf16 copy",
     Output::BF16},
    {Output::F32, false, false, "f32 and an f16 copy", Output::F16}};

struct BackwardCase {
  bool withAccumulate;
  /// F32: no rounded input gradient.
  Output rounded;
  const char *name;
};
const BackwardCase kBackwardCases[] = {
    {false, Output::F32, "backward"},
    {true, Output::F32, "backward with an accumulated input gradient"},
    {false, Output::BF16, "backward rounding its input gradient to bf16"},
    {false, Output::F16, "backward rounding its input gradient to f16"},
    {true, Output::BF16, "backward accumulating, rounding to bf16"},
    {true, Output::F16, "backward accumulating, rounding to f16"}};

/// Every forward and backward case of `p`, run by `forward` and
/// `backward` (the host version's or the kernels'), against the reference.
void expectEveryCase(const Problem &p,
                     Result (*forward)(const Problem &, Output, bool, bool,
                                       Output),
                     Result (*backward)(const Problem &, bool, Output)) {
  for (const ForwardCase &c : kForwardCases) {
    SCOPED_TRACE(c.name);
    Result got = forward(p, c.type, c.withBias, c.withResidual, c.copy);
    expectForward(got, Reference(p, c.withBias, c.withResidual));
    expectCopy(got);
  }
  for (const BackwardCase &c : kBackwardCases) {
    SCOPED_TRACE(c.name);
    expectBackward(backward(p, c.withAccumulate, c.rounded),
                   Reference(p, false), c.withAccumulate);
  }
}

/// 70 rows: the last of the backward's 32-row blocks holds 6, the last of
/// the forward's 8-row blocks 6; 37 columns: lanes 5 and up take one
/// column fewer.
TEST(LayerNormHost, MatchesDoublePrecisionOnAPartialLastBlock) {
  expectEveryCase(Problem(70, 37), runHostForward, runHostBackward);
}

/// One row alone, one column alone: the variance is 0 and x̂ is 0, so y is
/// the bias and the input gradient 0 (the accumulated one, exactly).
TEST(LayerNormHost, OneColumnNormalizesToTheBias) {
  Problem p(3, 1);
  expectForward(runHostForward(p, Output::F32, true), Reference(p, true));
  expectForward(runHostForward(p, Output::F32, true, true),
                Reference(p, true, true));
  Result back = runHostBackward(p),
         accumulated = runHostBackward(p, true, Output::BF16);
  expectBackward(back, Reference(p, false));
  expectBackward(accumulated, Reference(p, false), true);
  for (int64_t r = 0; r < 3; ++r) {
    EXPECT_EQ(back.dx[r], 0.0f) << r;
    EXPECT_EQ(accumulated.dx[r], p.accumulate[r]) << r;
  }
}

TEST(LayerNormKernels, MatchDoublePrecisionOnAPartialLastBlock) {
  expectEveryCase(Problem(70, 37), runKernelForward, runKernelBackward);
}

/// One column: lane 0 alone adds the residual and reads the sum back, the
/// other 31 lanes sum nothing.
TEST(LayerNormKernels, OneColumnNormalizesToTheBias) {
  Problem p(3, 1);
  expectForward(runKernelForward(p, Output::F32, true, true),
                Reference(p, true, true));
  Result accumulated = runKernelBackward(p, true, Output::F16);
  expectBackward(accumulated, Reference(p, false), true);
  for (int64_t r = 0; r < 3; ++r)
    EXPECT_EQ(accumulated.dx[r], p.accumulate[r]) << r;
}

/// More columns than a block has threads (the backward's second column
/// blocks, and threads that sum two columns), and a last block of one row.
TEST(LayerNormKernels, MatchDoublePrecisionWithManyColumns) {
  Problem p(33, 300);
  expectForward(runKernelForward(p, Output::BF16, true), Reference(p, true));
  expectForward(runKernelForward(p, Output::F32, false), Reference(p, false));
  expectForward(runKernelForward(p, Output::BF16, true, true),
                Reference(p, true, true));
  expectBackward(runKernelBackward(p), Reference(p, false));
  expectBackward(runKernelBackward(p, true), Reference(p, false), true);
  expectBackward(runKernelBackward(p, true, Output::BF16), Reference(p, false),
                 true);
}

/// The kernels and the host version add the partial sums in the same
/// order, from the same x̂ up to the rows' statistics' rounding, so the
/// emulated and the GPU's training steps agree closely; the residual's sum
/// is the same f32 add on both.
TEST(LayerNormKernels, AgreeWithTheHostVersion) {
  Problem p(70, 37);
  auto relativeTo = [](const std::vector<float> &v) {
    std::vector<double> wide(v.size() - kGuard);
    std::copy(v.begin(), v.end() - kGuard, wide.begin());
    return wide;
  };
  for (bool withAccumulate : {false, true}) {
    SCOPED_TRACE(withAccumulate ? "with an accumulated input gradient"
                                : "without");
    Result kernels = runKernelBackward(p, withAccumulate),
           host = runHostBackward(p, withAccumulate);
    expectClose(kernels.partials, relativeTo(host.partials), "partials");
    expectClose(kernels.scaleGrad, relativeTo(host.scaleGrad), "scale_grad");
    expectClose(kernels.biasGrad, relativeTo(host.biasGrad), "bias_grad");
    expectClose(kernels.dx, relativeTo(host.dx), "input_grad");
    // Sums of grad alone are the same sums in the same order: equal bits.
    EXPECT_EQ(kernels.biasGrad, host.biasGrad);
  }
  Result kernels = runKernelForward(p, Output::F32, true, true),
         host = runHostForward(p, Output::F32, true, true);
  EXPECT_EQ(kernels.sum, host.sum);
}

/// A product may store what the kernels read in 16 bits (kiln-amp): the
/// forward's input and residual (with a residual), the backward's grad and
/// accumulate. Widening is exact, so reading the 16-bit values gives the
/// bits that reading them widened to f32 gives, in the host version and in
/// the kernels.
TEST(LayerNormKernels, ReadSixteenBitInputsAsTheirWidenedValues) {
  Problem wide(70, 37);
  // The 16-bit values, and the f32 problem that holds them widened: x and
  // the grad in bf16, the residual and accumulate in f16.
  auto narrow = [](std::vector<float> &values, bool bf16) {
    std::vector<uint16_t> bits(values.size());
    for (size_t i = 0; i < values.size(); ++i) {
      bits[i] = bf16 ? BF16::fromFloat(values[i]) : F16::fromFloat(values[i]);
      values[i] = bf16 ? BF16::toFloat(bits[i]) : F16::toFloat(bits[i]);
    }
    return bits;
  };
  std::vector<uint16_t> x = narrow(wide.x, true);
  std::vector<uint16_t> residual = narrow(wide.residual, false);
  std::vector<uint16_t> grad = narrow(wide.grad, true);
  std::vector<uint16_t> accumulate = narrow(wide.accumulate, false);

  // The host version.
  Result f32 = runHostForward(wide, Output::BF16, true, true);
  Result typed(wide, Output::BF16);
  kiln_layer_norm_forward_typed_host(
      x.data(), 1, residual.data(), 2, wide.scale.data(), wide.bias.data(),
      typed.output.data(), typed.sum.data(), 1, nullptr, 0, wide.rows,
      wide.cols, kEpsilon);
  EXPECT_EQ(typed.sum, f32.sum);
  EXPECT_EQ(typed.output, f32.output);
  Result f32Back = runHostBackward(wide, true);
  Result typedBack(wide, Output::F32);
  kiln_layer_norm_backward_typed_host(
      wide.x.data(), wide.scale.data(), grad.data(), 1, accumulate.data(), 2,
      typedBack.dx.data(), typedBack.scaleGrad.data(),
      typedBack.biasGrad.data(), typedBack.partials.data(), nullptr, 0,
      wide.rows, wide.cols, kEpsilon);
  EXPECT_EQ(typedBack.dx, f32Back.dx);
  EXPECT_EQ(typedBack.scaleGrad, f32Back.scaleGrad);
  EXPECT_EQ(typedBack.biasGrad, f32Back.biasGrad);

  // The kernels.
  Result kernelF32 = runKernelForward(wide, Output::BF16, true, true);
  Result kernelTyped(wide, Output::BF16);
  ln::Params params = kernelParams(wide, kernelTyped);
  params.bias = wide.bias.data();
  params.input = x.data();
  params.inputType = ln::kBF16;
  params.residual = residual.data();
  params.residualType = ln::kF16;
  params.sum = kernelTyped.sum.data();
  runGrid(ln::forwardBlocks(wide.rows), 0, [&](HostCtx &ctx) {
    ln::forward<ln::BF16Output, ln::NoOutput>(ctx, params);
  });
  EXPECT_EQ(kernelTyped.sum, kernelF32.sum);
  EXPECT_EQ(kernelTyped.output, kernelF32.output);
  Result kernelF32Back = runKernelBackward(wide, true);
  Result kernelTypedBack(wide, Output::F32);
  params = kernelParams(wide, kernelTypedBack);
  params.grad = grad.data();
  params.gradType = ln::kBF16;
  params.accumulate = accumulate.data();
  params.accumulateType = ln::kF16;
  runGrid(ln::partialBlocks(wide.rows), ln::kBackwardSharedBytes,
          [&](HostCtx &ctx) { ln::backwardRows<ln::NoOutput>(ctx, params); });
  runGrid(ln::columnBlocks(wide.cols), 0,
          [&](HostCtx &ctx) { ln::backwardColumns(ctx, params); });
  EXPECT_EQ(kernelTypedBack.dx, kernelF32Back.dx);
  EXPECT_EQ(kernelTypedBack.scaleGrad, kernelF32Back.scaleGrad);
  EXPECT_EQ(kernelTypedBack.biasGrad, kernelF32Back.biasGrad);
}

} // namespace
