//===- CostModel.h - kilnc --report=cost ------------------------*- C++ -*-===//
//
// A roofline model of a CUDA bundle's entry points: each command's
// floating-point work and bytes, its time at the named GPU's peak rates
// and bandwidth (the lower bound) and at measured efficiencies plus a
// per-command overhead (the prediction).
//
//===----------------------------------------------------------------------===//

#ifndef KILNC_COSTMODEL_H
#define KILNC_COSTMODEL_H

#include "kiln/Compiler/Compile.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <string>
#include <vector>

namespace kilnc {

/// A GPU's datasheet peaks (dense, no sparsity).
struct GpuModel {
  const char *name;
  const char *description;
  /// FLOP/s: bf16 and f16 on tensor cores, f32 on CUDA cores (cuBLASLt's
  /// CUBLAS_COMPUTE_32F, Kiln's f32 products, uses no TF32).
  double tensorFlops, f32Flops;
  /// Bytes/s of device memory.
  double bandwidth;
};

/// The GPUs --gpu names: h100, h200, a100. Null for another name.
const GpuModel *findGpu(llvm::StringRef name);
/// "h100, h200, a100".
std::string gpuNames();

/// The fractions of the peaks commands reach, and what each command costs
/// beyond its work, fit to the H200 profile of GPT-2 small in bf16 of
/// 2026-11-30 (docs/performance.md, "The cost model"): its 216 products
/// other than the three vocabulary ones (then slowed by an unpadded
/// leading dimension) took 18.4 ms where the roofline gives 8.75; its
/// elementwise kernels over the f32 score matrices (805 MB read and
/// written) about 0.3 ms each where the bandwidth gives 0.17; commands
/// were 1.5 us apart on the stream. No attention command had run on a
/// GPU: its factor is an assumption.
struct Efficiency {
  double gemm = 0.5;
  double attention = 0.35;
  double memory = 0.55;
  double commandSeconds = 2e-6;
};

/// One command, costed.
struct CommandCost {
  std::string kind, what;
  double flops = 0, bytes = 0;
  /// At the peaks, with no overhead; and predicted.
  double boundSeconds = 0, seconds = 0;
  bool computeBound = false;
};

/// Each command of `program` (kernel names from `code`) costed on `gpu`.
std::vector<CommandCost> costProgram(const kiln::CudaProgram &program,
                                     const kiln::CUDACode &code,
                                     const GpuModel &gpu,
                                     const Efficiency &efficiency);

/// The report of every CUDA entry point of `model`: predicted time and lower
/// bound, by kind (commands, GFLOP, GB, time) and the 20 costliest commands.
void printCostReport(const kiln::CompiledModel &model, const GpuModel &gpu,
                     llvm::raw_ostream &os);

} // namespace kilnc

#endif // KILNC_COSTMODEL_H
