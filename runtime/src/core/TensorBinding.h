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

#include <deque>
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
  /// The same for one side alone (a run of staged inputs binds only its
  /// outputs).
  Status bindInputs(const kiln_tensor_t *inputs, size_t inputCount);
  Status bindOutputs(const kiln_tensor_t *outputs, size_t outputCount);

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

/// Where tensors of `specs` lie in one staging area: from `begin`, each at
/// an offset aligned to `alignment`, in their order.
struct TensorLayout {
  TensorLayout() = default;
  TensorLayout(
      const google::protobuf::RepeatedPtrField<bundle::TensorSpec> &specs,
      uint64_t begin, uint64_t alignment);
  /// Copies the tensors at `data` (in the specs' order) into `area`, an
  /// area laid out so, and back out.
  void gather(const std::vector<void *> &data, uint8_t *area) const;
  void scatter(const uint8_t *area, const std::vector<void *> &data) const;

  std::vector<uint64_t> offsets, bytes;
  /// Where the first tensor may start, and one past the last tensor's last
  /// byte (`begin` for none).
  uint64_t begin = 0, end = 0;
};

/// Inputs staged for an entry point's next runs (kiln_session_stage_inputs):
/// checked as a run checks them, then copied into one of a backend's staging
/// slots, so the caller may reuse its tensors at once. Staged sets wait in
/// order, at most kMaxWaiting at a time, and each run takes the oldest. The
/// stager has its own binding, so staging may go on while a run of the entry
/// point binds its tensors; the backend serializes the calls on one stager.
class InputStager {
public:
  /// Two: a loader thread stages set k + 1 as soon as the run of set k has
  /// begun, possibly before that run has taken set k.
  static constexpr size_t kMaxWaiting = 2;

  /// `slots` buffers: kMaxWaiting where a run is done with its slot once it
  /// took it, kMaxWaiting + 1 where the run reads its slot until it ends.
  InputStager(const bundle::EntryPoint &entry, uint64_t alignment, size_t slots)
      : tensors(entry), layout(entry.inputs(), 0, alignment), slots(slots) {}

  /// A slot that no waiting set and no run holds; InvalidArgument when
  /// kMaxWaiting sets wait already.
  Status freeSlot(size_t &slot) const;
  /// Checks `inputs` and copies them to `destination` (getLayout().end
  /// bytes) at the layout's offsets.
  Status copy(const kiln_tensor_t *inputs, size_t inputCount,
              uint8_t *destination);
  /// The set in `slot` now waits for a run.
  void push(size_t slot) { waiting.push_back(slot); }
  /// The slot of the oldest waiting set, which the run holds until
  /// release(); InvalidArgument when none waits.
  Status take(size_t &slot);
  void release() { held = kNone; }

  const TensorLayout &getLayout() const { return layout; }
  size_t slotCount() const { return slots; }

private:
  static constexpr size_t kNone = ~size_t(0);
  EntryTensors tensors;
  TensorLayout layout;
  size_t slots;
  std::deque<size_t> waiting;
  size_t held = kNone;
};

/// NotFound for a run of `entryName`, listing the entry points there are.
Status entryPointNotFound(const std::string &bundleName,
                          const bundle::Manifest &manifest,
                          const std::string &entryName);

/// "'a', 'b'" for the targets of `manifest`.
std::string targetNames(const bundle::Manifest &manifest);

} // namespace kiln::runtime

#endif // KILN_RUNTIME_SRC_TENSORBINDING_H
