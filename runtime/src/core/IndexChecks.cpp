//===- IndexChecks.cpp - the index counts compiled steps return -----------===//

#include "core/IndexChecks.h"

#include <cstring>

namespace kiln::runtime {

IndexChecks::IndexChecks(const bundle::Manifest &manifest) {
  for (const bundle::EntryPoint &entry : manifest.entry_points()) {
    for (const bundle::TensorSpec &output : entry.outputs()) {
      const std::string &name = output.name();
      if (name.rfind(kIndexCheckPrefix, 0) != 0)
        continue;
      // "kiln.index_check|INPUT|RANGE"; the range may name a parameter
      // that holds '|', so the input ends at the first one.
      std::string rest = name.substr(std::strlen(kIndexCheckPrefix));
      size_t bar = rest.find('|');
      Check check{name, rest.substr(0, bar),
                  bar == std::string::npos ? "its range"
                                           : rest.substr(bar + 1)};
      byEntry[entry.name()].push_back(std::move(check));
    }
  }
}

Status IndexChecks::check(const std::string &entryName,
                          const kiln_tensor_t *outputs,
                          size_t outputCount) const {
  auto found = byEntry.find(entryName);
  if (found == byEntry.end())
    return Status();
  for (const Check &check : found->second) {
    for (size_t i = 0; i < outputCount; ++i) {
      const kiln_tensor_t &output = outputs[i];
      if (!output.name || check.output != output.name ||
          output.element_type != KILN_ELEMENT_TYPE_F32 ||
          output.byte_size != sizeof(float))
        continue;
      float count = 0;
      std::memcpy(&count, output.data, sizeof(count));
      if (count == 0)
        continue;
      long long values = static_cast<long long>(count);
      return invalidArgument(
          "entry point '", entryName, "': input '", check.input, "' holds ",
          values, values == 1 ? " value" : " values", " outside ", check.range,
          " (PyTorch would raise an index error; a run computes with such "
          "an index clamped into range, so its results are not to be used)");
    }
  }
  return Status();
}

} // namespace kiln::runtime
