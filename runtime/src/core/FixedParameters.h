//===- FixedParameters.h - parameters whose value is code ------*- C++ -*-===//
//
// kilnc compiles the value of some parameters into the code (a mask buffer
// that makes attention causal; Parameter.fixed in the bundle format). Such
// a parameter keeps the value the bundle stores: setting it to the same
// bytes (a checkpoint, the model's own state_dict) is fine, any other value
// is refused, since the code would go on computing with the old one.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_SRC_FIXEDPARAMETERS_H
#define KILN_RUNTIME_SRC_FIXEDPARAMETERS_H

#include "kiln/runtime/Status.h"
#include "kiln/runtime/bundle.pb.h"

#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace kiln::runtime {

class FixedParameters {
public:
  /// `weights`: the bundle's weights section (null where it is empty).
  /// The values are copied: a session outlives its bundle.
  FixedParameters(const bundle::Manifest &manifest, const uint8_t *weights) {
    for (int i = 0; i < manifest.parameters_size(); ++i) {
      const bundle::Parameter &parameter = manifest.parameters(i);
      if (!parameter.fixed())
        continue;
      // The reader checked that a fixed parameter is stored or zeros.
      std::vector<uint8_t> &value = values[i];
      value.assign(parameter.size_bytes(), 0);
      if (parameter.init() == bundle::Parameter::WEIGHTS &&
          parameter.size_bytes() > 0)
        std::memcpy(value.data(), weights + parameter.weights_offset(),
                    parameter.size_bytes());
    }
  }

  /// Whether parameter `index` may take `data` (its size already checked).
  Status check(const bundle::Manifest &manifest, int index, const void *data,
               size_t byteSize) const {
    auto found = values.find(index);
    if (found == values.end() || byteSize == 0 ||
        std::memcmp(found->second.data(), data, byteSize) == 0)
      return Status();
    return invalidArgument(
        "parameter '", manifest.parameters(index).tensor().name(),
        "' is fixed: kilnc compiled its value into the bundle's code (a "
        "causal attention mask), so it cannot take another; recompile the "
        "model with the new value instead");
  }

private:
  std::map<int, std::vector<uint8_t>> values;
};

} // namespace kiln::runtime

#endif // KILN_RUNTIME_SRC_FIXEDPARAMETERS_H
