//===- IndexChecks.h - the index counts compiled steps return ---*- C++ -*-===//
//
// kilnc (kiln-check-indices) makes an entry point that indexes with a value
// its caller gives (token ids, class labels) also return, for each such
// input, how many of its elements were out of range: an f32 scalar output
// named "kiln.index_check|INPUT|RANGE". After each run the C API reads them
// from the caller's outputs and fails the run, naming the input, when one
// is not zero (docs/bundle-format.md).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_SRC_INDEXCHECKS_H
#define KILN_RUNTIME_SRC_INDEXCHECKS_H

#include "kiln/runtime.h"
#include "kiln/runtime/Manifest.h"
#include "kiln/runtime/Status.h"

#include <map>
#include <string>
#include <vector>

namespace kiln::runtime {

/// The prefix of the outputs; lib/Transforms (kIndexCheckPrefix) writes it.
inline constexpr const char *kIndexCheckPrefix = KILN_INDEX_CHECK_PREFIX;

/// The index checks of each entry point of a bundle.
class IndexChecks {
public:
  explicit IndexChecks(const bundle::Manifest &manifest);

  /// After a run of `entryName` wrote `outputs`: an InvalidArgument error
  /// naming the first input with indices out of range, else OK.
  Status check(const std::string &entryName, const kiln_tensor_t *outputs,
               size_t outputCount) const;

private:
  struct Check {
    std::string output, input, range;
  };
  std::map<std::string, std::vector<Check>> byEntry;
};

} // namespace kiln::runtime

#endif // KILN_RUNTIME_SRC_INDEXCHECKS_H
