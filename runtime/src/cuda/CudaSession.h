//===- CudaSession.h - a bundle made ready to run on a CUDA GPU -*- C++ -*-===//
//
// The CUDA backend's session, on the driver API: one device (its primary
// context), one non-blocking stream, the module of the image that fits the
// device, the arena (followed, in the same allocation, by cuBLASLt's
// workspace when there are gemms) and the parameters in device memory, fixed
// device staging buffers for each entry point's inputs and outputs with
// pinned host mirrors, and every gemm planned with cuBLASLt at creation. An
// entry point's first run executes its commands directly, the second
// captures them as a CUDA graph and later runs replay it.
//
// A bundle whose programs average buffers over the ranks (AllReduceMean)
// also gets an NCCL communicator of all ranks, bootstrapped through the
// host's broadcast, and a second stream: each run of consecutive
// all-reduces forks onto it after the commands before it, as one NCCL group
// (which NCCL issues in as few launches as it can), and the CollectiveWait
// of each of its requests joins it back, which a graph captures as well. A
// run then waits for its stream in bounded polls that also watch NCCL for
// errors, so that a rank whose peer died or hung fails with a message
// instead of waiting forever.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_SRC_CUDA_CUDASESSION_H
#define KILN_RUNTIME_SRC_CUDA_CUDASESSION_H

#include "Attention.h"
#include "CudnnAttention.h"
#include "Gemm.h"
#include "LayerNormPlan.h"
#include "Profile.h"
#include "core/Backend.h"
#include "core/ExternalParameters.h"
#include "core/FixedParameters.h"
#include "core/TensorBinding.h"
#include "kiln/runtime/bundle.pb.h"

#include <cublasLt.h>
#include <cuda.h>
#include <nccl.h>

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace kiln::runtime::cuda {

/// How a session uses the machine.
struct CudaOptions {
  /// The device ordinal, or -1: the rank's local rank modulo the number of
  /// devices, so that the ranks a launcher starts on one node take one GPU
  /// each (device 0 for a single rank).
  int device = -1;
  /// Capture each entry point as a CUDA graph on its second run and replay
  /// it from then on; off runs every command directly, for debugging.
  bool graphs = true;
  /// Wait for the stream after every command, so that a fault on the device
  /// names the command that caused it (runs without graphs; for debugging).
  bool syncCommands = false;
  /// Where to write the device time of each command (empty: no profile);
  /// profiling runs without graphs. See Profile.h.
  std::string profilePath;
  /// Compute a product's bias gradient as a second product even where
  /// cuBLASLt has an algorithm for its bias-gradient epilogue.
  bool biasGradProduct = false;

  /// KILN_CUDA_DEVICE (unset: -1), KILN_CUDA_GRAPHS (0 or 1, default 1),
  /// KILN_CUDA_SYNC (0 or 1, default 0),
  /// KILN_CUDA_PROFILE (a file; "%p" in it becomes the process id) and
  /// KILN_CUDA_BIAS_GRAD (epilogue, the default, or product).
  static Status fromEnvironment(CudaOptions &out);
};

class CudaSession : public Backend {
public:
  /// Creates the session for the rank `host` describes. With all-reduces
  /// in the target's programs this is collective: every rank of the run
  /// must create its session of the bundle.
  static Status create(const BackendBundle &bundle,
                       const std::string &targetName,
                       const CudaOptions &options, const BackendHost &host,
                       std::unique_ptr<CudaSession> &out);
  ~CudaSession() override;

  Status run(const std::string &entryName, const kiln_tensor_t *inputs,
             size_t inputCount, const kiln_tensor_t *outputs,
             size_t outputCount) override {
    return runEntry(entryName, inputs, inputCount, /*staged=*/false, outputs,
                    outputCount);
  }
  Status runStaged(const std::string &entryName, const kiln_tensor_t *outputs,
                   size_t outputCount) override {
    return runEntry(entryName, nullptr, 0, /*staged=*/true, outputs,
                    outputCount);
  }
  Status stageInputs(const std::string &entryName, const kiln_tensor_t *inputs,
                     size_t inputCount) override;
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
    /// The kernel's name in the bundle.
    const std::string *kernel = nullptr;
    unsigned grid[3] = {1, 1, 1};
    unsigned block[3] = {1, 1, 1};
    std::vector<CUdeviceptr> pointers;
    std::vector<void *> arguments;
  };
  /// A collective of command `command` of the program, for request
  /// `request`: an in-place mean of `count` f32 values over the ranks (an
  /// AllReduceMean, `send` == `recv`), or a sharded optimizer's
  /// reduce-scatter (this rank's `count` values of the mean) or all-gather
  /// (every rank's `count` values).
  struct AllReduce {
    enum Kind { Mean, ReduceScatterMean, AllGather } kind = Mean;
    CUdeviceptr send = 0, recv = 0;
    size_t count = 0;
    int command = 0;
    uint32_t request = 0;
  };
  /// A sharded optimizer's local shard: `bytes` from `source` (this rank's
  /// shard) to `destination`, in stream order.
  struct Copy {
    CUdeviceptr source = 0, destination = 0;
    size_t bytes = 0;
  };
  /// A run of consecutive all-reduces, issued as one NCCL group: `ready`
  /// marks the commands before it on the stream, `done` the end of all its
  /// reductions on the communication stream, which every request of the
  /// group waits for (NCCL runs a group as one operation).
  struct AllReduceGroup {
    std::vector<AllReduce> reductions;
    CUevent ready = nullptr;
    CUevent done = nullptr;
  };
  /// One step of a program: a launch, a gemm, an attention, a layer norm,
  /// a run of collectives, a local shard's copy, or a wait for one request
  /// (`waitFor`, its group's `done`); `description` names the command or
  /// commands in messages ("command 3 (kernel 'k')", the gemm's sizes,
  /// "command 4 (layer norm 8192x768 -> bf16)", "command 5 (all-reduce of
  /// 4096 f32, request 1)", "commands 12-26 (15 all-reduces of 61440 f32 in
  /// all, requests 2-16)").
  struct Step {
    std::string description;
    std::unique_ptr<Launch> launch;
    std::unique_ptr<GemmPlan> gemm;
    std::unique_ptr<AttentionPlan> attention;
    std::unique_ptr<CudnnAttentionPlan> cudnnAttention;
    std::unique_ptr<LayerNormPlan> layerNorm;
    std::unique_ptr<AllReduceGroup> allReduces;
    std::unique_ptr<Copy> copy;
    CUevent waitFor = nullptr;
  };
  /// Where each input and output of an entry point lives on the device and
  /// in its pinned host mirror: at the same offsets, inputs first (laid out
  /// as staged inputs are, so they arrive in one copy), so each direction
  /// is one copy.
  struct Staging {
    TensorLayout inputs, outputs;
    CUdeviceptr device = 0;
    uint8_t *host = nullptr;
  };
  /// Inputs staged for the next staged runs: checked and copied into the
  /// pinned `host`, then copied to a slot's `device` buffer on the copy
  /// stream, which records the slot's `copied`. A staged run waits for
  /// `copied`, copies the slot into its staging area (the same layout) and
  /// records `consumed`, which the next copy into the slot waits for; the
  /// next stage rewrites `host` once the last copy (`lastCopied`) read it.
  /// Allocated by the first stage.
  struct StagedInputs {
    struct Slot {
      CUdeviceptr device = 0;
      CUevent copied = nullptr, consumed = nullptr;
    };
    StagedInputs(const bundle::EntryPoint &entry, uint64_t alignment)
        : stager(entry, alignment, InputStager::kMaxWaiting) {}
    InputStager stager;
    uint8_t *host = nullptr;
    std::vector<Slot> slots;
    CUevent lastCopied = nullptr;
    bool allocated = false;
  };
  struct EntryPlan {
    EntryPlan(const bundle::EntryPoint &entry, uint64_t stagingAlignment)
        : tensors(entry), stage(entry, stagingAlignment) {}
    EntryTensors tensors;
    Staging staging;
    StagedInputs stage;
    std::vector<Step> steps;
    /// The events of the all-reduces, owned here.
    std::vector<CUevent> events;
    /// Successful runs so far: the first runs the steps directly, the
    /// second captures them.
    uint64_t runs = 0;
    CUgraph graph = nullptr;
    CUgraphExec graphExec = nullptr;
    /// With KILN_CUDA_PROFILE: the device time of each step.
    std::unique_ptr<CommandProfile> profile;
  };

  CudaSession() = default;
  Status initialize(const BackendBundle &bundle, const std::string &targetName,
                    const CudaOptions &options, const BackendHost &host);
  Status parseManifest(const BackendBundle &bundle,
                       const std::string &targetName);
  Status openDevice();
  Status loadModule(const BackendBundle &bundle);
  /// The arena and, when a program holds a gemm, the gemm workspace after
  /// it, in one allocation.
  Status allocateArena();
  Status uploadParameters(const BackendBundle &bundle);
  Status planEntryPoint(const bundle::EntryPoint &entry, EntryPlan &plan);
  /// The staging area: the inputs as `inputs` lays them out, the outputs
  /// after them.
  Status allocateStaging(const bundle::EntryPoint &entry,
                         const TensorLayout &inputs, Staging &staging);
  /// run() and runStaged(): checks the caller's tensors (the outputs alone
  /// when `staged`) and runs on them, or on the oldest staged inputs.
  Status runEntry(const std::string &entryName, const kiln_tensor_t *inputs,
                  size_t inputCount, bool staged, const kiln_tensor_t *outputs,
                  size_t outputCount);
  Status planLaunch(const bundle::KernelLaunch &launch, const EntryPlan &plan,
                    Step &step);
  /// Plans a CUDNN attention command, making the cuDNN handle with the
  /// first and growing the shared workspace to what each needs.
  Status planCudnnAttention(const bundle::Attention &attention, EntryPlan &plan,
                            Step &step);
  /// Plans commands [first, end) of `program`, all NCCL collectives
  /// (AllReduceMean, or a ShardCollective's reduce-scatter or all-gather),
  /// as one group.
  Status planAllReduces(const bundle::Program &program, int first, int end,
                        EntryPlan &plan, Step &step);
  /// Whether a program of this session's target has an NCCL collective.
  bool hasCollectives() const;
  /// A sharded optimizer's command must be for the run's world size.
  Status checkShardRanks(const bundle::ShardCollective &shard) const;
  Status createCommunicator(const BackendHost &host);
  /// Polls the communicator until its pending operation (initialization,
  /// an enqueue, finalization) is no longer in progress, within the
  /// collective timeout; `call` and `what` name it in the error.
  Status awaitCommunicator(const char *call, const std::string &what);
  /// Aborts the communicator for good (its operations on the device stop)
  /// and returns `reason`, which later runs repeat.
  Status abortCommunicator(const Status &reason);
  /// Finalizes and destroys the communicator, or aborts it.
  void releaseCommunicator();
  /// "rank R of W: " and `what` as a Collective status.
  Status rankFailure(const std::string &what) const;
  Status enqueueAllReduces(const AllReduceGroup &group);
  /// The group's ncclAllReduce calls, between ncclGroupStart and
  /// ncclGroupEnd.
  Status issueAllReduces(const AllReduceGroup &group);
  CUdeviceptr deviceAddress(const bundle::BufferRef &buffer,
                            const EntryPlan &plan) const;
  /// Runs `plan` on the outputs its last bind recorded and the inputs it
  /// bound too or, with `staged`, the inputs staged for it.
  Status runBound(EntryPlan &plan, bool staged);
  /// Enqueues the copy of the caller's bound inputs to the device.
  Status copyBoundInputs(EntryPlan &plan);
  /// Enqueues the wait for the staged inputs and their copy into the run's
  /// staging area; fails when nothing is staged.
  Status takeStagedInputs(EntryPlan &plan);
  /// The pinned and device buffers and the events of `stage`, and the copy
  /// stream.
  Status allocateStagedInputs(StagedInputs &stage);
  EntryPlan *findPlan(const std::string &entryName);
  Status executeSteps(EntryPlan &plan);
  /// Waits until the stream has finished the run: cuStreamSynchronize, or,
  /// with a communicator, bounded polls that also watch NCCL's errors. A
  /// failure on the device is reported in the context `failedOnDevice`.
  Status finishRun(const std::string &failedOnDevice);
  Status enqueueSteps(const EntryPlan &plan);
  Status enqueueStep(const Step &step);
  Status captureGraph(EntryPlan &plan);
  /// With KILN_CUDA_PROFILE: the profile of `plan`'s steps (`program`'s
  /// commands, for the kernels' launch shapes).
  Status createProfile(const bundle::EntryPoint &entry, EntryPlan &plan);
  /// Adds the run just finished to its profile and rewrites the file.
  Status recordProfile(EntryPlan &plan);
  Status findParameter(const std::string &name, size_t byteSize,
                       const void *data, CUdeviceptr &address);

  std::string bundleName;
  std::string targetName;
  bundle::Manifest manifest;
  const bundle::Target *target = nullptr;
  CudaOptions options;
  /// The rank of the run (BackendHost, without its broadcast).
  int rank = 0, worldSize = 1, localRank = 0;
  double collectiveTimeoutSeconds = 0;

  CUdevice device = 0;
  std::string deviceName;
  int computeMajor = 0, computeMinor = 0;
  /// The device's largest grid, per dimension.
  int maxGrid[3] = {0, 0, 0};
  CUcontext context = nullptr;
  CUstream stream = nullptr;
  /// Where staged inputs are copied to the device (created by the first
  /// stage).
  CUstream copyStream = nullptr;
  /// Where the all-reduces run, and their communicator (null when the
  /// programs have none, and after it was aborted).
  CUstream commStream = nullptr;
  ncclComm_t comm = nullptr;
  /// Why the communicator was aborted; the session refuses to run after.
  Status communicatorLost;
  CUmodule module = nullptr;
  /// target->kernels(i)'s function.
  std::vector<CUfunction> functions;
  cublasLtHandle_t blasLt = nullptr;
  /// The attention kernels, loaded with the first attention command.
  std::unique_ptr<AttentionKernels> attentionKernels;
  /// cuDNN, for attention on it: the handle, made with the first such
  /// command, and the workspace its plans share (they run one after
  /// another on the stream), grown as each is planned.
  cudnnHandle_t cudnn = nullptr;
  CUdeviceptr cudnnWorkspace = 0;
  uint64_t cudnnWorkspaceBytes = 0;
  /// The layer-norm kernels, loaded with the first layer-norm command.
  std::unique_ptr<LayerNormKernels> layerNormKernels;
  /// In arenaAllocation, after the arena; empty without gemms.
  GemmWorkspace workspace;
  /// Vectors of ones for bias gradients computed as products, by element
  /// type, with their lengths; allocated as the first such product needs
  /// them (the larger replacing none: earlier plans keep pointing into the
  /// older ones).
  struct Ones {
    int elementType;
    int64_t count;
    CUdeviceptr pointer;
  };
  std::vector<Ones> ones;
  Status onesVector(int elementType, int64_t count, CUdeviceptr &out);

  /// The one allocation of the arena (at arenaBase, aligned for the
  /// programs) and the gemm workspace.
  CUdeviceptr arenaAllocation = 0, arenaBase = 0;
  uint64_t arenaSize = 0;
  CUdeviceptr parameterBase = 0;
  std::unordered_map<std::string, uint32_t> parameterIndex;
  std::unique_ptr<ExternalParameters> external;
  std::unique_ptr<FixedParameters> fixed;

  std::vector<EntryPlan> plans;
  std::unordered_map<std::string, size_t> planIndex;
  std::mutex mutex;
  /// Guards the plans' StagedInputs and the copy stream (taken after `mutex`
  /// where both are).
  std::mutex stageMutex;
};

} // namespace kiln::runtime::cuda

#endif // KILN_RUNTIME_SRC_CUDA_CUDASESSION_H
