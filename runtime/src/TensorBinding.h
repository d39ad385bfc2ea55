//===- TensorBinding.h - a run's tensors and its entry point ----*- C++ -*-===//
//
// Every backend checks a run's tensors the same way before anything runs:
// matched by name, each input and output exactly once, with the declared
// element type, shape and byte size, aligned data. The messages name the
// tensor at fault.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_SRC_TENSORBINDING_H
#define KILN_RUNTIME_SRC_TENSORBINDING_H

#include "kiln/runtime.h"
#include "kiln/runtime/Status.h"
#include "kiln/runtime/bundle.pb.h"

#include <string>
#include <unordered_map>
#include <vector>

namespace kiln::runtime {

/// The inputs and outputs of one entry point, bound to a run's tensors. The
/// scratch is sized once, so binding allocates nothing.
class EntryTensors {
public:
  explicit EntryTensors(const bundle::EntryPoint &entry);

  /// Checks the caller's tensors and records their data pointers, in the
  /// entry point's order, in inputData() and outputData().
  Status bind(const kiln_tensor_t *inputs, size_t inputCount,
              const kiln_tensor_t *outputs, size_t outputCount);

  const std::vector<void *> &inputData() const { return inputs.data; }
  const std::vector<void *> &outputData() const { return outputs.data; }

private:
  struct Side {
    const google::protobuf::RepeatedPtrField<bundle::TensorSpec> *specs;
    std::unordered_map<std::string, uint32_t> index;
    std::vector<void *> data;
    std::vector<char> seen;
  };
  static void
  prepare(const google::protobuf::RepeatedPtrField<bundle::TensorSpec> &specs,
          Side &side);
  static Status bindSide(const char *kind, Side &side,
                         const kiln_tensor_t *tensors, size_t count);

  const bundle::EntryPoint *entry;
  Side inputs, outputs;
};

/// NotFound for a run of `entryName`, listing the entry points there are.
Status entryPointNotFound(const std::string &bundleName,
                          const bundle::Manifest &manifest,
                          const std::string &entryName);

/// "'a', 'b'" for the targets of `manifest`.
std::string targetNames(const bundle::Manifest &manifest);

} // namespace kiln::runtime

#endif // KILN_RUNTIME_SRC_TENSORBINDING_H
