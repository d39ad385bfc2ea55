//===- CudnnAttention.h - attention as cuDNN's fused SDPA -------*- C++ -*-===//
//
// An Attention command with engine CUDNN runs cuDNN's fused scaled dot
// product attention (its graph API, through the C++ frontend): the forward
// writes the output and each row's log-sum-exp, the backward reads them
// with the output's gradient and writes the three input gradients. Every
// matrix is of the command's 16-bit element type; the statistics are f32.
//
// The graph is built and validated from the command alone, for a GPU of a
// given compute capability: that needs no device, so the tests check it on
// any machine. A session then finalizes it with its cuDNN handle (the
// heuristic's engine for this GPU, checked supported) and, since the
// buffers' addresses are fixed, keeps the variant pack; running it only
// enqueues cuDNN's kernels on the stream (also while capturing a graph).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_SRC_CUDA_CUDNNATTENTION_H
#define KILN_RUNTIME_SRC_CUDA_CUDNNATTENTION_H

#include "kiln/runtime/Status.h"
#include "kiln/runtime/bundle.pb.h"

#include <cuda.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

struct cudnnContext;
typedef struct cudnnContext *cudnnHandle_t;

namespace kiln::runtime::cuda {

/// Whether this build has cuDNN's frontend (without it, CUDNN attention
/// commands are refused when a session plans them).
bool haveCudnnAttention();

/// The frontend graph of a CUDNN attention command, opaque here.
class CudnnAttentionGraph;

/// Destroys a graph (the type is incomplete where this header is read).
struct CudnnAttentionGraphDeleter {
  void operator()(CudnnAttentionGraph *graph) const;
};
using CudnnAttentionGraphPtr =
    std::unique_ptr<CudnnAttentionGraph, CudnnAttentionGraphDeleter>;

/// Builds the graph of `attention` for a GPU of compute capability
/// `smVersion` (major * 10 + minor) and validates it: whether cuDNN's
/// frontend takes its shapes, strides and types. Needs no device.
Status buildCudnnAttentionGraph(const bundle::Attention &attention,
                                int smVersion, CudnnAttentionGraphPtr &out);

class CudnnAttentionPlan {
public:
  /// Builds, validates and finalizes `attention`'s graph for the session's
  /// GPU (`smVersion`) with `handle`; `address` gives a buffer's device
  /// address (fixed for the session's life). `workspaceBytes` is raised to
  /// what the plan needs at least.
  static Status
  create(cudnnHandle_t handle, const bundle::Attention &attention,
         int smVersion,
         const std::function<CUdeviceptr(const bundle::BufferRef &)> &address,
         uint64_t &workspaceBytes, std::unique_ptr<CudnnAttentionPlan> &out);
  ~CudnnAttentionPlan();

  /// Enqueues cuDNN's kernels on `stream` with `workspace` (at least the
  /// bytes create asked for).
  Status enqueue(cudnnHandle_t handle, CUdeviceptr workspace,
                 CUstream stream) const;

  /// "attention forward on cuDNN (bf16, 8 x 12 heads, 1024 queries, 1024
  /// keys, head size 64, causal)", for messages.
  const std::string &description() const { return text; }

private:
  CudnnAttentionPlan() = default;
  CudnnAttentionGraphPtr graph;
  std::string text;
};

/// "attention forward on cuDNN (...)": how messages and profiles name
/// `attention`.
std::string describeCudnnAttention(const bundle::Attention &attention);

} // namespace kiln::runtime::cuda

#endif // KILN_RUNTIME_SRC_CUDA_CUDNNATTENTION_H
