//===- Driver.h - what kiln-run's parts share -------------------*- C++ -*-===//
//
// The command line's options, error reporting (one line on stderr, then the
// caller returns false), and the C API helpers that running one entry point
// and training both use: entry point lookup, output allocation, sessions.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TOOLS_KILN_RUN_DRIVER_H
#define KILN_TOOLS_KILN_RUN_DRIVER_H

#include "kiln/runtime.h"
#include "kiln/runtime/Npy.h"

#include <memory>
#include <string>
#include <vector>

namespace kiln::run {

using kiln::runtime::NamedArray;

/// kiln-run's version, recorded in checkpoints.
inline constexpr const char *kVersion = "0.1.0";

/// What the command line asks for.
struct Options {
  std::string bundlePath;
  bool info = false;
  std::string entry;
  std::string inputs;
  std::string outputs;
  std::string params;
  std::string data;
  std::string saveParams;
  long steps = 0;
  long seed = 0;
  long logEvery = 1;
  bool noShuffle = false;
  bool dropLast = false;
  std::string metrics;
  std::string tensorboard;
  std::string checkpointDir;
  long checkpointEvery = 0; // 0: only at the end
  long keepCheckpoints = 0; // 0: keep every checkpoint
  bool haltOnNonfinite = false;
  bool resume = false;
  bool compress = false;
  /// A target name, or "auto": the CUDA target where it can run, else the
  /// CPU (see openSession).
  std::string target = "auto";
  long repeat = 1;
  bool printMemory = false;
  /// Seconds a rank waits for one collective before it gives up; 0: no
  /// limit.
  long collectiveTimeout = 300;
  bool help = false;
};

/// Prints "kiln-run: error: MESSAGE" to stderr, on a line of its own even
/// while a progress line is drawn; under a launcher with several ranks
/// "kiln-run: error: rank R: MESSAGE".
void printError(const std::string &message);

/// The same for "kiln-run: warning: MESSAGE" and "kiln-run: note: MESSAGE",
/// which do not stop the run.
void printWarning(const std::string &message);
void printNote(const std::string &message);

/// This process's place among the ranks (kiln_distributed_init); a single
/// rank until setDistributedInfo.
const kiln_distributed_info_t &distributedInfo();
void setDistributedInfo(const kiln_distributed_info_t &info);

/// Tells printError whether a progress line without its newline is on
/// stdout; it ends that line first.
void setProgressLineOpen(bool open);
bool isProgressLineOpen();

/// Prints the C API's message for a failed call (prefixed by `context` when
/// given); returns false.
bool failed(kiln_status_t status, const std::string &context = "");

/// "x: f32[8,32]".
std::string describeTensor(const kiln_tensor_info_t &tensor);

/// The entry point --entry names (or `fallback` when --entry is not given
/// and `fallback` is not empty), or the only one there is.
bool selectEntryPoint(const Options &options, const kiln_bundle_t *bundle,
                      size_t &index, kiln_entry_point_info_t &entry,
                      const std::string &fallback = "");

/// Allocates one array per output of entry point `index`, in its order.
bool allocateOutputs(const kiln_bundle_t *bundle, size_t index,
                     const kiln_entry_point_info_t &entry,
                     std::vector<NamedArray> &arrays);

/// Describes `arrays` as kiln_tensor_t; the result points into `arrays`.
std::vector<kiln_tensor_t> tensorsOf(std::vector<NamedArray> &arrays);

using Session = std::unique_ptr<kiln_session_t, void (*)(kiln_session_t *)>;

/// A session on --target with the --params values loaded. --target auto
/// picks the bundle's CUDA target when the CUDA backend loads and finds a
/// device, else its CPU target; a named target that cannot run is an error.
/// `target`, when given, receives the target's name.
bool openSession(const Options &options, const kiln_bundle_t *bundle,
                 Session &session, std::string *target = nullptr);

/// Whether the bundle's target called `name` is a CUDA target (one with
/// code images).
bool isCudaTarget(const kiln_bundle_t *bundle, const std::string &name,
                  bool &cuda);

} // namespace kiln::run

#endif // KILN_TOOLS_KILN_RUN_DRIVER_H
