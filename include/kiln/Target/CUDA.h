//===- CUDA.h - compiling bufferized kiln modules for CUDA ------*- C++ -*-===//
//
// The CUDA target turns each entry function into a program the runtime
// issues on a stream (kernel launches and cuBLASLt products over the
// caller's tensors, the parameters and one arena) and its kernels into
// cubins for the chosen architectures, plus PTX the driver can compile for
// newer GPUs.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TARGET_CUDA_H
#define KILN_TARGET_CUDA_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"

#include <array>
#include <string>
#include <variant>
#include <vector>

namespace kiln {

struct CUDATargetOptions {
  /// Architectures to assemble cubins for, e.g. sm_80, sm_90a. The PTX kept
  /// for JIT compilation is that of the first.
  std::vector<std::string> archs = {"sm_80", "sm_90a"};
  /// The CUDA toolkit whose ptxas assembles the cubins and whose libdevice
  /// the kernels link; empty means the one Kiln was built with, if any,
  /// else ptxas from PATH.
  std::string toolkitPath;
  /// Threads per block of the generated kernels.
  int64_t blockSize = 256;
};

/// Bytes `offset` to `offset + size` of argument `argument` of the entry
/// function (an input, output, parameter or the arena).
struct CudaBuffer {
  unsigned argument = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
};

struct CudaLaunch {
  /// Index into CUDACode::kernels.
  unsigned kernel = 0;
  std::array<uint32_t, 3> grid{1, 1, 1}, block{1, 1, 1};
  std::vector<CudaBuffer> buffers;
};

/// C = op(A) op(B) + beta C, row-major, `batch` times with dense strides,
/// plus bias[j] on every row when `bias` has bytes (the bias epilogue).
/// When `biasGrad` has bytes it receives the sums over k of op(B) (or of
/// op(A) with `biasGradOfA`): the bias-gradient epilogue.
struct CudaGemm {
  /// Of A and B, and of C.
  mlir::Type inputElement, element;
  bool transposeA = false, transposeB = false, biasGradOfA = false;
  int64_t m = 0, n = 0, k = 0, batch = 1;
  /// Leading dimensions and batch strides of A, B and C, in elements.
  int64_t ld[3] = {0, 0, 0}, batchStride[3] = {0, 0, 0};
  float beta = 0;
  CudaBuffer a, b, c, bias, biasGrad;
  /// cuBLASLt's GELU epilogues (kiln-gemm-gelu): C = gelu(the product,
  /// plus the bias if any), with the product (and bias) also stored into
  /// `aux` when it has bytes; or C = the product times the GELU's
  /// derivative at `aux`. `aux` is dense [m, n] of C's type.
  enum class Epilogue { None, Gelu, GeluGrad } epilogue = Epilogue::None;
  CudaBuffer aux;
};

/// Starts averaging the f32 values of `buffer` over the ranks of the run;
/// `request` (from 1, unique in the program) names it to its CudaWait.
struct CudaAllReduce {
  CudaBuffer buffer;
  unsigned request = 0;
};

/// Later commands run once request `request`'s collective is done.
struct CudaWait {
  unsigned request = 0;
};

/// A step of a sharded optimizer over `ranks` ranks, on shards of `count`
/// f32 values: this rank's shard of the mean of `input` (a reduce-scatter)
/// or every rank's `input` (an all-gather) into `output`, running beside
/// the commands after it until request `request` is waited for; or this
/// rank's shard of `input` copied to `output` (request 0).
struct CudaShard {
  enum Kind { ReduceScatterMean, AllGather, LocalShard } kind = LocalShard;
  CudaBuffer input, output;
  uint64_t count = 0;
  unsigned ranks = 1;
  unsigned request = 0;
};

/// The runtime's tensor-core attention kernels: the forward (out and stats
/// from query, key, value and mask) or the backward (queryGrad, keyGrad,
/// valueGrad and delta from those, out, grad and stats), on dense
/// [batch, heads, rows, headSize] buffers; `mask` (no bytes: none) is
/// [maskBatch, maskHeads, maskQueries, keys], each of the three 1 or the
/// scores' size. `maskedFill` (backward): the scores a mask value at most
/// -2^100 fills get no gradient; `causalFill` (backward): nor do those
/// after each query's position.
struct CudaAttention {
  bool backward = false;
  /// On cuDNN's fused attention rather than the runtime's kernels: then
  /// out, grad and the three input gradients are of `element` too.
  bool cudnn = false;
  /// Of query, key and value (bf16 or f16); the rest is f32.
  mlir::Type element;
  int64_t batch = 0, heads = 0, queries = 0, keys = 0, headSize = 0;
  /// The key's and value's heads: `heads`, or a divisor of it on cuDNN
  /// (grouped-query attention).
  int64_t keyHeads = 0;
  int64_t maskBatch = 1, maskHeads = 1, maskQueries = 1;
  float scale = 1;
  bool causal = false, maskedFill = false, causalFill = false;
  CudaBuffer query, key, value, mask, out, stats, grad, queryGrad, keyGrad,
      valueGrad, delta;
};

/// The runtime's layer-norm kernels, over each row of a dense f32 [rows,
/// cols] `input`: the forward (`output`, of type `outputElement`, from the
/// input, `scale` and `bias`, whose size 0 means none; with a `residual`,
/// of input + residual, which it writes to `sum`) or the backward
/// (`inputGrad`, plus `accumulate` if any, `scaleGrad` and `biasGrad` from
/// the input, the scale and `grad`, through the scratch `partials`; and
/// `inputGrad` rounded to `outputElement` in `output`, if that has bytes).
struct CudaLayerNorm {
  bool backward = false;
  /// The forward's output type, the backward's rounded input gradient's;
  /// the forward's copy's (null: none).
  mlir::Type outputElement, copyElement;
  /// The types of the matrices it reads that a product stored in 16 bits
  /// (kiln-amp): the forward's input and residual, the backward's grad and
  /// accumulate (null: f32).
  mlir::Type inputElement, residualElement, gradElement, accumulateElement;
  int64_t rows = 0, cols = 0;
  float epsilon = 0;
  CudaBuffer input, scale, bias, residual, output, sum, grad, accumulate,
      inputGrad, scaleGrad, biasGrad, partials, copy;
};

using CudaCommand = std::variant<CudaLaunch, CudaGemm, CudaAllReduce, CudaWait,
                                 CudaShard, CudaAttention, CudaLayerNorm>;

struct CudaProgram {
  std::string entry;
  int64_t arenaBytes = 0;
  std::vector<CudaCommand> commands;
};

struct CudaImage {
  enum Format { Cubin, Ptx } format;
  /// sm_90a for a cubin, compute_90a for PTX.
  std::string arch;
  std::string bytes;
};

struct CUDACode {
  std::vector<std::string> kernels;
  std::vector<CudaImage> images;
  std::vector<CudaProgram> programs;
};

/// Validates `archs` (sm_<major><minor>[a], major 7.5 or later); the error
/// names the first bad one.
llvm::Error checkCudaArchs(const std::vector<std::string> &archs);

/// Compiles a bufferized, memory-planned module (as compileForCPU takes it,
/// but with its products still linalg ops) for CUDA.
llvm::Expected<CUDACode> compileForCUDA(mlir::ModuleOp module,
                                        const CUDATargetOptions &options);

} // namespace kiln

#endif // KILN_TARGET_CUDA_H
