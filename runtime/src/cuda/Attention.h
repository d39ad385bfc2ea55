//===- Attention.h - a manifest attention as planned kernel launches -*- C++
//-*-===//
//
// An Attention command runs the runtime's own tensor-core kernels
// (FlashAttention.h), which libkilnrt-cuda.so carries as a fatbin: cubins for
// sm_80 and sm_90a and PTX the driver compiles for newer GPUs. A session
// loads them once, with its first attention command; each command's kernel
// arguments are fixed when the session is created, so running it only
// enqueues the launches (one forward, or the two of the backward).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_SRC_CUDA_ATTENTION_H
#define KILN_RUNTIME_SRC_CUDA_ATTENTION_H

#include "FlashAttention.h"

#include "kiln/runtime/Status.h"
#include "kiln/runtime/bundle.pb.h"

#include <cuda.h>

#include <functional>
#include <memory>
#include <string>

namespace kiln::runtime::cuda {

/// The attention kernels' module, loaded into the session's context.
class AttentionKernels {
public:
  static Status load(std::unique_ptr<AttentionKernels> &out);
  ~AttentionKernels();
  AttentionKernels(const AttentionKernels &) = delete;
  AttentionKernels &operator=(const AttentionKernels &) = delete;

  /// Kernel `name`, allowed `sharedBytes` of dynamic shared memory.
  Status function(const std::string &name, int sharedBytes,
                  CUfunction &out) const;

private:
  AttentionKernels() = default;
  CUmodule module = nullptr;
};

class AttentionPlan {
public:
  /// Plans `attention`; `address` gives a buffer's device address (fixed
  /// for the session's life).
  static Status
  create(const AttentionKernels &kernels, const bundle::Attention &attention,
         const std::function<CUdeviceptr(const bundle::BufferRef &)> &address,
         std::unique_ptr<AttentionPlan> &out);

  /// Enqueues the launches on `stream` (also while capturing a graph).
  Status enqueue(CUstream stream) const;

  /// "attention forward (bf16, 2 x 12 heads, 1024 queries, 1024 keys, head
  /// size 64, causal)", for messages.
  const std::string &description() const { return text; }

private:
  AttentionPlan() = default;

  struct Launch {
    CUfunction function = nullptr;
    unsigned grid[2] = {1, 1};
    int sharedBytes = 0;
    std::string kernel;
  };
  flash::Params params;
  Launch launches[2];
  int count = 0;
  std::string text;
};

} // namespace kiln::runtime::cuda

#endif // KILN_RUNTIME_SRC_CUDA_ATTENTION_H
