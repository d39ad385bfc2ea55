//===- Training.h - kilnc's training-spec options ---------------*- C++ -*-===//
//
// The flags that describe a training step (loss, optimizer, schedule,
// clipping, accumulation), the --train-config file that sets the same keys,
// and the passes they add.
//
//===----------------------------------------------------------------------===//

#ifndef KILNC_TRAINING_H
#define KILNC_TRAINING_H

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

/// Adds the passes from the imported model to `forward_grad` (gradients)
/// and, when a step was asked for, the training entry points, with dynamic
/// loss scaling when `lossScaling`.
void addTrainingPasses(mlir::PassManager &pm, bool lossScaling);

} // namespace kilnc

#endif // KILNC_TRAINING_H
