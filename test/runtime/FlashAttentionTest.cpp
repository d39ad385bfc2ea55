//===- FlashAttentionTest.cpp - the tensor-core attention kernels, on the host
////
//
// The kernels of runtime/src/cuda/FlashAttention.h, run on the host: each
// thread of a block is a thread of its own, with real barriers for
// __syncthreads and for the warp-wide exchanges (shuffles, ldmatrix and
// mma.sync, whose operands every lane contributes to and whose fragment
// layouts are the PTX ISA's). The results are checked against attention
// computed in double precision from the same 16-bit inputs. On a GPU, the CUDA
// backend's tests run the same kernels compiled by nvcc.
//
//===----------------------------------------------------------------------===//

#include "cuda/FlashAttention.h"
#include "HostBarrier.h"
#include "kiln/abi/attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <thread>
#include <type_traits>
#include <vector>

namespace {

using namespace kiln::flash;
using kiln::runtime::testing::Barrier;

/// One block's shared state: its shared memory, its barriers, and where
/// lanes leave what a warp-wide operation exchanges.
struct HostBlock {
  explicit HostBlock(int sharedBytes)
      : shared((sharedBytes + 7) / 8), block(kThreads) {
    for (int w = 0; w < kWarps; ++w)
      warps.push_back(std::make_unique<Barrier>(32));
  }
  std::vector<uint64_t> shared;
  Barrier block;
  std::vector<std::unique_ptr<Barrier>> warps;
  float floats[kThreads];
  uint32_t a[kThreads][4], b[kThreads][2];
  const uint16_t *rows[kThreads];
};

/// A thread of a block, as the kernels' `Ctx`.
struct HostCtx {
  int thread, blockX, blockY;
  char *shared;
  HostBlock *host;
  /// cp.async as the PTX ISA defines it: a thread's copies land when it
  /// waits for their group, not before (so that a tile read before its
  /// wait reads what was there), each group once committed.
  struct Copy {
    void *to;
    const void *from;
  };
  std::vector<std::vector<Copy>> groups{{}};

  void copyAsync16(void *to, const void *from) {
    const char *begin = reinterpret_cast<const char *>(host->shared.data());
    const char *at = static_cast<const char *>(to);
    if (reinterpret_cast<uintptr_t>(to) % 16 != 0 ||
        reinterpret_cast<uintptr_t>(from) % 16 != 0 || at < begin ||
        at + 16 > begin + host->shared.size() * sizeof(uint64_t))
      ADD_FAILURE() << "thread " << thread
                    << " copies 16 bytes not 16-byte aligned or outside "
                       "shared memory";
    groups.back().push_back({to, from});
  }
  void commitCopies() { groups.emplace_back(); }
  template <int N> void waitCopies() {
    // groups.back() is still open: the committed ones precede it.
    while (groups.size() - 1 > N) {
      for (const Copy &copy : groups.front())
        std::memcpy(copy.to, copy.from, 16);
      groups.erase(groups.begin());
    }
  }
  ~HostCtx() {
    if (groups.size() != 1 || !groups.back().empty())
      ADD_FAILURE() << "thread " << thread
                    << " ends with copies it never waited for";
  }

  void sync() { host->block.arriveAndWait(); }
  void warpSync() { host->warps[thread / 32]->arriveAndWait(); }
  int laneBase() const { return thread & ~31; }

  float shflXor(float v, int mask) {
    host->floats[thread] = v;
    warpSync();
    float other = host->floats[laneBase() | ((thread & 31) ^ mask)];
    warpSync();
    return other;
  }

  /// d += A B for the warp's 16 x 16 A and 16 x 8 B, from every lane's
  /// registers in mma.m16n8k16's layout.
  template <typename T>
  void mma(float d[4], const uint32_t a[4], const uint32_t b[2]) {
    std::copy(a, a + 4, host->a[thread]);
    std::copy(b, b + 2, host->b[thread]);
    warpSync();
    auto half = [](uint32_t word, int k) {
      return T::toFloat(static_cast<uint16_t>(k % 2 ? word >> 16 : word));
    };
    auto aAt = [&](int row, int k) {
      int lane = laneBase() + (row % 8) * 4 + (k % 8) / 2;
      return half(host->a[lane][(row >= 8) + 2 * (k >= 8)], k);
    };
    auto bAt = [&](int k, int n) {
      int lane = laneBase() + n * 4 + (k % 8) / 2;
      return half(host->b[lane][k >= 8], k);
    };
    int g = (thread & 31) / 4, t = thread % 4;
    float out[4];
    for (int i = 0; i < 4; ++i) {
      int row = g + 8 * (i / 2), column = 2 * t + i % 2;
      float sum = d[i];
      for (int k = 0; k < 16; ++k)
        sum += aAt(row, k) * bAt(k, column);
      out[i] = sum;
    }
    warpSync();
    std::copy(out, out + 4, d);
  }

  /// ldmatrix.sync.aligned.m8n8.x4(.trans).shared.b16, as the PTX ISA
  /// defines it: lane l names row l % 8 of matrix l / 8 (8 elements,
  /// 16-byte aligned, in shared memory) and gets in r[i] two elements of
  /// matrix i: (l / 4, 2 (l % 4)) and the next column, or transposed
  /// (2 (l % 4), l / 4) and the next row; the first in the low half.
  void loadMatrices(uint32_t r[4], const uint16_t *row) {
    exchangeRows(r, row, false);
  }
  void loadMatricesTransposed(uint32_t r[4], const uint16_t *row) {
    exchangeRows(r, row, true);
  }
  void exchangeRows(uint32_t r[4], const uint16_t *row, bool transposed) {
    const char *begin = reinterpret_cast<const char *>(host->shared.data());
    const char *at = reinterpret_cast<const char *>(row);
    if (reinterpret_cast<uintptr_t>(row) % 16 != 0 || at < begin ||
        at + 16 > begin + host->shared.size() * sizeof(uint64_t))
      ADD_FAILURE() << "lane " << thread % 32 << " of warp " << thread / 32
                    << " names a row outside shared memory or not 16-byte "
                       "aligned";
    host->rows[thread] = row;
    warpSync();
    int g = (thread & 31) / 4, t = thread % 4;
    for (int i = 0; i < 4; ++i) {
      const uint16_t *const *rows = host->rows + laneBase() + 8 * i;
      r[i] = transposed ? pack(rows[2 * t][g], rows[2 * t + 1][g])
                        : pack(rows[g][2 * t], rows[g][2 * t + 1]);
    }
    warpSync();
  }
};

template <typename Kernel>
void runGrid(int gridX, int gridY, int sharedBytes, Kernel kernel) {
  for (int y = 0; y < gridY; ++y)
    for (int x = 0; x < gridX; ++x) {
      HostBlock block(sharedBytes);
      std::vector<std::thread> threads;
      for (int i = 0; i < kThreads; ++i)
        threads.emplace_back([&, i] {
          HostCtx ctx{i, x, y, reinterpret_cast<char *>(block.shared.data()),
                      &block};
          kernel(ctx);
        });
      for (std::thread &thread : threads)
        thread.join();
    }
}

struct Case {
  int batch, heads, queries, keys;
  bool causal = false;
  /// Keys from this one on are dropped by an additive -inf mask in odd
  /// batches (0: no mask).
  int maskFrom = 0;
  /// Q, K and V interleaved as a fused projection's [B, S, 3, H, D]
  /// output rather than three dense [B, H, S, D] tensors.
  bool fused = false;
  /// A causal mask held as a [1, 1, Sq, Sk] tensor of 0 and -inf (as a
  /// model's buffer would be) rather than the kernels' causal flag.
  bool maskedCausal = false;
  /// Q, K, V and dO start one element past a 16-byte boundary, so the
  /// kernels load them an element at a time.
  bool misaligned = false;
  /// A [1, 1, Sq, Sk] mask of 0 and the lowest float (Hugging Face's fill,
  /// below the lowest float in log2 units): query rows 3i + 1 drop every
  /// key (the softmax makes them uniform), rows 3i + 2 those after key i.
  bool lowestRows = false;
  /// The backward is maskedFill: the scores the lowest float fills get no
  /// gradient.
  bool maskedFill = false;
  /// A [B, 1, Sq, Sk] mask as Hugging Face's GPT-2 writes with a padding
  /// mask: the lowest float after each query's position, plus the lowest
  /// float on the first `leftPadding` keys of odd batches (-inf where
  /// both); the backward is causalFill.
  int leftPadding = 0;
  /// A [1, 1, Sq, Sk] additive mask of finite values: -1.25 on keys
  /// biasFrom..biasFrom + 9 of every query, 0 elsewhere (0: none). Tiles
  /// it adds 0 to take the unmasked path; the others add it.
  int biasFrom = 0;
};

/// The value a biasFrom case's mask adds to key `j`'s scores.
float biasAt(const Case &c, int j) {
  return j >= c.biasFrom && j < c.biasFrom + 10 ? -1.25f : 0.0f;
}

/// Whether query `i` of a lowestRows case drops key `j`.
bool lowestDrops(int i, int j) {
  return i % 3 == 1 || (i % 3 == 2 && j > i / 3);
}

/// Attention in double precision over the inputs as the kernels read them;
/// per row the largest score in log2 units and the softmax's denominator.
struct Reference {
  std::vector<double> o, max2, sum, dq, dk, dv;
};

template <typename T, int D> class Problem {
public:
  explicit Problem(const Case &c) : c(c) {
    std::mt19937 rng(1234 + c.queries * 7 + D);
    std::normal_distribution<float> normal(0, 1);
    int64_t bh = int64_t(c.batch) * c.heads;
    auto fill16 = [&](std::vector<uint16_t> &v, size_t n) {
      v.resize(n);
      for (uint16_t &x : v)
        x = T::fromFloat(normal(rng));
    };
    if (c.fused) {
      if (c.queries != c.keys)
        std::abort();
      fill16(qkv, size_t(c.batch) * c.queries * 3 * c.heads * D);
      int64_t row = 3 * c.heads * D, batch = row * c.queries;
      p.q = {qkv.data(), batch, D, row};
      p.k = {qkv.data() + c.heads * D, batch, D, row};
      p.v = {qkv.data() + 2 * c.heads * D, batch, D, row};
    } else {
      int skip = c.misaligned ? 1 : 0;
      fill16(q, bh * c.queries * D + skip);
      fill16(k, bh * c.keys * D + skip);
      fill16(v, bh * c.keys * D + skip);
      p.q = dense(q.data() + skip, c.queries);
      p.k = dense(k.data() + skip, c.keys);
      p.v = dense(v.data() + skip, c.keys);
    }
    // Misaligned, dO starts one float past a 16-byte boundary too.
    int doutSkip = c.misaligned ? 1 : 0;
    dout.resize(bh * c.queries * D + doutSkip);
    for (float &x : dout)
      x = normal(rng);
    o.assign(dout.size(), NAN);
    dq.assign(bh * c.queries * D, NAN);
    dk.assign(bh * c.keys * D, NAN);
    dv.assign(bh * c.keys * D, NAN);
    stats.assign(2 * bh * c.queries, NAN);
    delta.assign(bh * c.queries, NAN);
    p.batch = c.batch;
    p.heads = c.heads;
    p.queries = c.queries;
    p.keys = c.keys;
    p.scale = 1.0f / std::sqrt(float(D));
    p.causal = c.causal;
    p.maskedFill = c.maskedFill;
    p.causalFill = c.leftPadding ? 1 : 0;
    p.o = dense(o.data(), c.queries);
    p.dout = dense(dout.data() + doutSkip, c.queries);
    p.dq = dense(dq.data(), c.queries);
    p.dk = dense(dk.data(), c.keys);
    p.dv = dense(dv.data(), c.keys);
    if (c.maskedCausal) {
      mask.assign(size_t(c.queries) * c.keys, 0.0f);
      for (int i = 0; i < c.queries; ++i)
        for (int j = i + 1; j < c.keys; ++j)
          mask[i * c.keys + j] = -INFINITY;
      p.mask = {mask.data(), 0, 0, c.keys};
    }
    if (c.lowestRows) {
      mask.assign(size_t(c.queries) * c.keys, 0.0f);
      for (int i = 0; i < c.queries; ++i)
        for (int j = 0; j < c.keys; ++j)
          if (lowestDrops(i, j))
            mask[i * c.keys + j] = std::numeric_limits<float>::lowest();
      p.mask = {mask.data(), 0, 0, c.keys};
    }
    if (c.leftPadding) {
      const float lowest = std::numeric_limits<float>::lowest();
      mask.assign(size_t(c.batch) * c.queries * c.keys, 0.0f);
      for (int b = 0; b < c.batch; ++b)
        for (int i = 0; i < c.queries; ++i)
          for (int j = 0; j < c.keys; ++j) {
            float fill = j > i ? lowest : 0.0f;
            float pad = b % 2 && j < c.leftPadding ? lowest : 0.0f;
            mask[(size_t(b) * c.queries + i) * c.keys + j] = fill + pad;
          }
      p.mask = {mask.data(), int64_t(c.queries) * c.keys, 0, c.keys};
    }
    if (c.biasFrom) {
      mask.assign(size_t(c.queries) * c.keys, 0.0f);
      for (int i = 0; i < c.queries; ++i)
        for (int j = 0; j < c.keys; ++j)
          mask[i * c.keys + j] = biasAt(c, j);
      p.mask = {mask.data(), 0, 0, c.keys};
    }
    if (c.maskFrom) {
      // [B, 1, 1, Sk]: the same for every head.
      mask.assign(size_t(c.batch) * c.keys, 0.0f);
      for (int b = 1; b < c.batch; b += 2)
        for (int j = c.maskFrom; j < c.keys; ++j)
          mask[b * c.keys + j] = -INFINITY;
      p.mask = {mask.data(), c.keys, 0, 0};
    }
    p.stats = stats.data();
    p.delta = delta.data();
  }

  void runForward() {
    runGrid((c.queries + 63) / 64, c.batch * c.heads, forwardSharedBytes(D),
            [&](HostCtx &ctx) { forward<T, D>(ctx, p); });
  }

  /// The host version (kiln/abi/attention.h), which takes dense tensors.
  void runHost() {
    if (c.misaligned)
      std::abort();
    int64_t element = std::is_same_v<T, BF16> ? 0 : 1;
    int64_t maskBatch = c.maskFrom || c.leftPadding ? c.batch : 1;
    int64_t maskQueries =
        c.maskedCausal || c.lowestRows || c.leftPadding || c.biasFrom
            ? c.queries
            : 1;
    const float *maskData = mask.empty() ? nullptr : mask.data();
    kiln_flash_attention_forward_host(q.data(), k.data(), v.data(), maskData,
                                      o.data(), stats.data(), element, c.batch,
                                      c.heads, c.queries, c.keys, D, maskBatch,
                                      1, maskQueries, c.causal, p.scale);
    kiln_flash_attention_backward_host(
        q.data(), k.data(), v.data(), o.data(), dout.data(), stats.data(),
        maskData, dq.data(), dk.data(), dv.data(), delta.data(), element,
        c.batch, c.heads, c.queries, c.keys, D, maskBatch, 1, maskQueries,
        c.causal, p.scale, c.maskedFill, c.leftPadding ? 1 : 0);
  }

  void runBackward() {
    runGrid((c.queries + 63) / 64, c.batch * c.heads, dqSharedBytes(D),
            [&](HostCtx &ctx) { backwardQuery<T, D>(ctx, p); });
    runGrid((c.keys + 63) / 64, c.batch * c.heads, dkdvSharedBytes(D),
            [&](HostCtx &ctx) { backwardKeyValue<T, D>(ctx, p); });
  }

  double element(const TensorRef &ref, int b, int h, int row, int col) const {
    return T::toFloat(static_cast<const uint16_t *>(
        ref.data)[b * ref.batch + h * ref.head + row * ref.row + col]);
  }

  Reference reference() const {
    Reference r;
    int64_t bh = int64_t(c.batch) * c.heads;
    r.o.assign(bh * c.queries * D, 0);
    r.max2.assign(bh * c.queries, 0);
    r.sum.assign(bh * c.queries, 0);
    r.dq.assign(bh * c.queries * D, 0);
    r.dk.assign(bh * c.keys * D, 0);
    r.dv.assign(bh * c.keys * D, 0);
    std::vector<double> prob(c.keys), dp(c.keys);
    for (int b = 0; b < c.batch; ++b)
      for (int h = 0; h < c.heads; ++h) {
        int64_t base = (int64_t(b) * c.heads + h);
        for (int i = 0; i < c.queries; ++i) {
          double max = -INFINITY;
          for (int j = 0; j < c.keys; ++j) {
            double s = 0;
            for (int d = 0; d < D; ++d)
              s += element(p.q, b, h, i, d) * element(p.k, b, h, j, d);
            s *= p.scale;
            if (c.maskFrom && b % 2 && j >= c.maskFrom)
              s = -INFINITY;
            if ((c.causal || c.maskedCausal) && j > i)
              s = -INFINITY;
            // The lowest float absorbs the score, in double as in f32.
            if (c.lowestRows && lowestDrops(i, j))
              s += std::numeric_limits<float>::lowest();
            if (c.leftPadding)
              s += mask[(size_t(b) * c.queries + i) * c.keys + j];
            if (c.biasFrom)
              s += biasAt(c, j);
            prob[j] = s;
            max = std::max(max, s);
          }
          double sum = 0;
          for (int j = 0; j < c.keys; ++j)
            sum += prob[j] = std::exp(prob[j] - max);
          for (int j = 0; j < c.keys; ++j)
            prob[j] /= sum;
          r.max2[base * c.queries + i] = max / std::log(2.0);
          r.sum[base * c.queries + i] = sum;
          double *oRow = &r.o[(base * c.queries + i) * D];
          for (int j = 0; j < c.keys; ++j)
            for (int d = 0; d < D; ++d)
              oRow[d] += prob[j] * element(p.v, b, h, j, d);
          // Backward, from the reference output.
          const float *gRow = static_cast<const float *>(p.dout.data) +
                              (base * c.queries + i) * D;
          double centre = 0;
          for (int d = 0; d < D; ++d)
            centre += gRow[d] * oRow[d];
          for (int j = 0; j < c.keys; ++j) {
            double dpj = 0;
            for (int d = 0; d < D; ++d)
              dpj += gRow[d] * element(p.v, b, h, j, d);
            double ds = prob[j] * (dpj - centre) * p.scale;
            if ((c.maskedFill && lowestDrops(i, j)) || (c.leftPadding && j > i))
              ds = 0;
            for (int d = 0; d < D; ++d) {
              r.dq[(base * c.queries + i) * D + d] +=
                  ds * element(p.k, b, h, j, d);
              r.dk[(base * c.keys + j) * D + d] +=
                  ds * element(p.q, b, h, i, d);
              r.dv[(base * c.keys + j) * D + d] += prob[j] * gRow[d];
            }
          }
        }
      }
    return r;
  }

  Case c;
  Params p;
  std::vector<uint16_t> q, k, v, qkv;
  std::vector<float> o, dout, dq, dk, dv, mask, stats, delta;

private:
  TensorRef dense(void *data, int rows) const {
    return {data, int64_t(c.heads) * rows * D, int64_t(rows) * D, D};
  }
};

/// The largest difference over the largest magnitude of the reference.
template <typename Got>
double relativeError(const Got &got, const std::vector<double> &want) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(double(got[i])))
      return INFINITY;
    diff = std::max(diff, std::abs(double(got[i]) - want[i]));
    scale = std::max(scale, std::abs(want[i]));
  }
  return diff / scale;
}

/// How far the kernels' row statistics (shift, sum) are from the
/// reference's: the log2 of the softmax's denominator with its shift, where
/// that is within the floats; else (the lowest float drops the row whole,
/// and its scores are all equal) the sum alone.
double statsError(const std::vector<float> &stats, const Reference &want) {
  double worst = 0;
  for (size_t row = 0; row < want.sum.size(); ++row) {
    double shift = stats[2 * row], sum = stats[2 * row + 1];
    if (std::isnan(shift) || std::isnan(sum))
      return INFINITY;
    double error = std::abs(want.max2[row]) < 1e30
                       ? std::abs(shift + std::log2(sum) -
                                  (want.max2[row] + std::log2(want.sum[row]))) /
                             std::max(1.0, std::abs(want.max2[row]))
                       : std::abs(sum - want.sum[row]) / want.sum[row];
    worst = std::max(worst, error);
  }
  return worst;
}

template <typename T, int D> void check(const Case &c, double tolerance) {
  Problem<T, D> problem(c);
  problem.runForward();
  problem.runBackward();
  Reference want = problem.reference();
  if (!c.fused && !c.misaligned) {
    SCOPED_TRACE("the host version");
    Problem<T, D> host(c);
    host.runHost();
    EXPECT_LT(relativeError(host.o, want.o), tolerance) << "O";
    EXPECT_LT(statsError(host.stats, want), 1e-5) << "statistics";
    EXPECT_LT(relativeError(host.dq, want.dq), 2 * tolerance) << "dQ";
    EXPECT_LT(relativeError(host.dk, want.dk), 2 * tolerance) << "dK";
    EXPECT_LT(relativeError(host.dv, want.dv), tolerance) << "dV";
  }
  EXPECT_LT(relativeError(problem.o, want.o), tolerance) << "O";
  EXPECT_LT(statsError(problem.stats, want), 1e-5) << "statistics";
  EXPECT_LT(relativeError(problem.dq, want.dq), 2 * tolerance) << "dQ";
  EXPECT_LT(relativeError(problem.dk, want.dk), 2 * tolerance) << "dK";
  EXPECT_LT(relativeError(problem.dv, want.dv), tolerance) << "dV";
}

// bf16 keeps 8 bits: the probabilities and dS the kernels round before
// their products are within 2^-8 relative, and so are the results.
constexpr double kBF16 = 1.5e-2, kF16 = 4e-3;

TEST(FlashAttentionTest, FusedProjectionLayoutPartialTiles) {
  check<BF16, 64>({2, 3, 80, 80, false, 0, /*fused=*/true}, kBF16);
}

TEST(FlashAttentionTest, CausalSkipsTilesPastTheDiagonal) {
  check<BF16, 32>({1, 2, 130, 130, /*causal=*/true}, kBF16);
}

TEST(FlashAttentionTest, PaddingMaskAndMoreKeysThanQueries) {
  // Keys 40.. of odd batches are dropped: part of the first tile of keys,
  // and the whole second one, which is skipped.
  check<F16, 64>({2, 1, 48, 100, false, /*maskFrom=*/40}, kF16);
}

TEST(FlashAttentionTest, CausalMaskTensorSkipsDroppedTiles) {
  check<BF16, 16>({2, 1, 150, 150, false, 0, false, /*maskedCausal=*/true},
                  kBF16);
}

// Hugging Face masks with float's lowest value, which overflows to -inf in
// log2 units: a row it drops whole would have NaN probabilities, where the
// softmax's are uniform (its scores all equal the lowest float). The
// backward recomputes those probabilities from the shift and the sum kept
// apart: their log2 sum would be the shift alone.
TEST(FlashAttentionTest, LowestFloatMaskDroppingWholeRows) {
  Case c{2, 1, 100, 100};
  c.lowestRows = true;
  check<BF16, 32>(c, kBF16);
}

// The same mask as masked_fill's (DistilBERT's masked_fill(padding,
// lowest)): the rows it fills whole keep their uniform probabilities (dV)
// but pass their scores no gradient (dQ, dK).
TEST(FlashAttentionTest, LowestFloatMaskedFillPassesNoGradient) {
  Case c{2, 1, 100, 100};
  c.lowestRows = true;
  c.maskedFill = true;
  check<BF16, 32>(c, kBF16);
}

// Hugging Face's GPT-2 given an attention mask: where(causal, scores,
// lowest) + padding. The left-padded batch's first rows keep only padding
// keys: their probabilities are uniform over the keys at the lowest float
// (the padding up to the row's position and the keys after it that are not
// padding; those after it that are, -inf), and only the former pass their
// scores a gradient (causalFill).
TEST(FlashAttentionTest, CausalFillWithLeftPadding) {
  Case c{2, 1, 90, 90};
  c.leftPadding = 40;
  check<BF16, 32>(c, kBF16);
}

TEST(FlashAttentionTest, UnalignedTensorsLoadElementByElement) {
  Case c{1, 2, 70, 70, /*causal=*/true};
  c.misaligned = true;
  check<BF16, 32>(c, kBF16);
}

// Tiles whose every score counts (no mask, every key in range, none after
// a query) take the kernels' unchecked path; here most of them do, beside
// the partial last tile of keys.
TEST(FlashAttentionTest, WholeTilesHeadSize16) {
  check<BF16, 16>({1, 2, 128, 200}, kBF16);
}

TEST(FlashAttentionTest, WholeTilesBeforeTheDiagonalF16) {
  check<F16, 64>({1, 1, 192, 192, /*causal=*/true}, kF16);
}

// A mask that adds 0 to a whole tile's scores lets the tile take the
// unmasked path: here the first and third tiles of keys, and the second
// adds its finite values (keys 70 to 79) score by score; the causal mask
// tensor above takes the unmasked path before the diagonal.
TEST(FlashAttentionTest, FiniteMaskWholeTilesWhereItAddsZero) {
  Case c{1, 2, 128, 192};
  c.biasFrom = 70;
  check<BF16, 64>(c, kBF16);
}

TEST(FlashAttentionTest, HeadSize128) {
  check<BF16, 128>({1, 1, 64, 64, true}, kBF16);
}

TEST(FlashAttentionTest, BF16RoundsToNearestEven) {
  EXPECT_EQ(BF16::fromFloat(1.0f), 0x3f80);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties go to even (1).
  EXPECT_EQ(BF16::fromFloat(1.00390625f), 0x3f80);
  EXPECT_EQ(BF16::fromFloat(1.01171875f), 0x3f82);
  EXPECT_EQ(BF16::toFloat(BF16::fromFloat(-INFINITY)), -INFINITY);
  EXPECT_TRUE(std::isnan(BF16::toFloat(BF16::fromFloat(NAN))));
}

// The grouped host entry points (cuDNN's grouped-query attention, emulated)
// compute what the others do on the key and value heads repeated: the same
// output, statistics and query gradient, bit for bit, and the key and
// value gradients summed over each group (to rounding: the grouped version
// sums a group's heads into one row as it goes), with a padding mask.
TEST(FlashAttentionTest, GroupedHostEqualsRepeatedHeads) {
  const int64_t batch = 2, heads = 6, keyHeads = 2, groups = heads / keyHeads,
                rows = 24, size = 16;
  std::mt19937 random(7);
  std::normal_distribution<float> normal;
  auto bf16s = [&](int64_t n) {
    std::vector<uint16_t> values(n);
    for (uint16_t &v : values)
      v = BF16::fromFloat(normal(random));
    return values;
  };
  const int64_t queryElements = batch * heads * rows * size,
                keyElements = batch * keyHeads * rows * size;
  std::vector<uint16_t> q = bf16s(queryElements), k = bf16s(keyElements),
                        v = bf16s(keyElements);
  // Each key head repeated `groups` times in a row, as the import spells it.
  auto repeated = [&](const std::vector<uint16_t> &grouped) {
    std::vector<uint16_t> out(queryElements);
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t h = 0; h < heads; ++h)
        std::copy_n(&grouped[((b * keyHeads + h / groups) * rows) * size],
                    rows * size, &out[((b * heads + h) * rows) * size]);
    return out;
  };
  std::vector<uint16_t> kr = repeated(k), vr = repeated(v);
  // A padding mask [batch, 1, 1, keys]: the second row drops its last 5.
  std::vector<float> mask(batch * rows, 0.0f);
  std::fill(mask.begin() + rows + rows - 5, mask.end(), -10000.0f);
  std::vector<float> grad(queryElements);
  for (float &g : grad)
    g = normal(random);

  struct Results {
    std::vector<float> out, stats, dq, dk, dv, delta;
  };
  auto run = [&](bool grouped) {
    int64_t kh = grouped ? keyHeads : heads;
    const void *key = grouped ? k.data() : kr.data();
    const void *value = grouped ? v.data() : vr.data();
    Results r{std::vector<float>(queryElements),
              std::vector<float>(batch * heads * rows * 2),
              std::vector<float>(queryElements),
              std::vector<float>(batch * kh * rows * size),
              std::vector<float>(batch * kh * rows * size),
              std::vector<float>(batch * heads * rows)};
    const double scale = 0.25;
    if (grouped) {
      kiln_flash_attention_forward_grouped_host(
          q.data(), key, value, mask.data(), r.out.data(), r.stats.data(), 0,
          batch, heads, rows, rows, size, batch, 1, 1, 0, scale, keyHeads);
      kiln_flash_attention_backward_grouped_host(
          q.data(), key, value, r.out.data(), grad.data(), r.stats.data(),
          mask.data(), r.dq.data(), r.dk.data(), r.dv.data(), r.delta.data(), 0,
          batch, heads, rows, rows, size, batch, 1, 1, 0, scale, 0, 0,
          keyHeads);
    } else {
      kiln_flash_attention_forward_host(
          q.data(), key, value, mask.data(), r.out.data(), r.stats.data(), 0,
          batch, heads, rows, rows, size, batch, 1, 1, 0, scale);
      kiln_flash_attention_backward_host(
          q.data(), key, value, r.out.data(), grad.data(), r.stats.data(),
          mask.data(), r.dq.data(), r.dk.data(), r.dv.data(), r.delta.data(), 0,
          batch, heads, rows, rows, size, batch, 1, 1, 0, scale, 0, 0);
    }
    return r;
  };
  Results grouped = run(true), full = run(false);
  EXPECT_EQ(grouped.out, full.out);
  EXPECT_EQ(grouped.stats, full.stats);
  EXPECT_EQ(grouped.dq, full.dq);
  EXPECT_EQ(grouped.delta, full.delta);
  // The repeated heads' gradients, summed over each group.
  auto summed = [&](const std::vector<float> &perHead) {
    std::vector<double> sums(keyElements, 0.0);
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t e = 0; e < rows * size; ++e)
          sums[(b * keyHeads + h / groups) * rows * size + e] +=
              perHead[(b * heads + h) * rows * size + e];
    return sums;
  };
  EXPECT_LT(relativeError(grouped.dk, summed(full.dk)), 1e-6);
  EXPECT_LT(relativeError(grouped.dv, summed(full.dv)), 1e-6);
  // The padded keys of the second row get no gradient from it.
  for (int64_t h = 0; h < keyHeads; ++h)
    for (int64_t j = rows - 5; j < rows; ++j)
      for (int64_t d = 0; d < size; ++d)
        EXPECT_EQ(grouped.dv[((keyHeads + h) * rows + j) * size + d], 0.0f);
}

} // namespace
