//===- LayerNormPlan.h - a manifest layer norm as launches -----*- C++ -*-===//
//
// A LayerNorm command runs the runtime's own kernels (LayerNorm.h), which
// libkilnrt-cuda.so carries as a fatbin, as it does the attention kernels:
// cubins for sm_80 and sm_90a and PTX the driver compiles for newer GPUs. A
// session loads them once, with its first layer-norm command; each
// command's kernel arguments are fixed when the session is created, so
// running it only enqueues the launches (one forward, or the two of the
// backward).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_SRC_CUDA_LAYERNORMPLAN_H
#define KILN_RUNTIME_SRC_CUDA_LAYERNORMPLAN_H

#include "LayerNorm.h"

#include "kiln/runtime/Status.h"
#include "kiln/runtime/bundle.pb.h"

#include <cuda.h>

#include <functional>
#include <memory>
#include <string>

namespace kiln::runtime::cuda {

/// The layer-norm kernels' module, loaded into the session's context.
class LayerNormKernels {
public:
  static Status load(std::unique_ptr<LayerNormKernels> &out);
  ~LayerNormKernels();
  LayerNormKernels(const LayerNormKernels &) = delete;
  LayerNormKernels &operator=(const LayerNormKernels &) = delete;

  /// Kernel `name`.
  Status function(const std::string &name, CUfunction &out) const;

private:
  LayerNormKernels() = default;
  CUmodule module = nullptr;
};

class LayerNormPlan {
public:
  /// Plans `layerNorm`; `address` gives a buffer's device address (fixed
  /// for the session's life).
  static Status
  create(const LayerNormKernels &kernels, const bundle::LayerNorm &layerNorm,
         const std::function<CUdeviceptr(const bundle::BufferRef &)> &address,
         std::unique_ptr<LayerNormPlan> &out);

  /// Enqueues the launches on `stream` (also while capturing a graph).
  Status enqueue(CUstream stream) const;

  /// "layer norm 8192x768 -> bf16", "layer norm 8192x768 + residual ->
  /// bf16", "layer norm backward 8192x768", "layer norm backward 8192x768
  /// + accumulate" or, with the input gradient rounded, "layer norm
  /// backward 8192x768 + accumulate -> bf16", for messages.
  const std::string &description() const { return text; }

private:
  LayerNormPlan() = default;

  struct Launch {
    CUfunction function = nullptr;
    unsigned blocks = 1;
    unsigned sharedBytes = 0;
    std::string kernel;
  };
  layer_norm::Params params;
  Launch launches[2];
  int count = 0;
  std::string text;
};

} // namespace kiln::runtime::cuda

#endif // KILN_RUNTIME_SRC_CUDA_LAYERNORMPLAN_H
