//===- Train.h - kiln-run's training loop -----------------------*- C++ -*-===//
//
// `kiln-run MODEL.kiln --data TRAIN.npz --steps N`: runs the bundle's
// train_step (after K-1 runs of accumulate_step for a bundle compiled with
// kilnc --grad-accum=K) over a seeded stream of batches, reports each step's
// loss, learning rate and throughput (a progress line on a terminal, plain
// lines otherwise, a JSON-lines metrics file), writes checkpoints and resumes
// from them. docs/runtime.md describes the flags, the metrics and the
// checkpoints.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TOOLS_KILN_RUN_TRAIN_H
#define KILN_TOOLS_KILN_RUN_TRAIN_H

#include "Driver.h"

namespace kiln::run {

/// Trains as `options` (--data, --steps and the training flags) say.
bool train(const Options &options, const kiln_bundle_t *bundle);

} // namespace kiln::run

#endif // KILN_TOOLS_KILN_RUN_TRAIN_H
