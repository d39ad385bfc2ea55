//===- Pipelines.h - Kiln's pass pipelines, built and registered -*- C++
//-*-===//
//
// The pass pipelines kilnc runs, built from option structs so that every
// tool runs the same passes: the training pipeline (loss, gradients,
// training step) on the imported model, then for one target the compile
// pipeline (index checks, the tensor pipeline, the buffer pipeline), whose
// result the target's code generator takes. Both are registered with MLIR's
// pass registry, so that
//
//   kiln-opt model.mlir --kiln-train-pipeline="optimizer=adamw lr=0.001" \
//       --kiln-compile-pipeline="target=cpu"
//
// runs exactly what kilnc runs (kilnc --dump-pipeline prints that command).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILER_PIPELINES_H
#define KILN_COMPILER_PIPELINES_H

#include "kiln/Compiler/Compile.h"

#include "mlir/Pass/PassManager.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>

namespace kiln {

/// The training pipeline's options; the names and defaults of kilnc's
/// training flags (docs/kilnc.md), which are also the pipeline's textual
/// option keys.
struct TrainingOptions {
  /// Builds this loss (cross_entropy, mse, bce_with_logits) of `lossOn`
  /// against a new input `labels`; empty: the model computes `lossOutput`.
  std::string loss;
  std::string lossOn;
  std::string labels = "labels";
  std::string lossOutput = "loss";
  int64_t lossClassAxis = 1;
  int64_t ignoreIndex = -100;
  double labelSmoothing = 0.0;
  /// Parameters whose name matches this regular expression get no gradient.
  std::string freeze;
  /// sgd, adam, adamw or adagrad: builds train_step (and eval_step); empty:
  /// the gradients alone (forward_grad).
  std::string optimizer;
  /// With an optimizer, keeps forward_grad as an entry point too.
  bool keepGradients = false;
  double lr = 0.01;
  double momentum = 0.0;
  bool nesterov = false;
  double weightDecay = 0.0;
  double beta1 = 0.9;
  double beta2 = 0.999;
  /// Negative: torch's default for the optimizer.
  double eps = -1.0;
  double lrDecay = 0.0;
  double initialAccumulator = 0.0;
  std::string schedule = "constant";
  int64_t warmupSteps = 0;
  int64_t totalSteps = 0;
  double gradClip = 0.0;
  int64_t gradAccum = 1;
  bool dataParallel = false;
  int64_t bucketBytes = 25 << 20;
  int64_t shardOptimizer = 0;
  /// The initial dynamic loss scale of an fp16 step; 0: no loss scaling.
  double lossScale = 0.0;
  int64_t lossScaleGrowthInterval = 2000;
};

/// Adds the training pipeline: the loss (kiln-add-loss), GELU and attention
/// recognised, composite ops kept for their own gradient rules, then
/// kiln-autodiff and, with an optimizer, kiln-train-step.
void buildTrainingPipeline(mlir::OpPassManager &pm,
                           const TrainingOptions &options);

/// The options that differ from the defaults, as `key=value` separated by
/// spaces (values with spaces in braces): the textual form
/// parseTrainingOptions reads and --kiln-train-pipeline takes.
std::string printTrainingOptions(const TrainingOptions &options);
llvm::Expected<TrainingOptions> parseTrainingOptions(llvm::StringRef text);

/// Adds what compileModel runs on the module of one target (the CPU, or
/// CUDA's with `options.cpuTarget` false), before the target's code
/// generator: kiln-check-indices, the tensor pipeline and the buffer
/// pipeline (and, with emulateCuda, the CUDA kernels' outlining for the
/// CPU). `options` names exactly one target.
void buildCompilePipeline(mlir::OpPassManager &pm,
                          const CompileOptions &options);

/// The pieces of the compile pipeline, as compileModel runs them (it reads
/// the entry points' signatures between the index checks and the tensor
/// pipeline, and counts kernels on the way: `counts`, when given).
void buildIndexChecks(mlir::OpPassManager &pm);
void buildTensorPipeline(mlir::OpPassManager &pm, const CompileOptions &options,
                         bool forCuda,
                         llvm::StringMap<KernelCounts> *counts = nullptr);
void buildBufferPipeline(mlir::OpPassManager &pm, const CompileOptions &options,
                         bool forCpu, Precision precision,
                         llvm::StringMap<KernelCounts> *counts = nullptr);

/// The textual form of the compile pipeline's options for one target
/// (`target=cpu|cuda`, `amp=`, `cuda-attention=`, `rematerialize`,
/// `emulate-cuda`), and its reading.
std::string printCompileOptions(const CompileOptions &options);
llvm::Expected<CompileOptions> parseCompileOptions(llvm::StringRef text);

/// Registers kiln-train-pipeline and kiln-compile-pipeline.
void registerPipelines();

} // namespace kiln

#endif // KILN_COMPILER_PIPELINES_H
