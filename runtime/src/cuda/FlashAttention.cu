//===- FlashAttention.cu - FlashAttention.h's kernels for the GPU ---------===//
//
// The device side of the kernels' context (barriers, shuffles, mma.sync,
// ldmatrix and cp.async), and one extern "C" kernel per
// kernel, element type and head size. The build compiles this file alone
// with nvcc into a fatbin (cubins for sm_80 and sm_90a, PTX for newer
// GPUs) that libkilnrt-cuda.so carries and loads through the driver API,
// like a bundle's own kernels.
//
//===----------------------------------------------------------------------===//

#include <cuda_fp16.h>

#include "FlashAttention.h"

namespace {

using namespace kiln::flash;

struct DeviceCtx {
  int thread, blockX, blockY;
  char *shared;

  __device__ void sync() { __syncthreads(); }
  __device__ float shflXor(float v, int mask) {
    return __shfl_xor_sync(0xffffffffu, v, mask);
  }
  template <typename T>
  __device__ void mma(float d[4], const uint32_t a[4], const uint32_t b[2]);

  // Volatile, so that no load moves across the barrier before it.
  __device__ void loadMatrices(uint32_t r[4], const uint16_t *row) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 "
                 "{%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(sharedAddress(row)));
  }
  __device__ void loadMatricesTransposed(uint32_t r[4], const uint16_t *row) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 "
                 "{%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(sharedAddress(row)));
  }
  // 16 bytes from global to shared memory without passing through
  // registers (sm_80 on); a group of them lands by waitCopies.
  __device__ void copyAsync16(void *to, const void *from) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;"
                 :
                 : "r"(sharedAddress(to)), "l"(from)
                 : "memory");
  }
  __device__ void commitCopies() {
    asm volatile("cp.async.commit_group;" ::: "memory");
  }
  /// Until at most the N groups committed last are in flight.
  template <int N> __device__ void waitCopies() {
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
  }
  static __device__ uint32_t sharedAddress(const void *p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
  }
};

template <>
__device__ void DeviceCtx::mma<BF16>(float d[4], const uint32_t a[4],
                                     const uint32_t b[2]) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

template <>
__device__ void DeviceCtx::mma<F16>(float d[4], const uint32_t a[4],
                                    const uint32_t b[2]) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__device__ DeviceCtx context() {
  extern __shared__ __align__(16) char shared[];
  return {static_cast<int>(threadIdx.x), static_cast<int>(blockIdx.x),
          static_cast<int>(blockIdx.y), shared};
}

} // namespace

/// Blocks of the forward kernel an SM must hold at once, which ptxas fits
/// the registers to (0: no such bound): at head size 64, four, which is 128
/// registers a thread. Left alone, ptxas takes 129 there, and as a warp's
/// registers are allocated in multiples of 256, three blocks would fit. At
/// 128 a bound of four spills; at 16 and 32 four fit without one.
constexpr int forwardMinBlocks(int D) { return D == 64 ? 4 : 0; }

// kiln_flash_<kernel>_<type>_d<head size>: the names FlashAttention.cpp
// looks up.
#define KILN_FLASH_KERNELS(T, type, D)                                         \
  extern "C" __global__ void __launch_bounds__(kThreads, forwardMinBlocks(D))  \
      kiln_flash_forward_##type##_d##D(Params p) {                             \
    DeviceCtx ctx = context();                                                 \
    forward<T, D>(ctx, p);                                                     \
  }                                                                            \
  extern "C" __global__ void __launch_bounds__(kThreads)                       \
      kiln_flash_dq_##type##_d##D(Params p) {                                  \
    DeviceCtx ctx = context();                                                 \
    backwardQuery<T, D>(ctx, p);                                               \
  }                                                                            \
  extern "C" __global__ void __launch_bounds__(kThreads)                       \
      kiln_flash_dkdv_##type##_d##D(Params p) {                                \
    DeviceCtx ctx = context();                                                 \
    backwardKeyValue<T, D>(ctx, p);                                            \
  }

KILN_FLASH_KERNELS(BF16, bf16, 16)
KILN_FLASH_KERNELS(BF16, bf16, 32)
KILN_FLASH_KERNELS(BF16, bf16, 64)
KILN_FLASH_KERNELS(BF16, bf16, 128)
KILN_FLASH_KERNELS(F16, f16, 16)
KILN_FLASH_KERNELS(F16, f16, 32)
KILN_FLASH_KERNELS(F16, f16, 64)
KILN_FLASH_KERNELS(F16, f16, 128)
