//===- ProfileReport.h - the text of a KILN_CUDA_PROFILE file ----*- C++
//-*-===//
//
// What a profile says about one entry point, from its commands and their
// summed device times. Apart from Profile.h's events so that the report's
// format, which bench/gpu_train.py --profile reads back, is tested without
// a GPU (test/runtime/ProfileReportTest.cpp against
// test/bench/profile-sample.txt, the file the benchmark's parser is tested
// on).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_SRC_CUDA_PROFILEREPORT_H
#define KILN_RUNTIME_SRC_CUDA_PROFILEREPORT_H

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::runtime::cuda {

/// What one command is, for the report.
struct ProfiledCommand {
  /// "kernel", "gemm", "attention", "layer_norm", "copy", "wait" or
  /// "collectives" (not timed: they run on the communication stream; the
  /// waits for them are).
  std::string kind;
  /// The kernel's name, or the gemm's, attention's or layer norm's sizes
  /// and types: what the report sums commands by (copies and waits have
  /// none).
  std::string what;
  /// The step's description, with a launch's grid and block.
  std::string description;
};

/// The report of entry point `entryName` after `runs` timed runs: the
/// stream's time (`runMs`, summed over the runs), then the commands'
/// (`totalMs[i]`, summed over the runs) by kind, by what they run (the 30
/// longest) and one by one (the 40 longest).
std::string profileReport(const std::string &entryName,
                          const std::vector<ProfiledCommand> &commands,
                          const std::vector<double> &totalMs, double runMs,
                          uint64_t runs);

/// The profile file: `header` (one line naming the bundle, target and
/// device), then each entry point's report after an empty line.
std::string profileText(const std::string &header,
                        const std::vector<std::string> &reports);

} // namespace kiln::runtime::cuda

#endif // KILN_RUNTIME_SRC_CUDA_PROFILEREPORT_H
