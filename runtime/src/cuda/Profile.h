//===- Profile.h - device time of each command of an entry point -*- C++
//-*-===//
//
// KILN_CUDA_PROFILE=FILE: the CUDA backend times every command of every run
// on the device (a pair of events around each launch, gemm, copy and wait
// on the compute stream) and keeps FILE up to date after each run with the
// commands sorted by their device time, summed by kind and by kernel. The
// first run of an entry point (module load, cuBLASLt's first calls) is left
// out. Profiling runs the commands directly (no CUDA graph), so a run's
// total includes the launch gaps a graph would hide; a command's own time
// is what the GPU spent from its start event to its end event.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_SRC_CUDA_PROFILE_H
#define KILN_RUNTIME_SRC_CUDA_PROFILE_H

#include "ProfileReport.h"

#include "kiln/runtime/Status.h"

#include <cuda.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kiln::runtime::cuda {

/// The timing of one entry point's commands over its runs.
class CommandProfile {
public:
  /// What one command is, for the report.
  using Command = ProfiledCommand;

  /// Events for `commands`, created in the current context.
  static Status create(std::string entryName, std::vector<Command> commands,
                       std::unique_ptr<CommandProfile> &out);
  ~CommandProfile();

  /// Marks the start and the end of the whole run on `stream`.
  Status beginRun(CUstream stream);
  Status endRun(CUstream stream);
  /// Marks the start and the end of command `index` on `stream`.
  Status begin(size_t index, CUstream stream);
  Status end(size_t index, CUstream stream);
  /// After the stream finished the run: adds each command's time.
  Status accumulate();
  /// The report of this entry point, as FILE holds it.
  std::string report() const;

private:
  CommandProfile() = default;
  std::string entryName;
  std::vector<Command> commands;
  /// A start and an end event per command, then the run's.
  std::vector<CUevent> events;
  /// Whether command i is timed (all but collectives).
  std::vector<bool> timed;
  std::vector<double> totalMs;
  double runMs = 0;
  uint64_t runs = 0;
};

/// Writes the reports to `path` (replacing it), with a header naming the
/// bundle, target and device.
Status writeProfile(const std::string &path, const std::string &header,
                    const std::vector<const CommandProfile *> &profiles);

} // namespace kiln::runtime::cuda

#endif // KILN_RUNTIME_SRC_CUDA_PROFILE_H
