//===- CudaSession.h - a bundle made ready to run on a CUDA GPU -*- C++ -*-===//
//
// The CUDA backend's session, on the driver API: one device (its primary
// context), one non-blocking stream, the module of the image that fits the
// device, the arena and the parameters in device memory, fixed device
// staging buffers for each entry point's inputs and outputs with pinned host
// mirrors, and every gemm planned with cuBLASLt at creation. An entry
// point's first run executes its commands directly, the second captures
// them as a CUDA graph and later runs replay it.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_SRC_CUDA_CUDASESSION_H
#define KILN_RUNTIME_SRC_CUDA_CUDASESSION_H

#include "ExternalParameters.h"
#include "Backend.h"
#include "Gemm.h"
#include "TensorBinding.h"
#include "kiln/runtime/bundle.pb.h"

#include <cublasLt.h>
#include <cuda.h>

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace kiln::runtime::cuda {

/// How a session uses the machine.
struct CudaOptions {
  /// The device ordinal. A launcher that runs one process per GPU sets it
  /// from the local rank.
  int device = 0;
  /// Capture each entry point as a CUDA graph on its second run and replay
  /// it from then on; off runs every command directly, for debugging.
  bool graphs = true;

  /// KILN_CUDA_DEVICE (default 0) and KILN_CUDA_GRAPHS (0 or 1, default 1).
  static Status fromEnvironment(CudaOptions &out);
};

class CudaSession : public Backend {
public:
  static Status create(const BackendBundle &bundle,
                       const std::string &targetName,
                       const CudaOptions &options,
                       std::unique_ptr<CudaSession> &out);
  ~CudaSession() override;

  Status run(const std::string &entryName, const kiln_tensor_t *inputs,
             size_t inputCount, const kiln_tensor_t *outputs,
             size_t outputCount) override;
  uint64_t arenaBytes() const override { return arenaSize; }
  Status getParameter(const std::string &name, void *data,
                      size_t byteSize) override;
  Status setParameter(const std::string &name, const void *data,
                      size_t byteSize) override;

private:
  /// A kernel launch with its arguments fixed: the device pointers and the
  /// parameter array cuLaunchKernel reads them through.
  struct Launch {
    CUfunction function = nullptr;
    unsigned grid[3] = {1, 1, 1};
    unsigned block[3] = {1, 1, 1};
    std::vector<CUdeviceptr> pointers;
    std::vector<void *> arguments;
  };
  /// One command of a program: a launch or a gemm; `description` names it
  /// in messages ("kernel 'k'" or the gemm's sizes).
  struct Step {
    std::string description;
    std::unique_ptr<Launch> launch;
    std::unique_ptr<GemmPlan> gemm;
  };
  /// Where each input and output of an entry point lives on the device and
  /// in its pinned host mirror: at the same offsets, inputs first, so each
  /// direction is one copy.
  struct Staging {
    std::vector<uint64_t> inputOffsets, outputOffsets;
    std::vector<uint64_t> inputBytes, outputBytes;
    uint64_t inputEnd = 0, outputBegin = 0, outputEnd = 0;
    CUdeviceptr device = 0;
    uint8_t *host = nullptr;
  };
  struct EntryPlan {
    explicit EntryPlan(const bundle::EntryPoint &entry) : tensors(entry) {}
    EntryTensors tensors;
    Staging staging;
    std::vector<Step> steps;
    /// Successful runs so far: the first runs the steps directly, the
    /// second captures them.
    uint64_t runs = 0;
    CUgraph graph = nullptr;
    CUgraphExec graphExec = nullptr;
  };

  CudaSession() = default;
  Status initialize(const BackendBundle &bundle, const std::string &targetName,
                    const CudaOptions &options);
  Status parseManifest(const BackendBundle &bundle,
                       const std::string &targetName);
  Status openDevice();
  Status loadModule(const BackendBundle &bundle);
  Status allocateArena();
  Status uploadParameters(const BackendBundle &bundle);
  Status planEntryPoint(const bundle::EntryPoint &entry, EntryPlan &plan);
  Status allocateStaging(const bundle::EntryPoint &entry, Staging &staging);
  Status planLaunch(const bundle::KernelLaunch &launch, const EntryPlan &plan,
                    Step &step);
  CUdeviceptr deviceAddress(const bundle::BufferRef &buffer,
                            const EntryPlan &plan) const;
  /// Runs `plan` on the tensors its last bind() recorded.
  Status runBound(EntryPlan &plan);
  Status executeSteps(EntryPlan &plan);
  Status enqueueSteps(const EntryPlan &plan);
  Status captureGraph(EntryPlan &plan);
  Status findParameter(const std::string &name, size_t byteSize,
                       const void *data, CUdeviceptr &address);

  std::string bundleName;
  std::string targetName;
  bundle::Manifest manifest;
  const bundle::Target *target = nullptr;
  CudaOptions options;

  CUdevice device = 0;
  std::string deviceName;
  int computeMajor = 0, computeMinor = 0;
  /// The device's largest grid, per dimension.
  int maxGrid[3] = {0, 0, 0};
  CUcontext context = nullptr;
  CUstream stream = nullptr;
  CUmodule module = nullptr;
  /// target->kernels(i)'s function.
  std::vector<CUfunction> functions;
  cublasLtHandle_t blasLt = nullptr;
  GemmWorkspace workspace;

  CUdeviceptr arenaAllocation = 0, arenaBase = 0;
  uint64_t arenaSize = 0;
  CUdeviceptr parameterBase = 0;
  std::unordered_map<std::string, uint32_t> parameterIndex;
  std::unique_ptr<ExternalParameters> external;

  std::vector<EntryPlan> plans;
  std::unordered_map<std::string, size_t> planIndex;
  std::mutex mutex;
};

} // namespace kiln::runtime::cuda

#endif // KILN_RUNTIME_SRC_CUDA_CUDASESSION_H
