//===- Training.h - kilnc's training-spec options ---------------*- C++ -*-===//
//
// The flags that describe a training step (loss, optimizer, schedule,
// clipping, accumulation), the --train-config file that sets the same keys,
// and the passes they add.
//
//===----------------------------------------------------------------------===//

#ifndef KILNC_TRAINING_H
#define KILNC_TRAINING_H

#include "kiln/Compiler/Pipelines.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Error.h"

namespace kilnc {

llvm::cl::OptionCategory &trainingCategory();

/// Sets every training flag the command line did not give from the JSON
/// object in --train-config, if any.
llvm::Error applyTrainConfig();

/// Whether a training step was asked for (--optimizer).
bool trainingRequested();

/// Whether kilnc is to build a loss (--loss).
bool lossRequested();

/// Whether the optimizer state is to be sharded (--shard-optimizer).
bool shardedOptimizer();

/// Checks the training flags against each other; `gradients` is --gradients,
/// `lossScaling` whether the step scales its loss (--amp=fp16).
llvm::Error checkTrainingFlags(bool gradients, bool lossScaling);

/// The training pipeline's options from the flags: the passes from the
/// imported model to `forward_grad` (gradients) and, when a step was asked
/// for, the training entry points, with dynamic loss scaling when
/// `lossScaling`; `gradients` keeps forward_grad beside a step.
kiln::TrainingOptions trainingOptions(bool lossScaling, bool gradients);

/// For --trainable: marks every float initializer of `module` not among
/// `names` a buffer (kiln.buffer), which kiln-autodiff gives no gradient,
/// and clears the mark on those named; a name that is not a float
/// initializer is an error. No names: nothing changes.
llvm::Error markTrainable(mlir::ModuleOp module,
                          llvm::ArrayRef<std::string> names);

/// The names --trainable gives (from the flag, or from the file it names
/// with @FILE); none when the flag is not given.
llvm::Expected<std::vector<std::string>> trainableNames();

/// Prints, once per compilation, which float initializers the training
/// step trains and which it leaves alone (and why), as a note on stderr;
/// for a model that records no parameter roles, how to keep its buffers
/// fixed.
void noteTrainedParameters(mlir::ModuleOp module, llvm::StringRef inputFile,
                           bool trainableGiven);

} // namespace kilnc

#endif // KILNC_TRAINING_H
