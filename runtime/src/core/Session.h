//===- Session.h - a bundle made ready to run on the CPU --------*- C++ -*-===//

#ifndef KILN_RUNTIME_SRC_SESSION_H
#define KILN_RUNTIME_SRC_SESSION_H

#include "bundle/MappedFile.h"
#include "core/Backend.h"
#include "core/ExternalParameters.h"
#include "core/FixedParameters.h"
#include "core/TensorBinding.h"
#include "cpu/CpuCode.h"
#include "kiln/runtime.h"
#include "kiln/runtime/BundleReader.h"
#include "kiln/runtime/Bytes.h"

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace kiln::runtime {

/// Loads a bundle's CPU code, owns the arena and the parameters, and runs
/// entry points by executing their command lists.
class CpuSession : public Backend {
public:
  /// Prepares `bundle` to run on the target called `targetName`.
  static Status create(std::shared_ptr<const BundleReader> bundle,
                       const std::string &targetName,
                       std::unique_ptr<CpuSession> &out);

  /// Validates the caller's tensors against entry point `entryName` and runs
  /// its commands. Serialized with every other call on this session.
  Status run(const std::string &entryName, const kiln_tensor_t *inputs,
             size_t inputCount, const kiln_tensor_t *outputs,
             size_t outputCount) override {
    return runEntry(entryName, inputs, inputCount, /*staged=*/false, outputs,
                    outputCount);
  }

  /// Copies the inputs into a staging buffer of the entry point's under a
  /// lock of its own, so a loader thread stages the next batch while a run
  /// goes on.
  Status stageInputs(const std::string &entryName, const kiln_tensor_t *inputs,
                     size_t inputCount) override;
  /// Runs on the oldest staged buffer.
  Status runStaged(const std::string &entryName, const kiln_tensor_t *outputs,
                   size_t outputCount) override {
    return runEntry(entryName, nullptr, 0, /*staged=*/true, outputs,
                    outputCount);
  }

  /// The bytes of the arena this session allocated.
  uint64_t arenaBytes() const override { return arena.size(); }

  Status getParameter(const std::string &name, void *data,
                      size_t byteSize) override;
  Status setParameter(const std::string &name, const void *data,
                      size_t byteSize) override;

private:
  /// One buffer pointer a kernel call takes from the caller's tensors, filled
  /// in on every run; the others are fixed when the session is created.
  struct CallerBuffer {
    uint32_t slot;
    bool isOutput;
    uint32_t index;
    uint64_t offset;
  };
  struct KernelInvocation {
    KernelFunction function;
    std::vector<void *> buffers;
    std::vector<CallerBuffer> callerBuffers;
  };
  /// Staged inputs: a buffer per slot (allocated by the first stage), the
  /// run reading its slot until it ends.
  struct StagedInputs {
    explicit StagedInputs(const bundle::EntryPoint &entry)
        : stager(entry, kTensorAlignment, InputStager::kMaxWaiting + 1) {}
    InputStager stager;
    /// stager.slotCount() buffers, or none before the first stage.
    std::unique_ptr<AlignedBuffer[]> buffers;
    /// Each input's address in the slot a run reads.
    std::vector<void *> runningData;
  };
  struct EntryPlan {
    explicit EntryPlan(const bundle::EntryPoint &entry)
        : tensors(entry), stage(entry) {}
    EntryTensors tensors;
    std::vector<KernelInvocation> invocations;
    StagedInputs stage;
  };

  CpuSession() = default;
  Status loadCode(const std::string &targetName);
  Status allocateArena();
  Status mapParameters();
  Status planEntryPoint(const bundle::EntryPoint &entry, EntryPlan &plan);
  Status findParameter(const std::string &name, size_t byteSize,
                       uint8_t *&storage);
  EntryPlan *findPlan(const std::string &entryName);
  /// run() and runStaged(): checks the caller's tensors (the outputs alone
  /// when `staged`) and runs on them, or on the oldest staged inputs.
  Status runEntry(const std::string &entryName, const kiln_tensor_t *inputs,
                  size_t inputCount, bool staged, const kiln_tensor_t *outputs,
                  size_t outputCount);
  /// Runs `plan`'s commands on these inputs and outputs (entry order).
  void execute(EntryPlan &plan, const std::vector<void *> &inputData,
               const std::vector<void *> &outputData);

  std::shared_ptr<const BundleReader> bundle;
  std::unique_ptr<CpuCode> code;
  /// Every kernel the target lists, looked up once.
  std::unordered_map<std::string, KernelFunction> kernels;
  AlignedBuffer arena;
  PrivateMapping weightsMapping;
  AlignedBuffer weightsCopy;
  /// The parameters without a stored value (zeros until set).
  AlignedBuffer unstored;
  std::vector<uint8_t *> parameterData;
  std::unique_ptr<ExternalParameters> external;
  std::unique_ptr<FixedParameters> fixed;
  std::unordered_map<std::string, uint32_t> parameterIndex;
  std::vector<EntryPlan> plans;
  std::unordered_map<std::string, size_t> planIndex;
  std::mutex mutex;
  /// Guards the plans' StagedInputs (taken after `mutex` where both are).
  std::mutex stageMutex;
};

} // namespace kiln::runtime

#endif // KILN_RUNTIME_SRC_SESSION_H
