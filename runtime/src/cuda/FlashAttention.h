//===- FlashAttention.h - attention on tensor cores, storing no scores ----===//
//
// Attention forward and backward in the manner of FlashAttention-2: each
// warp owns 16 rows, computes their scores a 64-wide tile at a time with
// mma.sync.m16n8k16 (bf16 or f16 operands, f32 accumulators), keeps the
// softmax's running maximum and sum in registers, and never stores a score.
// The probabilities go from the product's accumulators into the next
// product's operand registers directly, since the two layouts line up.
//
//   forward: O = softmax(Q Kᵀ scale + mask) V, and per row the softmax's
//            shift (its largest score) and denominator, which the backward
//            reads instead of recomputing the row statistics.
//   backward, two kernels and no atomics (deterministic):
//     dq:    per query row, delta = rowsum(dO O) (kept for the next kernel)
//            and dQ = dS K scale, dS = P (dO Vᵀ - delta) (0 where a
//            maskedFill mask fills the score, or causalFill after the
//            query's position);
//     dkdv:  per key row, dV = Pᵀ dO and dK = dSᵀ Q scale.
//
// The kernels are written once, over a `Ctx` that supplies the thread's
// indices, shared memory, barriers, warp shuffles and the mma: on the GPU
// those are the hardware's (FlashAttention.cu); on the host a test runs
// every thread of a block as a thread of its own, so the fragment layouts
// and the softmax bookkeeping are checked without a GPU. The Ctx also
// loads the products' B operands from shared tiles (ldmatrix: below, at
// productWithRows).
//
// Q, K and V hold 16-bit elements (the `T` of the kernel) and O, dO and the
// gradients f32, each addressed as base + batch * b + head * h + row * r +
// column, columns contiguous: so a head can be read in place from a fused
// projection. The optional additive f32 mask is addressed the same way by
// (batch, head, query, key), any stride 0 where it broadcasts (a padding
// mask has row stride 0); a tile whose mask is -inf throughout is skipped,
// and one whose mask is 0 throughout is computed as without a mask.
// A finite mask value too large for base-2 units (below -FLT_MAX / log2 e:
// Hugging Face fills with float's lowest value) stays finite there, the
// lowest float: a row it drops whole has the softmax's uniform
// probabilities, not NaN. Causal attention needs no mask: the loops stop
// at the diagonal.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_CUDA_FLASHATTENTION_H
#define KILN_RUNTIME_CUDA_FLASHATTENTION_H

#include <cstdint>
#include <type_traits>

// Loops over registers are unrolled, so that every index is a constant
// and the arrays stay in registers.
#define KILN_FA_UNROLL _Pragma("unroll")

#if defined(__CUDACC__)
#define KILN_FA_FN __device__ __forceinline__
#else
#include <cmath>
#include <cstring>
#define KILN_FA_FN inline
#endif

namespace kiln::flash {

/// Threads per block: four warps of 16 rows each.
constexpr int kThreads = 128;
constexpr int kWarps = 4;
/// Rows a block owns (queries in forward and dq, keys in dkdv), and the
/// width of the tiles it walks the other side in.
constexpr int kBlockRows = 64;
constexpr int kTile = 64;
/// Shared tiles' rows are padded so that the lanes reading one column of
/// consecutive rows hit different banks.
constexpr int kPad = 8;
constexpr int kMaskStride = kTile + 4;

/// Where tensor element (batch, head, row, column) is, in elements.
struct TensorRef {
  void *data = nullptr;
  int64_t batch = 0, head = 0, row = 0;
};

struct Params {
  int batch = 0, heads = 0, queries = 0, keys = 0;
  /// The softmax's scale of Q Kᵀ.
  float scale = 1;
  /// Key j is seen by query i only when j <= i (queries == keys).
  int causal = 0;
  /// Backward: a mask value at most -2^100 fills its score (PyTorch's
  /// masked_fill) rather than adding to it, so the score gets no gradient.
  int maskedFill = 0;
  /// Backward: the scores after each query's position are filled (Hugging
  /// Face's GPT-2 where(causal, scores, lowest)), so they get no gradient.
  int causalFill = 0;
  /// 16-bit Q [.., queries, D], K and V [.., keys, D].
  TensorRef q, k, v;
  /// f32: the output, and its gradient (backward).
  TensorRef o, dout;
  /// f32 gradients of Q, K and V (backward).
  TensorRef dq, dk, dv;
  /// f32 additive mask, element (batch, head, query, key); data null: none.
  TensorRef mask;
  /// f32, dense: the forward's statistics [batch, heads, queries, 2] (per
  /// row its shift, the largest score in log2 units, and the sum of
  /// 2^(score - shift)), and the backward's rowsum(dO O) [batch, heads,
  /// queries]. Kept apart, the shift and the sum give the backward the
  /// forward's probabilities even where the shift is so large that adding
  /// the log of the sum to it would lose the sum.
  float *stats = nullptr, *delta = nullptr;
};

/// Shared memory each kernel needs, in bytes, for head size `D`: two
/// 16-bit tiles a stage (forward and dq: two stages, the next tile's
/// copies landing in one while the products read the other), the mask's
/// tile and its two flags, and (dkdv) three rows of statistics (the shift,
/// the sum's reciprocal and delta).
constexpr int kMaskBytes = kTile * kMaskStride * 4 + 16;
constexpr int tileBytes(int D) { return kTile * (D + kPad) * 2; }
constexpr int kForwardStages = 2;
constexpr int forwardSharedBytes(int D) {
  return kForwardStages * 2 * tileBytes(D) + kMaskBytes;
}
constexpr int dqSharedBytes(int D) { return forwardSharedBytes(D); }
constexpr int dkdvSharedBytes(int D) {
  return 2 * tileBytes(D) + kMaskBytes + 3 * kTile * 4;
}

//===----------------------------------------------------------------------===//
// 16-bit element types
//===----------------------------------------------------------------------===//

KILN_FA_FN uint32_t floatBits(float f) {
#if defined(__CUDACC__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}

KILN_FA_FN float bitsFloat(uint32_t u) {
#if defined(__CUDACC__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

struct BF16 {
  static constexpr const char *name = "bf16";
  /// Round to nearest, ties to even; NaN stays NaN.
  static KILN_FA_FN uint16_t fromFloat(float f) {
    uint32_t u = floatBits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
      return static_cast<uint16_t>((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1);
    return static_cast<uint16_t>(u >> 16);
  }
  static KILN_FA_FN float toFloat(uint16_t h) {
    return bitsFloat(static_cast<uint32_t>(h) << 16);
  }
};

struct F16 {
  static constexpr const char *name = "f16";
  static KILN_FA_FN uint16_t fromFloat(float f) {
#if defined(__CUDACC__)
    return __half_as_ushort(__float2half_rn(f));
#else
    _Float16 h = static_cast<_Float16>(f);
    uint16_t u;
    std::memcpy(&u, &h, 2);
    return u;
#endif
  }
  static KILN_FA_FN float toFloat(uint16_t u) {
#if defined(__CUDACC__)
    return __half2float(__ushort_as_half(u));
#else
    _Float16 h;
    std::memcpy(&h, &u, 2);
    return static_cast<float>(h);
#endif
  }
};

/// 2^x: on the GPU the special function unit's approximation (relative
/// error about 2^-22, results below 2^-126 flushed to 0), which is all a
/// probability rounded to 16 bits needs.
KILN_FA_FN float exp2Of(float x) {
#if defined(__CUDACC__)
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#else
  return std::exp2(x);
#endif
}

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kInf = __builtin_huge_valf();
constexpr float kMaxFloat = 3.40282346638528859812e+38f;

/// A mask value in log2 units: finite stays finite (the lowest float at
/// most), -inf stays -inf, NaN NaN.
KILN_FA_FN float maskInLog2(float mask) {
  float v = mask * kLog2e;
  return v == -kInf && mask != -kInf ? -kMaxFloat : v;
}

/// The largest mask value in log2 units that fills its score, where the
/// backward is maskedFill: -2^100 in natural units (rounding keeps the
/// order, so a value at most -2^100 is at most this in log2 units).
constexpr float kFilledAtMost = -0x1p100f * kLog2e;

/// dS for the score of `query` and `key` whose mask value (log2 units) is
/// `mask`: 0 where the backward is maskedFill and the mask fills the
/// score, or causalFill and the key comes after the query.
KILN_FA_FN float scoreGrad(const Params &p, float mask, int64_t query,
                           int64_t key, float ds) {
  if (p.maskedFill && mask <= kFilledAtMost)
    return 0.0f;
  return p.causalFill && key > query ? 0.0f : ds;
}

//===----------------------------------------------------------------------===//
// Fragments of mma.m16n8k16
//===----------------------------------------------------------------------===//
//
// Lane l is in group g = l / 4 at position t = l % 4. Of the 16 x 16 A
// operand it holds rows g and g + 8, columns 2t, 2t + 1, 2t + 8 and 2t + 9
// (four registers of two elements, the lower column in the low half); of
// the 16 x 8 B operand, column g at rows 2t, 2t + 1, 2t + 8, 2t + 9; of the
// 16 x 8 accumulator, rows g (c0, c1) and g + 8 (c2, c3) at columns 2t and
// 2t + 1.

KILN_FA_FN uint32_t pack(uint16_t lo, uint16_t hi) {
  return static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
}

/// Two floats rounded to T (to nearest, ties to even) in one register, the
/// first in the low half: on the GPU one conversion of the pair.
template <typename T> KILN_FA_FN uint32_t pack(float lo, float hi) {
#if defined(__CUDACC__)
  uint32_t both;
  if (std::is_same<T, BF16>::value)
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(both) : "f"(hi), "f"(lo));
  else
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(both) : "f"(hi), "f"(lo));
  return both;
#else
  return pack(T::fromFloat(lo), T::fromFloat(hi));
#endif
}

/// A row-major tile of 16-bit elements in shared memory.
struct Matrix16 {
  const uint16_t *data;
  int64_t ld;
};

/// The A operand for chunk `chunk` (16 columns) of a 16 x 64 matrix held as
/// eight accumulators: the accumulator layout of columns 16c.. is the A
/// layout, so no lane exchanges anything.
template <typename T>
KILN_FA_FN void accumulatorsAsA(uint32_t a[4], const float acc[8][4],
                                int chunk) {
  const float *lo = acc[2 * chunk], *hi = acc[2 * chunk + 1];
  a[0] = pack<T>(lo[0], lo[1]);
  a[1] = pack<T>(lo[2], lo[3]);
  a[2] = pack<T>(hi[0], hi[1]);
  a[3] = pack<T>(hi[2], hi[3]);
}

// The B operands come from shared tiles through the Ctx's loadMatrices
// (ldmatrix.x4): lane l names row l % 8 of 8 x 8 matrix l / 8, 16 bytes
// (8 elements, 16-byte aligned) of the tile, and receives in r[i] the
// elements (l / 4, 2 (l % 4)) and (l / 4, 2 (l % 4) + 1) of matrix i, the
// lower column in the low half; loadMatricesTransposed (.trans) gives it
// (2 (l % 4), l / 4) and (2 (l % 4) + 1, l / 4) instead. A tile's rows are
// D + kPad elements (a multiple of 16 bytes) apart, so the eight rows of a
// matrix fall in different banks.

/// acc[n] += A · rows n*8.. of `m`ᵀ for the eight n: a 16 x 64 product of
/// the warp's rows (A, D wide, as D / 16 operands) with 64 rows of a tile.
/// One loadMatrices reads the B operands of n and n + 1 at columns
/// 16 kc..: matrix i is rows 8 (n + i / 2).., columns 16 kc + 8 (i % 2)..,
/// so r[0], r[1] are n's and r[2], r[3] n + 1's (B[k][n'] = m[n'][k], the
/// transpose of a tile's rows, as keys are in Q Kᵀ).
template <typename T, int D, typename Ctx>
KILN_FA_FN void productWithRows(Ctx &ctx, float acc[8][4],
                                const uint32_t a[D / 16][4], Matrix16 m) {
  const int lane = ctx.thread % 32;
  const uint16_t *row =
      m.data + (lane % 8 + lane / 16 * 8) * m.ld + lane / 8 % 2 * 8;
  KILN_FA_UNROLL
  for (int n = 0; n < 8; n += 2)
    KILN_FA_UNROLL
  for (int kc = 0; kc < D / 16; ++kc) {
    uint32_t b[4];
    ctx.loadMatrices(b, row + n * 8 * m.ld + kc * 16);
    ctx.template mma<T>(acc[n], a[kc], b);
    ctx.template mma<T>(acc[n + 1], a[kc], b + 2);
  }
}

/// acc += P · `m` for the warp's 16 x 64 P, held as eight accumulators
/// (rounded to T as operands), and a tile's 64 rows of D: a 16 x D result
/// as D / 8 accumulators. One loadMatricesTransposed reads the B operands
/// (B[k][n'] = m[k][n'], as values are in P V) of n and n + 1 at rows
/// 16 chunk..: matrix i is rows 16 chunk + 8 (i % 2).., columns
/// 8 (n + i / 2)...
template <typename T, int D, typename Ctx>
KILN_FA_FN void productOfAccumulators(Ctx &ctx, float acc[D / 8][4],
                                      const float p[8][4], Matrix16 m) {
  const int lane = ctx.thread % 32;
  const uint16_t *row =
      m.data + (lane % 8 + lane / 8 % 2 * 8) * m.ld + lane / 16 * 8;
  KILN_FA_UNROLL
  for (int chunk = 0; chunk < 4; ++chunk) {
    uint32_t a[4];
    accumulatorsAsA<T>(a, p, chunk);
    KILN_FA_UNROLL
    for (int n = 0; n < D / 8; n += 2) {
      uint32_t b[4];
      ctx.loadMatricesTransposed(b, row + chunk * 16 * m.ld + n * 8);
      ctx.template mma<T>(acc[n], a, b);
      ctx.template mma<T>(acc[n + 1], a, b + 2);
    }
  }
}

//===----------------------------------------------------------------------===//
// Tiles
//===----------------------------------------------------------------------===//

/// 16 bytes of a tensor, 16-byte aligned, as the bits of T operands into
/// 16-byte aligned shared memory: eight 16-bit elements copied (one vector
/// load and store on the GPU), or four f32 ones rounded to T (a vector load
/// and an 8-byte store).
template <typename T>
KILN_FA_FN void storeVector(uint16_t *to, const uint16_t *from) {
  struct alignas(16) Bytes16 {
    uint32_t x, y, z, w;
  };
#if defined(__CUDACC__)
  *reinterpret_cast<Bytes16 *>(to) = *reinterpret_cast<const Bytes16 *>(from);
#else
  std::memcpy(to, from, sizeof(Bytes16));
#endif
}
template <typename T>
KILN_FA_FN void storeVector(uint16_t *to, const float *from) {
  struct alignas(16) Floats4 {
    float x, y, z, w;
  };
  struct alignas(8) Words2 {
    uint32_t lo, hi;
  };
  Floats4 v;
#if defined(__CUDACC__)
  v = *reinterpret_cast<const Floats4 *>(from);
#else
  std::memcpy(&v, from, sizeof v);
#endif
  Words2 w{pack<T>(v.x, v.y), pack<T>(v.z, v.w)};
#if defined(__CUDACC__)
  *reinterpret_cast<Words2 *>(to) = w;
#else
  std::memcpy(to, &w, sizeof w);
#endif
}

template <typename Ref>
KILN_FA_FN Ref *rowsOf(const TensorRef &ref, int b, int h, int row) {
  return static_cast<Ref *>(ref.data) + b * ref.batch + h * ref.head +
         static_cast<int64_t>(row) * ref.row;
}

/// A tensor element as the bits of a T operand: 16-bit tensors hold them
/// already, f32 ones (dO) are rounded.
template <typename T> KILN_FA_FN uint16_t operandBits(uint16_t v) { return v; }
template <typename T> KILN_FA_FN uint16_t operandBits(float v) {
  return T::fromFloat(v);
}

/// Rows row0.. of a tensor of `Src` (uint16_t, or float rounded to T) into
/// a shared tile of kTile rows of T (zero past `rows`), the block's threads
/// together. `Async` (16-bit tensors): where the rows are 16-byte aligned,
/// each thread's 16-byte pieces are copies in flight (cp.async), which land
/// once the thread has waited for them (ctx.waitCopies, after
/// ctx.commitCopies); the rest is stored at once. Either way the tile is
/// the block's after a barrier.
template <typename T, int D, typename Src, bool Async = false, typename Ctx>
KILN_FA_FN void loadTile(Ctx &ctx, uint16_t *tile, const TensorRef &ref, int b,
                         int h, int row0, int rows) {
  static_assert(!Async || sizeof(Src) == 2, "only 16-bit rows copy as is");
  const Src *src = rowsOf<const Src>(ref, b, h, row0);
  // 16 bytes a load where every row of the tensor starts 16-byte aligned
  // (the tile's rows do); else one element at a time. A thread loads the
  // same columns of every kRowsAPass-th row, so that its addresses are a
  // base and a constant step.
  constexpr int kPerVector = 16 / sizeof(Src);
  if (reinterpret_cast<uintptr_t>(src) % 16 == 0 && ref.row % kPerVector == 0) {
    constexpr int kVectors = D / kPerVector, kRowsAPass = kThreads / kVectors;
    static_assert(kThreads % kVectors == 0 && kTile % kRowsAPass == 0,
                  "a tile's rows are whole passes of the block's threads");
    const int r = ctx.thread / kVectors, c = ctx.thread % kVectors * kPerVector;
    KILN_FA_UNROLL
    for (int pass = 0; pass < kTile / kRowsAPass; ++pass) {
      int row = r + pass * kRowsAPass;
      uint16_t *to = tile + row * (D + kPad) + c;
      if (row < rows - row0) {
        if constexpr (Async)
          ctx.copyAsync16(to, src + row * ref.row + c);
        else
          storeVector<T>(to, src + row * ref.row + c);
      } else {
        KILN_FA_UNROLL
        for (int e = 0; e < kPerVector; ++e)
          to[e] = 0;
      }
    }
    return;
  }
  for (int i = ctx.thread; i < kTile * D; i += kThreads) {
    int r = i / D, c = i % D;
    tile[r * (D + kPad) + c] =
        r < rows - row0 ? operandBits<T>(src[r * ref.row + c]) : 0;
  }
}

/// Rows r0..r0 + 15 of a tensor of `Src` as A operands of T, zero past
/// `rows`.
template <typename T, int D, typename Src>
KILN_FA_FN void loadRowsA(uint32_t a[D / 16][4], const TensorRef &ref, int b,
                          int h, int r0, int rows, int g, int t) {
  const Src *base = rowsOf<const Src>(ref, b, h, 0);
  KILN_FA_UNROLL
  for (int kc = 0; kc < D / 16; ++kc) {
    uint16_t e[2][4];
    KILN_FA_UNROLL
    for (int half = 0; half < 2; ++half) {
      int row = r0 + g + 8 * half;
      KILN_FA_UNROLL
      for (int j = 0; j < 4; ++j) {
        int c = kc * 16 + 2 * t + (j & 1) + (j & 2) * 4;
        e[half][j] = row < rows ? operandBits<T>(base[row * ref.row + c]) : 0;
      }
    }
    a[kc][0] = pack(e[0][0], e[0][1]);
    a[kc][1] = pack(e[1][0], e[1][1]);
    a[kc][2] = pack(e[0][2], e[0][3]);
    a[kc][3] = pack(e[1][2], e[1][3]);
  }
}

/// Accumulators of rows r0.. (16 x D, as D / 8 tiles) times `factor`, to
/// an f32 tensor, rows past `rows` dropped.
template <int D>
KILN_FA_FN void storeRows(const float acc[D / 8][4], const TensorRef &ref,
                          int b, int h, int r0, int rows, int g, int t,
                          float factor0, float factor1) {
  float *base = rowsOf<float>(ref, b, h, 0);
  KILN_FA_UNROLL
  for (int half = 0; half < 2; ++half) {
    int row = r0 + g + 8 * half;
    if (row >= rows)
      continue;
    float factor = half ? factor1 : factor0;
    KILN_FA_UNROLL
    for (int n = 0; n < D / 8; ++n)
      KILN_FA_UNROLL
    for (int j = 0; j < 2; ++j)
      base[row * ref.row + n * 8 + 2 * t + j] = acc[n][2 * half + j] * factor;
  }
}

/// The maximum (or sum) of a row's values over the four lanes of a group.
template <typename Ctx> KILN_FA_FN float groupMax(Ctx &ctx, float v) {
  v = fmaxf(v, ctx.shflXor(v, 1));
  return fmaxf(v, ctx.shflXor(v, 2));
}
template <typename Ctx> KILN_FA_FN float groupSum(Ctx &ctx, float v) {
  v += ctx.shflXor(v, 1);
  return v + ctx.shflXor(v, 2);
}

/// A block's mask tile in shared memory: per query and key of the tile, the
/// mask's value in log2 units (-inf outside the scores), or 0 throughout
/// without a mask. A mask the same for every query (row stride 0, as a
/// padding mask is) keeps one row, which every query reads.
struct MaskTile {
  float *values;
  int rowStep;
  KILN_FA_FN float at(int query, int key) const {
    return values[query * rowStep + key];
  }
  /// Two flags after the values: whether any score of the tile is kept,
  /// and whether any mask value of the scores is not 0.
  KILN_FA_FN int *flags() const {
    return reinterpret_cast<int *>(values + kTile * kMaskStride);
  }
};

/// What a block's mask tile does to its scores: `kept`, whether it keeps
/// any (false: the tile is skipped); `zero`, whether it adds 0 to every
/// score in range, so that the tile's scores are as without a mask.
struct MaskClass {
  bool kept, zero;
};

/// The block's mask tile, zero throughout where there is no mask (the
/// barrier before a tile's first product orders the zeros before any
/// read).
template <typename Ctx>
KILN_FA_FN MaskTile maskTileOf(Ctx &ctx, const Params &p, float *values) {
  MaskTile tile{values, p.mask.data && p.mask.row == 0 ? 0 : kMaskStride};
  if (!p.mask.data)
    for (int i = ctx.thread; i < kTile * kMaskStride; i += kThreads)
      values[i] = 0.0f;
  return tile;
}

/// The mask over queries q0.. and keys k0.. into the block's tile, -inf
/// outside the scores, and what it does to them (MaskClass). All of the
/// block's threads call it together; kept and zero without a mask.
template <typename Ctx>
KILN_FA_FN MaskClass loadMaskTile(Ctx &ctx, const MaskTile &tile,
                                  const Params &p, int b, int h, int q0,
                                  int k0) {
  if (!p.mask.data)
    return {true, true};
  int *flags = tile.flags();
  if (ctx.thread == 0)
    flags[0] = flags[1] = 0;
  ctx.sync();
  const float *mask = rowsOf<const float>(p.mask, b, h, 0);
  const int rows = tile.rowStep ? kTile : 1;
  bool kept = false, nonzero = false;
  for (int i = ctx.thread; i < rows * kTile; i += kThreads) {
    int r = i / kTile, c = i % kTile;
    int query = q0 + r, key = k0 + c;
    float v = -kInf;
    if (query < p.queries && key < p.keys) {
      v = maskInLog2(mask[static_cast<int64_t>(query) * p.mask.row + key]);
      // -0 adds nothing either; NaN is not 0, and goes through the tests.
      nonzero = nonzero || !(v == 0.0f);
    }
    tile.values[r * kMaskStride + c] = v;
    kept = kept || v > -kInf;
  }
  // Every thread that saw such a value writes the same 1.
  if (kept)
    flags[0] = 1;
  if (nonzero)
    flags[1] = 1;
  ctx.sync();
  MaskClass result{flags[0] != 0, flags[1] == 0};
  // Nobody resets the flags before everyone has read them.
  ctx.sync();
  return result;
}

/// The last key a block of rows row0.. sees, plus one.
KILN_FA_FN int keyEnd(const Params &p, int row0) {
  if (!p.causal)
    return p.keys;
  int end = row0 + kBlockRows;
  return end < p.keys ? end : p.keys;
}

/// Whether the score of `query` and `key` counts, by position: the key in
/// range, and not after the query where the attention is causal (its mask,
/// if any, may still drop it). A query past the end is the caller's: the
/// forward and dq compute such rows and never store them.
KILN_FA_FN bool keepsScore(const Params &p, int query, int key) {
  return key < p.keys && !(p.causal && key > query);
}

/// Whether a warp keeps every score of its 16 x 64 tile as it is, the
/// queries query0..query0 + queryCount - 1 against the keys key0..key0 +
/// keyCount - 1: the block's mask tile adds 0 to each (or there is none:
/// MaskClass::zero), every query and key in range, and no key after a
/// query where the attention is causal (or the backward causalFill). Such
/// a tile's scores need no test of their own, the same for every lane of
/// the warp.
KILN_FA_FN bool keepsWholeTile(const Params &p, const MaskClass &mask,
                               int query0, int queryCount, int key0,
                               int keyCount) {
  return mask.zero && query0 + queryCount <= p.queries &&
         key0 + keyCount <= p.keys &&
         !((p.causal || p.causalFill) && key0 + keyCount - 1 > query0);
}

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

/// Where a thread of any of the kernels works: its lane's group g and
/// position t, the batch b and head h of its block (blockIdx.y), the first
/// of the block's 64 rows (blockIdx.x) and of its warp's 16, where its
/// head's statistics start, the scores' scale in log2 units, and the
/// block's shared memory: `Stages` pairs of 16-bit tiles of kTile rows
/// (stage s's at firstOf(s) and secondOf(s)), then the mask's tile with its
/// flags (the sizes *SharedBytes count). With
/// `lastQueriesFirst` (causal forward and dq, where a block's work grows
/// with its queries), block x of a head takes the x-th last rows of
/// queries, so that the longest blocks start first and the grid's tail is
/// short ones.
template <int D, int Stages = 1> struct Block {
  static constexpr int kStageStep = 2 * kTile * (D + kPad);
  template <typename Ctx>
  KILN_FA_FN Block(Ctx &ctx, const Params &p, bool lastQueriesFirst)
      : g(ctx.thread % 32 / 4), t(ctx.thread % 4), b(ctx.blockY / p.heads),
        h(ctx.blockY % p.heads),
        row0((lastQueriesFirst
                  ? (p.queries + kBlockRows - 1) / kBlockRows - 1 - ctx.blockX
                  : ctx.blockX) *
             kBlockRows),
        warpRow0(row0 + ctx.thread / 32 * 16),
        stats(static_cast<int64_t>(ctx.blockY) * p.queries),
        scale(p.scale * kLog2e),
        first(reinterpret_cast<uint16_t *>(ctx.shared)),
        second(first + kTile * (D + kPad)),
        mask(maskTileOf(
            ctx, p, reinterpret_cast<float *>(first + Stages * kStageStep))) {}

  /// Stage `stage`'s two tiles.
  KILN_FA_FN uint16_t *firstOf(int stage) const {
    return first + stage * kStageStep;
  }
  KILN_FA_FN uint16_t *secondOf(int stage) const {
    return second + stage * kStageStep;
  }

  int g, t, b, h, row0, warpRow0;
  int64_t stats;
  float scale;
  uint16_t *first, *second;
  MaskTile mask;
};

/// The keys' and values' tiles from key k0 on into stage `stage`'s two
/// tiles, as one group of copies in flight.
template <typename T, int D, typename Ctx, typename B>
KILN_FA_FN void fetchKeysAndValues(Ctx &ctx, const B &block, const Params &p,
                                   int k0, int stage) {
  loadTile<T, D, uint16_t, true>(ctx, block.firstOf(stage), p.k, block.b,
                                 block.h, k0, p.keys);
  loadTile<T, D, uint16_t, true>(ctx, block.secondOf(stage), p.v, block.b,
                                 block.h, k0, p.keys);
  ctx.commitCopies();
}

/// What forward's and dq's loops over key tiles do before a tile's
/// products: start the copies of the next tile (key k0 + kTile, while
/// below `end`) into the other stage, load the mask's tile, wait for this
/// tile's copies (fetched the step before, or before the loop), and meet
/// at a barrier, after which the stage's tiles and the mask's are the
/// block's. Returns what the mask does to the tile (not kept: skipped).
/// The barrier at the end of a tile's products keeps the next step's
/// copies from overwriting tiles still read.
template <typename T, int D, typename Ctx, typename B>
KILN_FA_FN MaskClass awaitKeyTile(Ctx &ctx, const B &block, const Params &p,
                                  int q0, int k0, int end, int stage) {
  const bool more = k0 + kTile < end;
  if (more)
    fetchKeysAndValues<T, D>(ctx, block, p, k0 + kTile, stage ^ 1);
  const MaskClass mask =
      loadMaskTile(ctx, block.mask, p, block.b, block.h, q0, k0);
  if (more)
    ctx.template waitCopies<1>();
  else
    ctx.template waitCopies<0>();
  ctx.sync();
  return mask;
}

/// Grid (ceil(queries / 64), batch * heads).
template <typename T, int D, typename Ctx>
KILN_FA_FN void forward(Ctx &ctx, const Params &p) {
  const Block<D, kForwardStages> block(ctx, p, p.causal);
  const int g = block.g, t = block.t, b = block.b, h = block.h;
  const int q0 = block.row0, r0 = block.warpRow0;
  const MaskTile &maskTile = block.mask;
  const float scale = block.scale;

  const int end = keyEnd(p, q0);
  fetchKeysAndValues<T, D>(ctx, block, p, 0, 0);
  uint32_t qa[D / 16][4];
  loadRowsA<T, D, uint16_t>(qa, p.q, b, h, r0, p.queries, g, t);
  // Per row (g, g + 8): the running maximum of the scores (log2 units)
  // and the sum of 2^(score - maximum).
  float maximum[2] = {-kInf, -kInf}, sum[2] = {0, 0};
  float acc[D / 8][4] = {};

  for (int k0 = 0, stage = 0; k0 < end; k0 += kTile, stage ^= 1) {
    const MaskClass maskClass =
        awaitKeyTile<T, D>(ctx, block, p, q0, k0, end, stage);
    if (!maskClass.kept)
      continue;
    const Matrix16 keys{block.firstOf(stage), D + kPad},
        values{block.secondOf(stage), D + kPad};
    float s[8][4] = {};
    productWithRows<T, D>(ctx, s, qa, keys);
    // The scores in log2 units are s times `factor`: a whole tile keeps the
    // products (times the scale in the exponent below, so that each score
    // is one multiply-add), any other is scaled, masked and -inf where
    // dropped here (rows past the end are computed and never stored).
    float tileMax[2] = {-kInf, -kInf}, factor = 1.0f;
    if (keepsWholeTile(p, maskClass, r0, 16, k0, kTile)) {
      KILN_FA_UNROLL
      for (int n = 0; n < 8; ++n)
        KILN_FA_UNROLL
      for (int i = 0; i < 4; ++i)
        tileMax[i / 2] = fmaxf(tileMax[i / 2], s[n][i]);
      tileMax[0] *= scale;
      tileMax[1] *= scale;
      factor = scale;
    } else {
      KILN_FA_UNROLL
      for (int n = 0; n < 8; ++n)
        KILN_FA_UNROLL
      for (int i = 0; i < 4; ++i) {
        int row = r0 + g + (i & 2) * 4, key = k0 + n * 8 + 2 * t + (i & 1);
        float v = s[n][i] * scale + maskTile.at(row - q0, key - k0);
        s[n][i] = keepsScore(p, row, key) ? v : -kInf;
        tileMax[i / 2] = fmaxf(tileMax[i / 2], s[n][i]);
      }
    }
    float shift[2], rescale[2], tileSum[2] = {0, 0};
    KILN_FA_UNROLL
    for (int r = 0; r < 2; ++r) {
      float next = fmaxf(maximum[r], groupMax(ctx, tileMax[r]));
      // Nothing seen yet (every score so far dropped): shift by 0, so
      // that 2^(-inf - shift) is 0 rather than NaN.
      shift[r] = next == -kInf ? 0.0f : next;
      rescale[r] = exp2Of(maximum[r] - shift[r]);
      maximum[r] = next;
    }
    KILN_FA_UNROLL
    for (int n = 0; n < 8; ++n)
      KILN_FA_UNROLL
    for (int i = 0; i < 4; ++i) {
      s[n][i] = exp2Of(s[n][i] * factor - shift[i / 2]);
      tileSum[i / 2] += s[n][i];
    }
    KILN_FA_UNROLL
    for (int r = 0; r < 2; ++r)
      sum[r] = sum[r] * rescale[r] + groupSum(ctx, tileSum[r]);
    KILN_FA_UNROLL
    for (int n = 0; n < D / 8; ++n)
      KILN_FA_UNROLL
    for (int i = 0; i < 4; ++i)
      acc[n][i] *= rescale[i / 2];
    productOfAccumulators<T, D>(ctx, acc, s, values);
    ctx.sync();
  }
  // A row whose every score was dropped has sum 0, and its output is NaN,
  // as the softmax's is.
  storeRows<D>(acc, p.o, b, h, r0, p.queries, g, t, 1.0f / sum[0],
               1.0f / sum[1]);
  if (t == 0)
    KILN_FA_UNROLL
  for (int r = 0; r < 2; ++r) {
    int row = r0 + g + 8 * r;
    if (row < p.queries) {
      float *out = p.stats + 2 * (block.stats + row);
      out[0] = maximum[r] == -kInf ? 0.0f : maximum[r];
      out[1] = sum[r];
    }
  }
}

/// Grid (ceil(queries / 64), batch * heads). Also writes `delta`, which
/// dkdv reads.
template <typename T, int D, typename Ctx>
KILN_FA_FN void backwardQuery(Ctx &ctx, const Params &p) {
  const Block<D, kForwardStages> block(ctx, p, p.causal);
  const int g = block.g, t = block.t, b = block.b, h = block.h;
  const int q0 = block.row0, r0 = block.warpRow0;
  const MaskTile &maskTile = block.mask;
  const float scale = block.scale;
  const int64_t stats = block.stats;

  const int end = keyEnd(p, q0);
  fetchKeysAndValues<T, D>(ctx, block, p, 0, 0);
  uint32_t qa[D / 16][4], da[D / 16][4];
  loadRowsA<T, D, uint16_t>(qa, p.q, b, h, r0, p.queries, g, t);
  loadRowsA<T, D, float>(da, p.dout, b, h, r0, p.queries, g, t);
  // Per row: the forward's shift and the reciprocal of its sum (rows past
  // the end: +inf and 0, so that every probability is 0), and delta =
  // rowsum(dO O) in f32.
  float shift[2], inverse[2], delta[2];
  KILN_FA_UNROLL
  for (int r = 0; r < 2; ++r) {
    int row = r0 + g + 8 * r;
    float partial = 0;
    if (row < p.queries) {
      const float *dO = rowsOf<const float>(p.dout, b, h, row);
      const float *o = rowsOf<const float>(p.o, b, h, row);
      for (int c = 2 * t; c < D; c += 8)
        partial += dO[c] * o[c] + dO[c + 1] * o[c + 1];
    }
    delta[r] = groupSum(ctx, partial);
    shift[r] = row < p.queries ? p.stats[2 * (stats + row)] : kInf;
    inverse[r] = row < p.queries ? 1.0f / p.stats[2 * (stats + row) + 1] : 0.0f;
    if (t == 0 && row < p.queries)
      p.delta[stats + row] = delta[r];
  }
  float acc[D / 8][4] = {};

  for (int k0 = 0, stage = 0; k0 < end; k0 += kTile, stage ^= 1) {
    const MaskClass maskClass =
        awaitKeyTile<T, D>(ctx, block, p, q0, k0, end, stage);
    if (!maskClass.kept)
      continue;
    const Matrix16 keys{block.firstOf(stage), D + kPad},
        values{block.secondOf(stage), D + kPad};
    float s[8][4] = {}, dp[8][4] = {};
    productWithRows<T, D>(ctx, s, qa, keys);
    productWithRows<T, D>(ctx, dp, da, values);
    // dS = P (dP - delta), P recomputed from the forward's statistics.
    if (keepsWholeTile(p, maskClass, r0, 16, k0, kTile)) {
      KILN_FA_UNROLL
      for (int n = 0; n < 8; ++n)
        KILN_FA_UNROLL
      for (int i = 0; i < 4; ++i) {
        float prob = exp2Of(s[n][i] * scale - shift[i / 2]) * inverse[i / 2];
        s[n][i] = prob * (dp[n][i] - delta[i / 2]);
      }
    } else {
      KILN_FA_UNROLL
      for (int n = 0; n < 8; ++n)
        KILN_FA_UNROLL
      for (int i = 0; i < 4; ++i) {
        int row = r0 + g + (i & 2) * 4, key = k0 + n * 8 + 2 * t + (i & 1);
        bool kept = keepsScore(p, row, key);
        float mask = kept ? maskTile.at(row - q0, key - k0) : 0.0f;
        float prob = kept ? exp2Of(s[n][i] * scale + mask - shift[i / 2]) *
                                inverse[i / 2]
                          : 0.0f;
        s[n][i] =
            scoreGrad(p, mask, row, key, prob * (dp[n][i] - delta[i / 2]));
      }
    }
    productOfAccumulators<T, D>(ctx, acc, s, keys);
    ctx.sync();
  }
  storeRows<D>(acc, p.dq, b, h, r0, p.queries, g, t, p.scale, p.scale);
}

/// Grid (ceil(keys / 64), batch * heads); runs after backwardQuery.
template <typename T, int D, typename Ctx>
KILN_FA_FN void backwardKeyValue(Ctx &ctx, const Params &p) {
  const Block<D> block(ctx, p, false);
  const int g = block.g, t = block.t, b = block.b, h = block.h;
  const int k0 = block.row0, r0 = block.warpRow0;
  uint16_t *queryTile = block.first, *gradTile = block.second;
  const MaskTile &maskTile = block.mask;
  float *shiftTile = maskTile.values + kMaskBytes / 4;
  float *inverseTile = shiftTile + kTile;
  float *deltaTile = inverseTile + kTile;
  const Matrix16 queries{queryTile, D + kPad}, grads{gradTile, D + kPad};
  const float scale = block.scale;
  const int64_t stats = block.stats;

  uint32_t ka[D / 16][4], va[D / 16][4];
  loadRowsA<T, D, uint16_t>(ka, p.k, b, h, r0, p.keys, g, t);
  loadRowsA<T, D, uint16_t>(va, p.v, b, h, r0, p.keys, g, t);
  float dk[D / 8][4] = {}, dv[D / 8][4] = {};

  // Causal: the queries before this block's first key see none of it.
  for (int q0 = p.causal ? k0 : 0; q0 < p.queries; q0 += kTile) {
    const MaskClass maskClass = loadMaskTile(ctx, maskTile, p, b, h, q0, k0);
    if (!maskClass.kept)
      continue;
    loadTile<T, D, uint16_t>(ctx, queryTile, p.q, b, h, q0, p.queries);
    loadTile<T, D, float>(ctx, gradTile, p.dout, b, h, q0, p.queries);
    for (int i = ctx.thread; i < kTile; i += kThreads) {
      bool in = q0 + i < p.queries;
      shiftTile[i] = in ? p.stats[2 * (stats + q0 + i)] : kInf;
      inverseTile[i] = in ? 1.0f / p.stats[2 * (stats + q0 + i) + 1] : 0.0f;
      deltaTile[i] = in ? p.delta[stats + q0 + i] : 0.0f;
    }
    ctx.sync();
    // Sᵀ = K Qᵀ and dPᵀ = V dOᵀ: rows are this warp's keys, columns the
    // tile's queries.
    float s[8][4] = {}, dp[8][4] = {};
    productWithRows<T, D>(ctx, s, ka, queries);
    productWithRows<T, D>(ctx, dp, va, grads);
    if (keepsWholeTile(p, maskClass, q0, kTile, r0, 16)) {
      KILN_FA_UNROLL
      for (int n = 0; n < 8; ++n)
        KILN_FA_UNROLL
      for (int i = 0; i < 4; ++i) {
        int column = n * 8 + 2 * t + (i & 1);
        float prob =
            exp2Of(s[n][i] * scale - shiftTile[column]) * inverseTile[column];
        s[n][i] = prob;
        dp[n][i] = prob * (dp[n][i] - deltaTile[column]);
      }
    } else {
      KILN_FA_UNROLL
      for (int n = 0; n < 8; ++n)
        KILN_FA_UNROLL
      for (int i = 0; i < 4; ++i) {
        int key = r0 + g + (i & 2) * 4, column = n * 8 + 2 * t + (i & 1);
        int query = q0 + column;
        bool kept = query < p.queries && keepsScore(p, query, key);
        float mask = kept ? maskTile.at(column, key - k0) : 0.0f;
        float prob = kept ? exp2Of(s[n][i] * scale + mask - shiftTile[column]) *
                                inverseTile[column]
                          : 0.0f;
        s[n][i] = prob;
        dp[n][i] = scoreGrad(p, mask, query, key,
                             prob * (dp[n][i] - deltaTile[column]));
      }
    }
    productOfAccumulators<T, D>(ctx, dv, s, grads);
    productOfAccumulators<T, D>(ctx, dk, dp, queries);
    ctx.sync();
  }
  storeRows<D>(dk, p.dk, b, h, r0, p.keys, g, t, p.scale, p.scale);
  storeRows<D>(dv, p.dv, b, h, r0, p.keys, g, t, 1.0f, 1.0f);
}

} // namespace kiln::flash

#endif // KILN_RUNTIME_CUDA_FLASHATTENTION_H
