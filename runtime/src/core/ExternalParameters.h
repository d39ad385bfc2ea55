//===- ExternalParameters.h - parameters the caller must set ----*- C++ -*-===//
//
// A bundle compiled with --external-weights stores no initial value for its
// trainable parameters: the caller sets each before the first run. Running
// with one unset would compute with zeros, so both backends refuse it.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_SRC_EXTERNALPARAMETERS_H
#define KILN_RUNTIME_SRC_EXTERNALPARAMETERS_H

#include "kiln/runtime/Status.h"
#include "kiln/runtime/bundle.pb.h"

#include <algorithm>
#include <string>
#include <vector>

namespace kiln::runtime {

class ExternalParameters {
public:
  explicit ExternalParameters(const bundle::Manifest &manifest)
      : manifest(manifest) {
    for (int i = 0; i < manifest.parameters_size(); ++i)
      if (manifest.parameters(i).init() == bundle::Parameter::EXTERNAL)
        unset.push_back(i);
  }

  /// Parameter `index` now has a value.
  void markSet(int index) {
    unset.erase(std::remove(unset.begin(), unset.end(), index), unset.end());
  }

  /// An error naming the first parameter still without a value.
  Status checkAllSet(const std::string &bundleName) const {
    if (unset.empty())
      return Status();
    return invalidArgument(
        bundleName, ": parameter '",
        manifest.parameters(unset[0]).tensor().name(), "' has no value (",
        unset.size(),
        " parameters in all): the bundle was compiled with --external-weights, "
        "so every trainable parameter must be set before the first run "
        "(kiln-run --params FILE)");
  }

private:
  const bundle::Manifest &manifest;
  std::vector<int> unset;
};

} // namespace kiln::runtime

#endif // KILN_RUNTIME_SRC_EXTERNALPARAMETERS_H
