//===- LayerNorm.cu - LayerNorm.h's kernels for the GPU -------------------===//
//
// The device side of the kernels' context, and one extern "C" kernel per
// kernel and output type. The build compiles this file alone with nvcc into
// a fatbin (cubins for sm_80 and sm_90a, PTX for newer GPUs) that
// libkilnrt-cuda.so carries and loads through the driver API, as it does
// the attention kernels.
//
//===----------------------------------------------------------------------===//

#include <cuda_fp16.h>

#include "LayerNorm.h"

namespace {

using namespace kiln::layer_norm;

struct DeviceCtx {
  int thread, block;
  char *shared;

  __device__ void sync() { __syncthreads(); }
  __device__ float shflXor(float v, int mask) {
    return __shfl_xor_sync(0xffffffffu, v, mask);
  }
};

__device__ DeviceCtx context() {
  extern __shared__ __align__(16) char shared[];
  return {static_cast<int>(threadIdx.x), static_cast<int>(blockIdx.x), shared};
}

} // namespace

// kiln_layer_norm_<kernel>[_<output type>]: the names LayerNormPlan.cpp
// looks up.
#define KILN_LAYER_NORM_FORWARD(Out, Copy, type)                               \
  extern "C" __global__ void __launch_bounds__(kThreads)                       \
      kiln_layer_norm_forward_##type(Params p) {                               \
    DeviceCtx ctx = context();                                                 \
    forward<Out, Copy>(ctx, p);                                                \
  }

KILN_LAYER_NORM_FORWARD(F32Output, NoOutput, f32)
KILN_LAYER_NORM_FORWARD(BF16Output, NoOutput, bf16)
KILN_LAYER_NORM_FORWARD(F16Output, NoOutput, f16)
// f32 output with its rounded copy.
KILN_LAYER_NORM_FORWARD(F32Output, BF16Output, f32_bf16)
KILN_LAYER_NORM_FORWARD(F32Output, F16Output, f32_f16)

// kiln_layer_norm_backward_rows, and _bf16 / _f16 that also write the input
// gradient rounded.
#define KILN_LAYER_NORM_BACKWARD_ROWS(Out, name)                               \
  extern "C" __global__ void __launch_bounds__(kThreads)                       \
      kiln_layer_norm_backward_##name(Params p) {                              \
    DeviceCtx ctx = context();                                                 \
    backwardRows<Out>(ctx, p);                                                 \
  }

KILN_LAYER_NORM_BACKWARD_ROWS(NoOutput, rows)
KILN_LAYER_NORM_BACKWARD_ROWS(BF16Output, rows_bf16)
KILN_LAYER_NORM_BACKWARD_ROWS(F16Output, rows_f16)

extern "C" __global__ void __launch_bounds__(kThreads)
    kiln_layer_norm_backward_columns(Params p) {
  DeviceCtx ctx = context();
  backwardColumns(ctx, p);
}
