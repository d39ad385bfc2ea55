//===- CudaSession.cpp - a bundle made ready to run on a CUDA GPU ---------===//

#include "CudaSession.h"

#include "CudaErrors.h"
#include "bundle/CudaImages.h"
#include "kiln/runtime/BundleFormat.h"
#include "kiln/runtime/ElementType.h"
#include "kiln/runtime/Manifest.h"

#include <cudnn.h>

#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <thread>

#include <unistd.h>

namespace kiln::runtime::cuda {

namespace bp = kiln::bundle;

namespace {

/// cuBLASLt's scratch, shared by every gemm of a session; 32 MiB is what
/// its heuristics use for the largest kernels on Hopper.
constexpr size_t kGemmWorkspaceBytes = size_t(32) << 20;
/// The gemm workspace's alignment after the arena, which cuBLASLt's
/// kernels expect.
constexpr uint64_t kGemmWorkspaceAlignment = 256;
/// Staged tensors start at this alignment, which every cuBLASLt kernel and
/// vectorized access is content with.
constexpr uint64_t kStagingAlignment = 256;
/// cuMemAlloc's own alignment; arenas asking for more are over-allocated.
constexpr uint64_t kAllocationAlignment = 256;
/// How long a rank waiting for NCCL or for a run with all-reduces sleeps
/// between polls.
constexpr std::chrono::microseconds kPollInterval(100);

/// Whether `seconds` (<= 0: no limit) have passed since it was made.
class Deadline {
public:
  explicit Deadline(double seconds)
      : seconds(seconds), start(std::chrono::steady_clock::now()) {}
  bool passed() const {
    return seconds > 0 && std::chrono::duration<double>(
                              std::chrono::steady_clock::now() - start)
                                  .count() > seconds;
  }
  /// "300 s", as the messages give it.
  std::string describe() const {
    char text[32];
    std::snprintf(text, sizeof(text), "%g s", seconds);
    return text;
  }

private:
  double seconds;
  std::chrono::steady_clock::time_point start;
};

/// Makes the session's context current on the calling thread for the scope
/// of one API call, which may come from any thread.
class ContextScope {
public:
  explicit ContextScope(CUcontext context)
      : status(checkCu(cuCtxPushCurrent(context), "cuCtxPushCurrent")) {}
  ~ContextScope() {
    if (status.ok()) {
      CUcontext popped = nullptr;
      cuCtxPopCurrent(&popped);
    }
  }
  ContextScope(const ContextScope &) = delete;
  ContextScope &operator=(const ContextScope &) = delete;
  Status status;
};

Status parseFlag(const char *variable, bool &out) {
  const char *value = std::getenv(variable);
  if (!value || !*value)
    return Status();
  if (std::strcmp(value, "0") == 0 || std::strcmp(value, "1") == 0) {
    out = *value == '1';
    return Status();
  }
  return invalidArgument(variable, "='", value, "' is not 0 or 1");
}

Status parseOrdinal(const char *variable, int &out) {
  const char *value = std::getenv(variable);
  if (!value || !*value)
    return Status();
  char *end = nullptr;
  long number = std::strtol(value, &end, 10);
  if (*end != '\0' || number < 0 || number > INT_MAX)
    return invalidArgument(variable, "='", value,
                           "' is not a device number (0, 1, ...)");
  out = static_cast<int>(number);
  return Status();
}

const bp::Program *programFor(const bp::EntryPoint &entry,
                              const std::string &targetName) {
  for (const bp::Program &program : entry.programs())
    if (program.target() == targetName)
      return &program;
  return nullptr;
}

/// Whether `command` is an NCCL collective: an all-reduce, or a sharded
/// optimizer's reduce-scatter or all-gather.
bool isNcclCommand(const bp::Command &command) {
  return command.has_all_reduce_mean() ||
         (command.has_shard() &&
          command.shard().kind() != bp::ShardCollective::LOCAL_SHARD);
}

uint32_t requestOf(const bp::Command &command) {
  return command.has_shard() ? command.shard().request()
                             : command.all_reduce_mean().request();
}

/// The values a collective command moves per rank, and what it is.
uint64_t countOf(const bp::Command &command) {
  return command.has_shard() ? command.shard().count()
                             : command.all_reduce_mean().count();
}

const char *nameOf(const bp::Command &command) {
  if (!command.has_shard())
    return "all-reduce";
  return command.shard().kind() == bp::ShardCollective::ALL_GATHER
             ? "all-gather"
             : "reduce-scatter";
}

/// The end of the run of consecutive collective commands of `program`
/// that starts at `first`.
int allReduceRunEnd(const bp::Program &program, int first) {
  int end = first;
  while (end < program.commands_size() && isNcclCommand(program.commands(end)))
    ++end;
  return end;
}

/// "requests 2-16" where each request of commands [first, end) is the one
/// before plus one, else "requests 3, 7, 5".
std::string describeRequests(const bp::Program &program, int first, int end) {
  bool consecutive = true;
  std::string list;
  for (int c = first; c < end; ++c) {
    uint32_t request = requestOf(program.commands(c));
    if (c > first) {
      consecutive =
          consecutive && request == requestOf(program.commands(c - 1)) + 1;
      list += ", ";
    }
    list += std::to_string(request);
  }
  if (!consecutive)
    return "requests " + list;
  return strCat("requests ", requestOf(program.commands(first)), "-",
                requestOf(program.commands(end - 1)));
}

/// "command 5 (all-reduce of 4096 f32, request 1)" for one all-reduce,
/// "commands 12-26 (15 all-reduces of 61440 f32 in all, requests 2-16)" for
/// a run of them.
std::string describeAllReduces(const bp::Program &program, int first, int end) {
  const bp::Command &head = program.commands(first);
  if (end - first == 1)
    return strCat("command ", first, " (", nameOf(head), " of ", countOf(head),
                  " f32, request ", requestOf(head), ")");
  uint64_t total = 0;
  bool same = true;
  for (int c = first; c < end; ++c) {
    total += countOf(program.commands(c));
    same = same && std::string(nameOf(program.commands(c))) == nameOf(head);
  }
  // Counts are per rank for a sharded optimizer's collectives: a total
  // only of one kind.
  if (!same)
    return strCat("commands ", first, "-", end - 1, " (", end - first,
                  " collectives, ", describeRequests(program, first, end), ")");
  return strCat("commands ", first, "-", end - 1, " (", end - first, " ",
                nameOf(head), "s of ", total, " f32 in all, ",
                describeRequests(program, first, end), ")");
}

} // namespace

Status CudaOptions::fromEnvironment(CudaOptions &out) {
  CudaOptions options;
  KILN_RETURN_IF_ERROR(parseOrdinal("KILN_CUDA_DEVICE", options.device));
  KILN_RETURN_IF_ERROR(parseFlag("KILN_CUDA_GRAPHS", options.graphs));
  KILN_RETURN_IF_ERROR(parseFlag("KILN_CUDA_SYNC", options.syncCommands));
  if (const char *biasGrad = std::getenv("KILN_CUDA_BIAS_GRAD");
      biasGrad && *biasGrad) {
    if (std::strcmp(biasGrad, "product") == 0)
      options.biasGradProduct = true;
    else if (std::strcmp(biasGrad, "epilogue") != 0)
      return invalidArgument("KILN_CUDA_BIAS_GRAD='", biasGrad,
                             "' is not epilogue or product");
  }
  if (const char *profile = std::getenv("KILN_CUDA_PROFILE")) {
    options.profilePath = profile;
    size_t pid = options.profilePath.find("%p");
    if (pid != std::string::npos)
      options.profilePath.replace(pid, 2, std::to_string(getpid()));
  }
  out = options;
  return Status();
}

Status CudaSession::create(const BackendBundle &bundle,
                           const std::string &targetName,
                           const CudaOptions &options, const BackendHost &host,
                           std::unique_ptr<CudaSession> &out) {
  std::unique_ptr<CudaSession> session(new CudaSession());
  KILN_RETURN_IF_ERROR(session->initialize(bundle, targetName, options, host)
                           .withContext(bundle.name));
  out = std::move(session);
  return Status();
}

Status CudaSession::initialize(const BackendBundle &bundle,
                               const std::string &name,
                               const CudaOptions &sessionOptions,
                               const BackendHost &host) {
  bundleName = bundle.name;
  targetName = name;
  options = sessionOptions;
  rank = host.rank;
  worldSize = host.worldSize;
  localRank = host.localRank;
  collectiveTimeoutSeconds = host.collectiveTimeoutSeconds;
  KILN_RETURN_IF_ERROR(parseManifest(bundle, name));
  KILN_RETURN_IF_ERROR(openDevice());
  ContextScope current(context);
  KILN_RETURN_IF_ERROR(current.status);
  KILN_RETURN_IF_ERROR(checkCu(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING),
                               "cuStreamCreate"));
  KILN_RETURN_IF_ERROR(loadModule(bundle));
  KILN_RETURN_IF_ERROR(allocateArena());
  KILN_RETURN_IF_ERROR(uploadParameters(bundle));
  // The arena's zeroing and the parameters' upload are on the session's
  // stream, which does not wait for the legacy default stream.
  KILN_RETURN_IF_ERROR(
      checkCu(cuStreamSynchronize(stream), "cuStreamSynchronize")
          .withContext("uploading the parameters and zeroing the arena"));
  KILN_RETURN_IF_ERROR(checkCublas(cublasLtCreate(&blasLt), "cublasLtCreate"));
  plans.reserve(static_cast<size_t>(manifest.entry_points_size()));
  for (const bp::EntryPoint &entry : manifest.entry_points()) {
    plans.emplace_back(entry, kStagingAlignment);
    KILN_RETURN_IF_ERROR(
        planEntryPoint(entry, plans.back())
            .withContext(strCat("entry point '", entry.name(), "'")));
    if (!options.profilePath.empty())
      KILN_RETURN_IF_ERROR(createProfile(entry, plans.back()));
    planIndex[entry.name()] = plans.size() - 1;
  }
  // Last, so that a rank whose session cannot be made here fails before it
  // makes the others wait for it.
  if (hasCollectives())
    KILN_RETURN_IF_ERROR(createCommunicator(host));
  return Status();
}

/// The backend parses its own copy of the manifest (the bytes libkilnrt
/// validated) and checks it again, which costs little and keeps this
/// library from trusting anything it has not checked itself.
Status CudaSession::parseManifest(const BackendBundle &bundle,
                                  const std::string &name) {
  if (!bundle.manifest || bundle.manifestSize > static_cast<size_t>(INT_MAX) ||
      !manifest.ParseFromArray(bundle.manifest,
                               static_cast<int>(bundle.manifestSize)))
    return internalError("the manifest handed to the CUDA backend does not "
                         "parse");
  std::vector<SectionEntry> sections(bundle.sectionCount);
  for (size_t i = 0; i < bundle.sectionCount; ++i) {
    sections[i].kind = bundle.sections[i].kind;
    sections[i].size = bundle.sections[i].size;
  }
  KILN_RETURN_IF_ERROR(
      validateManifest(manifest, sections).withContext("manifest"));
  for (const bp::Target &candidate : manifest.targets())
    if (candidate.name() == name)
      target = &candidate;
  if (!target)
    return notFound("no target '", name, "' (targets: ", targetNames(manifest),
                    ")");
  if (target->images_size() == 0)
    return invalidArgument("target '", name, "' holds no CUDA code images");
  return Status();
}

Status CudaSession::openDevice() {
  KILN_RETURN_IF_ERROR(
      checkCu(cuInit(0), "cuInit")
          .withContext(strCat("target '", targetName, "' has no usable GPU")));
  int count = 0;
  KILN_RETURN_IF_ERROR(checkCu(cuDeviceGetCount(&count), "cuDeviceGetCount"));
  if (count == 0)
    return unsupported("target '", targetName,
                       "' needs a CUDA device, and there is none");
  if (options.device >= count)
    return invalidArgument("KILN_CUDA_DEVICE=", options.device,
                           ", but there are ", count, " CUDA devices");
  int ordinal = options.device >= 0 ? options.device : localRank % count;
  KILN_RETURN_IF_ERROR(checkCu(cuDeviceGet(&device, ordinal), "cuDeviceGet"));
  char name[256] = {};
  KILN_RETURN_IF_ERROR(checkCu(cuDeviceGetName(name, sizeof(name) - 1, device),
                               "cuDeviceGetName"));
  deviceName = name;
  KILN_RETURN_IF_ERROR(checkCu(
      cuDeviceGetAttribute(
          &computeMajor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device),
      "cuDeviceGetAttribute"));
  KILN_RETURN_IF_ERROR(checkCu(
      cuDeviceGetAttribute(
          &computeMinor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device),
      "cuDeviceGetAttribute"));
  const CUdevice_attribute gridLimits[] = {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X,
                                           CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y,
                                           CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z};
  for (int d = 0; d < 3; ++d)
    KILN_RETURN_IF_ERROR(
        checkCu(cuDeviceGetAttribute(&maxGrid[d], gridLimits[d], device),
                "cuDeviceGetAttribute"));
  // The primary context is the one cuBLASLt (through the runtime API) uses
  // for the device, so both work in the same context.
  return checkCu(cuDevicePrimaryCtxRetain(&context, device),
                 "cuDevicePrimaryCtxRetain");
}

/// A sharded optimizer's command runs only at the world size it was
/// compiled for (the session's creation checks the state's shard_ranks too).
Status CudaSession::checkShardRanks(const bp::ShardCollective &shard) const {
  if (shard.ranks() != static_cast<uint32_t>(worldSize))
    return invalidArgument("the program shards its optimizer over ",
                           shard.ranks(), " ranks, but the run has ",
                           worldSize);
  return Status();
}

bool CudaSession::hasCollectives() const {
  for (const bp::EntryPoint &entry : manifest.entry_points())
    for (const bp::Command &command : programFor(entry, targetName)->commands())
      if (isNcclCommand(command))
        return true;
  return false;
}

Status CudaSession::rankFailure(const std::string &what) const {
  return collectiveError("rank ", rank, " of ", worldSize, ": ", what);
}

/// Rank 0 makes the communicator's id, the host's broadcast (MPI) hands it
/// to the others, and every rank joins without blocking, so that the join
/// is bounded by the collective timeout like any other wait for the ranks.
/// A single rank gets a communicator of one, which runs the same path.
Status CudaSession::createCommunicator(const BackendHost &host) {
  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  if (rank == 0)
    KILN_RETURN_IF_ERROR(
        checkNccl(ncclGetUniqueId(&id), "ncclGetUniqueId", nullptr)
            .withContext(strCat("rank 0 of ", worldSize)));
  char error[1024] = {};
  if (host.broadcast(&id, sizeof(id), 0, error, sizeof(error)) != 0)
    return collectiveError(error).withContext(
        "handing out the NCCL communicator's id");
  KILN_RETURN_IF_ERROR(
      checkCu(cuStreamCreate(&commStream, CU_STREAM_NON_BLOCKING),
              "cuStreamCreate")
          .withContext("the communication stream"));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclResult_t started =
      ncclCommInitRankConfig(&comm, worldSize, id, rank, &config);
  std::string what =
      strCat("joining the NCCL communicator of ", worldSize, " ranks");
  if (started != ncclSuccess && started != ncclInProgress) {
    Status failure = rankFailure(
        strCat(what, ": ",
               checkNccl(started, "ncclCommInitRankConfig", comm).message()));
    return comm ? abortCommunicator(failure) : failure;
  }
  Status joined = awaitCommunicator("ncclCommInitRankConfig", what);
  if (!joined.ok())
    return abortCommunicator(joined);
  return Status();
}

Status CudaSession::awaitCommunicator(const char *call,
                                      const std::string &what) {
  Deadline deadline(collectiveTimeoutSeconds);
  for (;;) {
    ncclResult_t state = ncclSuccess;
    ncclResult_t queried = ncclCommGetAsyncError(comm, &state);
    if (queried != ncclSuccess)
      return rankFailure(
          strCat(what, ": ",
                 checkNccl(queried, "ncclCommGetAsyncError", comm).message()));
    if (state == ncclSuccess)
      return Status();
    if (state != ncclInProgress)
      return rankFailure(
          strCat(what, ": ", checkNccl(state, call, comm).message()));
    if (deadline.passed())
      return rankFailure(strCat(what, ": ", call, " still in progress after ",
                                deadline.describe(),
                                "; another rank failed or hung"));
    std::this_thread::sleep_for(kPollInterval);
  }
}

Status CudaSession::abortCommunicator(const Status &reason) {
  if (comm)
    ncclCommAbort(comm);
  comm = nullptr;
  communicatorLost = reason;
  return reason;
}

Status CudaSession::loadModule(const BackendBundle &bundle) {
  int index = selectCudaImage(*target, computeMajor, computeMinor);
  if (index < 0)
    return unsupported("target '", targetName, "' has no code image for ",
                       deviceName, " (compute capability ", computeMajor, ".",
                       computeMinor, "); it holds ",
                       describeCudaImages(*target));
  const bp::CodeImage &image = target->images(index);
  const BackendSection &section = bundle.sections[image.section()];
  bool ptx = image.format() == bp::CodeImage::PTX;
  std::string what =
      strCat("the ", image.arch(), ptx ? " PTX" : " cubin", " of target '",
             targetName, "' (section ", image.section(), ")");
  // PTX is text the driver reads up to a NUL, which a section need not end
  // with; a cubin is an ELF image whose header gives its size.
  std::string ptxText;
  const void *data = section.data;
  if (ptx) {
    ptxText.assign(reinterpret_cast<const char *>(section.data), section.size);
    data = ptxText.c_str();
  }
  char errorLog[16384] = {};
  CUjit_option keys[] = {CU_JIT_ERROR_LOG_BUFFER,
                         CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *values[] = {errorLog,
                    reinterpret_cast<void *>(uintptr_t(sizeof(errorLog) - 1))};
  CUresult loaded = cuModuleLoadDataEx(&module, data, 2, keys, values);
  if (loaded != CUDA_SUCCESS) {
    module = nullptr;
    Status status = checkCu(loaded, "cuModuleLoadDataEx").withContext(what);
    if (errorLog[0] == '\0')
      return status;
    return Status(status.code(),
                  strCat(status.message(), "; JIT log:\n", errorLog));
  }
  for (const std::string &kernel : target->kernels()) {
    CUfunction function = nullptr;
    CUresult found = cuModuleGetFunction(&function, module, kernel.c_str());
    if (found == CUDA_ERROR_NOT_FOUND)
      return notFound(what, " does not define kernel '", kernel, "'");
    KILN_RETURN_IF_ERROR(
        checkCu(found, "cuModuleGetFunction")
            .withContext(strCat(what, ": kernel '", kernel, "'")));
    functions.push_back(function);
  }
  return Status();
}

/// The workspace starts at the first 256-byte boundary past where the arena
/// can end: the arena lies in the first `workspaceOffset` bytes wherever its
/// alignment puts it, and cuMemAlloc's own alignment makes the offset an
/// aligned address.
Status CudaSession::allocateArena() {
  uint64_t alignment = kAllocationAlignment;
  bool gemms = false;
  for (const bp::EntryPoint &entry : manifest.entry_points()) {
    const bp::Program &program = *programFor(entry, targetName);
    arenaSize = std::max<uint64_t>(arenaSize, program.arena_bytes());
    uint64_t wanted =
        program.arena_alignment() == 0 ? 64 : program.arena_alignment();
    alignment = std::max(alignment, wanted);
    for (const bp::Command &command : program.commands())
      gemms = gemms || command.has_gemm();
  }
  uint64_t workspaceBytes = gemms ? kGemmWorkspaceBytes : 0;
  if (arenaSize == 0 && workspaceBytes == 0)
    return Status();
  // An arena aligned beyond cuMemAlloc's alignment may start up to that
  // alignment into the allocation.
  uint64_t padding =
      arenaSize > 0 && alignment > kAllocationAlignment ? alignment : 0;
  uint64_t workspaceOffset =
      alignUp(padding + arenaSize, kGemmWorkspaceAlignment);
  std::string what = strCat("the gemm workspace of ", workspaceBytes, " bytes");
  if (arenaSize > 0)
    what = workspaceBytes > 0
               ? strCat("the arena of ", arenaSize, " bytes and ", what)
               : strCat("the arena of ", arenaSize, " bytes");
  KILN_RETURN_IF_ERROR(
      checkCu(cuMemAlloc(&arenaAllocation, workspaceOffset + workspaceBytes),
              "cuMemAlloc")
          .withContext(what));
  if (arenaSize > 0) {
    arenaBase = alignUp(arenaAllocation, alignment);
    // Zeroed as the CPU backend's arena is, so that a bundle reading bytes
    // no command wrote gives the same numbers on either target.
    KILN_RETURN_IF_ERROR(
        checkCu(cuMemsetD8Async(arenaBase, 0, arenaSize, stream),
                "cuMemsetD8Async")
            .withContext("zeroing the arena"));
  }
  if (workspaceBytes > 0) {
    workspace.pointer = arenaAllocation + workspaceOffset;
    workspace.bytes = workspaceBytes;
  }
  return Status();
}

/// The parameters keep their layout in the parameter space (the weights
/// section, then those without a stored value) in one allocation, so one
/// copy uploads them all and one memset zeroes the rest.
Status CudaSession::uploadParameters(const BackendBundle &bundle) {
  for (int i = 0; i < manifest.parameters_size(); ++i)
    parameterIndex[manifest.parameters(i).tensor().name()] =
        static_cast<uint32_t>(i);
  external = std::make_unique<ExternalParameters>(manifest);
  if (manifest.parameters_size() == 0)
    return Status();
  const BackendSection &weights = bundle.sections[manifest.weights_section()];
  fixed = std::make_unique<FixedParameters>(manifest, weights.data);
  uint64_t space = std::max<uint64_t>(weights.size, manifest.parameter_bytes());
  if (space == 0)
    return Status();
  KILN_RETURN_IF_ERROR(
      checkCu(cuMemAlloc(&parameterBase, space), "cuMemAlloc")
          .withContext(strCat("the parameters (", space, " bytes)")));
  if (space > weights.size)
    KILN_RETURN_IF_ERROR(
        checkCu(cuMemsetD8Async(parameterBase + weights.size, 0,
                                space - weights.size, stream),
                "cuMemsetD8Async")
            .withContext("zeroing the parameters without a stored value"));
  if (weights.size == 0)
    return Status();
  // From pageable memory the call returns once the bytes are staged, so the
  // bundle's mapping may go away afterwards.
  return checkCu(cuMemcpyHtoDAsync(parameterBase, weights.data, weights.size,
                                   stream),
                 "cuMemcpyHtoDAsync")
      .withContext("uploading the parameters");
}

Status CudaSession::allocateStaging(const bp::EntryPoint &entry,
                                    const TensorLayout &inputs,
                                    Staging &staging) {
  staging.inputs = inputs;
  staging.outputs =
      TensorLayout(entry.outputs(), alignUp(inputs.end, kStagingAlignment),
                   kStagingAlignment);
  if (staging.outputs.end == 0)
    return Status();
  KILN_RETURN_IF_ERROR(
      checkCu(cuMemAlloc(&staging.device, staging.outputs.end), "cuMemAlloc")
          .withContext("the staging buffers of the inputs and outputs"));
  void *host = nullptr;
  KILN_RETURN_IF_ERROR(
      checkCu(cuMemHostAlloc(&host, staging.outputs.end, 0), "cuMemHostAlloc")
          .withContext("the pinned copies of the inputs and outputs"));
  staging.host = static_cast<uint8_t *>(host);
  return Status();
}

CUdeviceptr CudaSession::deviceAddress(const bp::BufferRef &buffer,
                                       const EntryPlan &plan) const {
  const Staging &staging = plan.staging;
  switch (buffer.kind()) {
  case bp::BufferRef::INPUT:
    return staging.device + staging.inputs.offsets[buffer.index()] +
           buffer.offset();
  case bp::BufferRef::OUTPUT:
    return staging.device + staging.outputs.offsets[buffer.index()] +
           buffer.offset();
  case bp::BufferRef::PARAM:
    return parameterBase +
           manifest.parameters(static_cast<int>(buffer.index()))
               .weights_offset() +
           buffer.offset();
  default:
    return arenaBase + buffer.offset();
  }
}

Status CudaSession::planLaunch(const bp::KernelLaunch &command,
                               const EntryPlan &plan, Step &step) {
  auto launch = std::make_unique<Launch>();
  launch->function = functions[command.kernel()];
  launch->kernel = &target->kernels(static_cast<int>(command.kernel()));
  for (int d = 0; d < 3; ++d) {
    launch->grid[d] = command.grid(d);
    launch->block[d] = command.block(d);
  }
  // Limits the manifest cannot know: what this kernel, compiled for this
  // device, allows per block, and the device's grid.
  int maxThreads = 0;
  KILN_RETURN_IF_ERROR(checkCu(
      cuFuncGetAttribute(&maxThreads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
                         launch->function),
      "cuFuncGetAttribute"));
  uint64_t threads =
      uint64_t(launch->block[0]) * launch->block[1] * launch->block[2];
  if (threads > static_cast<uint64_t>(maxThreads))
    return invalidArgument("blocks of ", threads,
                           " threads, but the kernel "
                           "allows at most ",
                           maxThreads, " on ", deviceName);
  for (int d = 0; d < 3; ++d)
    if (launch->grid[d] > static_cast<unsigned>(maxGrid[d]))
      return invalidArgument("grid dimension ", d, " is ", launch->grid[d],
                             ", more than ", deviceName, "'s ", maxGrid[d]);
  for (const bp::BufferRef &buffer : command.buffers())
    launch->pointers.push_back(deviceAddress(buffer, plan));
  // cuLaunchKernel takes the address of each argument; the pointers live in
  // the launch itself, which never moves.
  for (CUdeviceptr &pointer : launch->pointers)
    launch->arguments.push_back(&pointer);
  step.launch = std::move(launch);
  return Status();
}

/// The manifest's validation keeps the buffers of all-reduces in flight
/// together apart, so the group's reductions are independent of each other.
Status CudaSession::planAllReduces(const bp::Program &program, int first,
                                   int end, EntryPlan &plan, Step &step) {
  auto group = std::make_unique<AllReduceGroup>();
  for (int c = first; c < end; ++c) {
    AllReduce reduction;
    reduction.command = c;
    if (program.commands(c).has_all_reduce_mean()) {
      const bp::AllReduceMean &command = program.commands(c).all_reduce_mean();
      reduction.send = reduction.recv = deviceAddress(command.buffer(), plan);
      reduction.count = static_cast<size_t>(command.count());
      reduction.request = command.request();
    } else {
      const bp::ShardCollective &command = program.commands(c).shard();
      KILN_RETURN_IF_ERROR(checkShardRanks(command));
      reduction.kind = command.kind() == bp::ShardCollective::ALL_GATHER
                           ? AllReduce::AllGather
                           : AllReduce::ReduceScatterMean;
      reduction.send = deviceAddress(command.input(), plan);
      reduction.recv = deviceAddress(command.output(), plan);
      reduction.count = static_cast<size_t>(command.count());
      reduction.request = command.request();
    }
    group->reductions.push_back(reduction);
  }
  // Timing off: the events only order the two streams.
  for (CUevent *event : {&group->ready, &group->done}) {
    KILN_RETURN_IF_ERROR(checkCu(cuEventCreate(event, CU_EVENT_DISABLE_TIMING),
                                 "cuEventCreate"));
    plan.events.push_back(*event);
  }
  step.allReduces = std::move(group);
  return Status();
}

Status CudaSession::planCudnnAttention(const bp::Attention &attention,
                                       EntryPlan &plan, Step &step) {
  if (!cudnn) {
    cudnnStatus_t created = cudnnCreate(&cudnn);
    if (created != CUDNN_STATUS_SUCCESS) {
      cudnn = nullptr;
      return internalError("cudnnCreate: ", cudnnGetErrorString(created));
    }
  }
  uint64_t needed = cudnnWorkspaceBytes;
  KILN_RETURN_IF_ERROR(CudnnAttentionPlan::create(
      cudnn, attention, computeMajor * 10 + computeMinor,
      [&](const bp::BufferRef &buffer) { return deviceAddress(buffer, plan); },
      needed, step.cudnnAttention));
  if (needed > cudnnWorkspaceBytes) {
    // Nothing has run yet: the plans made before read the new one too.
    if (cudnnWorkspace)
      KILN_RETURN_IF_ERROR(checkCu(cuMemFree(cudnnWorkspace), "cuMemFree"));
    cudnnWorkspace = 0;
    KILN_RETURN_IF_ERROR(checkCu(cuMemAlloc(&cudnnWorkspace, needed),
                                 "cuMemAlloc (cuDNN's workspace)"));
    cudnnWorkspaceBytes = needed;
  }
  return Status();
}

Status CudaSession::planEntryPoint(const bp::EntryPoint &entry,
                                   EntryPlan &plan) {
  // Inputs where staged inputs have them, so they arrive in one copy.
  KILN_RETURN_IF_ERROR(
      allocateStaging(entry, plan.stage.stager.getLayout(), plan.staging));
  const bp::Program &program = *programFor(entry, targetName);
  // The `done` event of each request's group, for its wait (the manifest's
  // validation guarantees the all-reduce comes first).
  std::map<uint32_t, CUevent> done;
  for (int c = 0; c < program.commands_size(); ++c) {
    const bp::Command &command = program.commands(c);
    Step step;
    if (isNcclCommand(command)) {
      int end = allReduceRunEnd(program, c);
      step.description = describeAllReduces(program, c, end);
      KILN_RETURN_IF_ERROR(planAllReduces(program, c, end, plan, step)
                               .withContext(step.description));
      for (const AllReduce &reduction : step.allReduces->reductions)
        done[reduction.request] = step.allReduces->done;
      // The loop's increment moves past the run.
      c = end - 1;
    } else if (command.has_shard()) {
      // A local shard (the collectives are in runs above): this rank's
      // part of the input.
      const bp::ShardCollective &shard = command.shard();
      step.description =
          strCat("command ", c, " (local shard of ", shard.count(), " f32)");
      KILN_RETURN_IF_ERROR(
          checkShardRanks(shard).withContext(step.description));
      auto copy = std::make_unique<Copy>();
      copy->bytes = static_cast<size_t>(shard.count()) * sizeof(float);
      copy->source = deviceAddress(shard.input(), plan) +
                     static_cast<CUdeviceptr>(rank) * copy->bytes;
      copy->destination = deviceAddress(shard.output(), plan);
      step.copy = std::move(copy);
    } else if (command.has_collective_wait()) {
      uint32_t request = command.collective_wait().request();
      step.description =
          strCat("command ", c, " (wait for request ", request, ")");
      auto started = done.find(request);
      if (started == done.end())
        return internalError(step.description,
                             ": no collective before it started the request");
      step.waitFor = started->second;
    } else if (command.command_case() == bp::Command::kLaunch) {
      const std::string &kernel =
          target->kernels(static_cast<int>(command.launch().kernel()));
      step.description = strCat("command ", c, " (kernel '", kernel, "')");
      KILN_RETURN_IF_ERROR(planLaunch(command.launch(), plan, step)
                               .withContext(step.description));
    } else if (command.has_attention() &&
               command.attention().engine() == bp::CUDNN) {
      step.description =
          strCat("command ", c, " (",
                 describeCudnnAttention(command.attention()), ")");
      KILN_RETURN_IF_ERROR(planCudnnAttention(command.attention(), plan, step)
                               .withContext(step.description));
    } else if (command.has_attention()) {
      if (!attentionKernels)
        KILN_RETURN_IF_ERROR(AttentionKernels::load(attentionKernels)
                                 .withContext(strCat("command ", c)));
      std::unique_ptr<AttentionPlan> attention;
      KILN_RETURN_IF_ERROR(AttentionPlan::create(
                               *attentionKernels, command.attention(),
                               [&](const bp::BufferRef &buffer) {
                                 return deviceAddress(buffer, plan);
                               },
                               attention)
                               .withContext(strCat("command ", c)));
      step.description =
          strCat("command ", c, " (", attention->description(), ")");
      step.attention = std::move(attention);
    } else if (command.has_layer_norm()) {
      if (!layerNormKernels)
        KILN_RETURN_IF_ERROR(LayerNormKernels::load(layerNormKernels)
                                 .withContext(strCat("command ", c)));
      std::unique_ptr<LayerNormPlan> layerNorm;
      KILN_RETURN_IF_ERROR(LayerNormPlan::create(
                               *layerNormKernels, command.layer_norm(),
                               [&](const bp::BufferRef &buffer) {
                                 return deviceAddress(buffer, plan);
                               },
                               layerNorm)
                               .withContext(strCat("command ", c)));
      step.description =
          strCat("command ", c, " (", layerNorm->description(), ")");
      step.layerNorm = std::move(layerNorm);
    } else {
      const bp::Gemm &gemm = command.gemm();
      GemmAddresses addresses;
      addresses.a = deviceAddress(gemm.a(), plan);
      addresses.b = deviceAddress(gemm.b(), plan);
      addresses.c = deviceAddress(gemm.c(), plan);
      if (gemm.has_bias() && gemm.bias().size() > 0)
        addresses.bias = deviceAddress(gemm.bias(), plan);
      if (gemm.has_bias_grad() && gemm.bias_grad().size() > 0)
        addresses.biasGrad = deviceAddress(gemm.bias_grad(), plan);
      if (gemm.has_aux() && gemm.aux().size() > 0)
        addresses.aux = deviceAddress(gemm.aux(), plan);
      BiasGradOptions biasGrad;
      biasGrad.separateProduct = options.biasGradProduct;
      biasGrad.ones = [this](int elementType, int64_t count, CUdeviceptr &out) {
        return onesVector(elementType, count, out);
      };
      std::unique_ptr<GemmPlan> gemmPlan;
      KILN_RETURN_IF_ERROR(GemmPlan::create(blasLt, gemm, addresses, workspace,
                                            biasGrad, gemmPlan)
                               .withContext(strCat("command ", c)));
      step.description =
          strCat("command ", c, " (", gemmPlan->description(), ")");
      step.gemm = std::move(gemmPlan);
    }
    plan.steps.push_back(std::move(step));
  }
  return Status();
}

Status CudaSession::onesVector(int elementType, int64_t count,
                               CUdeviceptr &out) {
  for (const Ones &vector : ones)
    if (vector.elementType == elementType && vector.count >= count) {
      out = vector.pointer;
      return Status();
    }
  uint64_t elementBytes = elementTypeSize(elementType);
  CUdeviceptr pointer = 0;
  KILN_RETURN_IF_ERROR(
      checkCu(cuMemAlloc(&pointer, static_cast<size_t>(count) * elementBytes),
              "cuMemAlloc(a vector of ones for a bias gradient)"));
  ones.push_back({elementType, count, pointer});
  // 1.0 in each type, set bit for bit, on the session's stream: before
  // every command that reads it.
  CUresult set = CUDA_SUCCESS;
  if (elementBytes == 4)
    set = cuMemsetD32Async(pointer, 0x3F800000u, static_cast<size_t>(count),
                           stream);
  else
    set = cuMemsetD16Async(pointer, elementType == bp::BF16 ? 0x3F80 : 0x3C00,
                           static_cast<size_t>(count), stream);
  KILN_RETURN_IF_ERROR(checkCu(set, "cuMemsetD16Async/D32Async(ones)"));
  out = pointer;
  return Status();
}

/// Forks the communication stream off the stream after the commands so
/// far, reduces there as one NCCL group, and marks the end for the
/// requests' waits. A non-blocking communicator may return from
/// ncclGroupEnd before the reductions are enqueued, and `done` must follow
/// them, so an enqueue in progress is awaited.
Status CudaSession::enqueueAllReduces(const AllReduceGroup &group) {
  KILN_RETURN_IF_ERROR(
      checkCu(cuEventRecord(group.ready, stream), "cuEventRecord"));
  KILN_RETURN_IF_ERROR(checkCu(cuStreamWaitEvent(commStream, group.ready, 0),
                               "cuStreamWaitEvent"));
  // From here a failure aborts the communicator: the other ranks issue this
  // group regardless, so this rank's collectives would be out of step with
  // theirs, and a communicator that failed stays failed. The session then
  // reports this failure from now on.
  ncclResult_t started = ncclGroupStart();
  if (started != ncclSuccess)
    return abortCommunicator(
        rankFailure(checkNccl(started, "ncclGroupStart", comm).message()));
  Status issued = issueAllReduces(group);
  // The group is ended even after a failed call (which makes NCCL drop it),
  // or this thread's later NCCL calls would join it.
  ncclResult_t ended = ncclGroupEnd();
  if (!issued.ok())
    return abortCommunicator(issued);
  if (ended == ncclInProgress) {
    Status enqueued = awaitCommunicator(
        "ncclGroupEnd", group.reductions.size() == 1
                            ? std::string("enqueueing the collective")
                            : strCat("enqueueing the group of ",
                                     group.reductions.size(), " collectives"));
    if (!enqueued.ok())
      return abortCommunicator(enqueued);
  } else if (ended != ncclSuccess) {
    return abortCommunicator(
        rankFailure(checkNccl(ended, "ncclGroupEnd", comm).message()));
  }
  return checkCu(cuEventRecord(group.done, commStream), "cuEventRecord");
}

/// Inside a group ncclAllReduce only queues the reduction for ncclGroupEnd
/// to issue; a non-blocking communicator may answer ncclInProgress, which
/// the group's end resolves.
Status CudaSession::issueAllReduces(const AllReduceGroup &group) {
  for (const AllReduce &reduction : group.reductions) {
    const void *send = reinterpret_cast<const void *>(reduction.send);
    void *recv = reinterpret_cast<void *>(reduction.recv);
    const char *call = "ncclAllReduce";
    ncclResult_t result;
    if (reduction.kind == AllReduce::Mean) {
      result = ncclAllReduce(send, recv, reduction.count, ncclFloat32, ncclAvg,
                             comm, commStream);
    } else if (reduction.kind == AllReduce::ReduceScatterMean) {
      call = "ncclReduceScatter";
      result = ncclReduceScatter(send, recv, reduction.count, ncclFloat32,
                                 ncclAvg, comm, commStream);
    } else {
      call = "ncclAllGather";
      result = ncclAllGather(send, recv, reduction.count, ncclFloat32, comm,
                             commStream);
    }
    if (result == ncclSuccess || result == ncclInProgress)
      continue;
    std::string failure = checkNccl(result, call, comm).message();
    if (group.reductions.size() == 1)
      return rankFailure(failure);
    return rankFailure(strCat("command ", reduction.command, " (request ",
                              reduction.request, "): ", failure));
  }
  return Status();
}

Status CudaSession::enqueueSteps(const EntryPlan &plan) {
  CommandProfile *profile = plan.profile.get();
  if (profile)
    KILN_RETURN_IF_ERROR(profile->beginRun(stream));
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    if (profile)
      KILN_RETURN_IF_ERROR(profile->begin(i, stream));
    KILN_RETURN_IF_ERROR(enqueueStep(plan.steps[i]));
    if (options.syncCommands)
      KILN_RETURN_IF_ERROR(finishRun(strCat(
          "waiting for ", plan.steps[i].description, " (KILN_CUDA_SYNC=1)")));
    if (profile)
      KILN_RETURN_IF_ERROR(profile->end(i, stream));
  }
  if (profile)
    KILN_RETURN_IF_ERROR(profile->endRun(stream));
  return Status();
}

Status CudaSession::enqueueStep(const Step &step) {
  if (step.allReduces)
    return enqueueAllReduces(*step.allReduces).withContext(step.description);
  if (step.waitFor)
    return checkCu(cuStreamWaitEvent(stream, step.waitFor, 0),
                   "cuStreamWaitEvent")
        .withContext(step.description);
  if (step.copy)
    return checkCu(cuMemcpyDtoDAsync(step.copy->destination, step.copy->source,
                                     step.copy->bytes, stream),
                   "cuMemcpyDtoDAsync")
        .withContext(step.description);
  if (step.gemm)
    return step.gemm->enqueue(blasLt, workspace, stream)
        .withContext(step.description);
  if (step.attention)
    return step.attention->enqueue(stream).withContext(step.description);
  if (step.cudnnAttention)
    return step.cudnnAttention->enqueue(cudnn, cudnnWorkspace, stream)
        .withContext(step.description);
  if (step.layerNorm)
    return step.layerNorm->enqueue(stream).withContext(step.description);
  const Launch &launch = *step.launch;
  void **arguments = launch.arguments.empty()
                         ? nullptr
                         : const_cast<void **>(launch.arguments.data());
  return checkCu(cuLaunchKernel(launch.function, launch.grid[0], launch.grid[1],
                                launch.grid[2], launch.block[0],
                                launch.block[1], launch.block[2], 0, stream,
                                arguments, nullptr),
                 "cuLaunchKernel")
      .withContext(step.description);
}

/// Records the steps as a graph. Capturing runs nothing, so the caller
/// launches the graph afterwards, this run included.
Status CudaSession::captureGraph(EntryPlan &plan) {
  static constexpr const char *kCapturing =
      "capturing a CUDA graph (KILN_CUDA_GRAPHS=0 runs without graphs)";
  // Thread-local mode: other threads' sessions may allocate meanwhile.
  KILN_RETURN_IF_ERROR(
      checkCu(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
              "cuStreamBeginCapture"));
  Status enqueued = enqueueSteps(plan);
  CUgraph graph = nullptr;
  // Ending the capture is needed even after a failure, to leave capture
  // mode.
  CUresult ended = cuStreamEndCapture(stream, &graph);
  if (!enqueued.ok() || ended != CUDA_SUCCESS) {
    if (graph)
      cuGraphDestroy(graph);
    KILN_RETURN_IF_ERROR(enqueued.withContext(kCapturing));
    return checkCu(ended, "cuStreamEndCapture").withContext(kCapturing);
  }
  CUgraphExec exec = nullptr;
  CUresult instantiated = cuGraphInstantiate(&exec, graph, 0);
  if (instantiated != CUDA_SUCCESS) {
    cuGraphDestroy(graph);
    return checkCu(instantiated, "cuGraphInstantiate").withContext(kCapturing);
  }
  plan.graph = graph;
  plan.graphExec = exec;
  return Status();
}

/// The first run warms up what loads lazily (the module's kernels on first
/// launch, cuBLASLt's kernels), which must not happen inside a capture.
Status CudaSession::executeSteps(EntryPlan &plan) {
  if (plan.steps.empty())
    return Status();
  if (!options.graphs || options.syncCommands || plan.runs == 0 || plan.profile)
    return enqueueSteps(plan);
  if (!plan.graphExec)
    KILN_RETURN_IF_ERROR(captureGraph(plan));
  return checkCu(cuGraphLaunch(plan.graphExec, stream), "cuGraphLaunch");
}

Status CudaSession::copyBoundInputs(EntryPlan &plan) {
  Staging &staging = plan.staging;
  staging.inputs.gather(plan.tensors.inputData(), staging.host);
  if (staging.inputs.end == 0)
    return Status();
  return checkCu(cuMemcpyHtoDAsync(staging.device, staging.host,
                                   staging.inputs.end, stream),
                 "cuMemcpyHtoDAsync")
      .withContext("copying the inputs");
}

Status CudaSession::takeStagedInputs(EntryPlan &plan) {
  std::lock_guard<std::mutex> lock(stageMutex);
  StagedInputs &stage = plan.stage;
  size_t index = 0;
  KILN_RETURN_IF_ERROR(stage.stager.take(index));
  // The slot is the stream's now: the next copy into it waits for
  // `consumed`.
  stage.stager.release();
  const StagedInputs::Slot &slot = stage.slots[index];
  const char *what = "taking the staged inputs";
  KILN_RETURN_IF_ERROR(
      checkCu(cuStreamWaitEvent(stream, slot.copied, 0), "cuStreamWaitEvent")
          .withContext(what));
  if (plan.staging.inputs.end > 0)
    KILN_RETURN_IF_ERROR(
        checkCu(cuMemcpyDtoDAsync(plan.staging.device, slot.device,
                                  plan.staging.inputs.end, stream),
                "cuMemcpyDtoDAsync")
            .withContext(what));
  return checkCu(cuEventRecord(slot.consumed, stream), "cuEventRecord")
      .withContext(what);
}

Status CudaSession::runBound(EntryPlan &plan, bool staged) {
  ContextScope current(context);
  KILN_RETURN_IF_ERROR(current.status);
  Staging &staging = plan.staging;
  Status status = staged ? takeStagedInputs(plan) : copyBoundInputs(plan);
  if (status.ok())
    status = executeSteps(plan);
  const TensorLayout &outputs = staging.outputs;
  if (status.ok() && outputs.end > outputs.begin)
    status = checkCu(cuMemcpyDtoHAsync(staging.host + outputs.begin,
                                       staging.device + outputs.begin,
                                       outputs.end - outputs.begin, stream),
                     "cuMemcpyDtoHAsync")
                 .withContext("copying the outputs");
  // Wait even after a failure, so nothing still in flight touches the
  // pinned buffers when the next run fills them. Faults inside kernels
  // surface here.
  Status synchronized =
      finishRun("finishing the run (a kernel, gemm or collective failed on "
                "the device; KILN_CUDA_SYNC=1 waits after each command to "
                "name it)");
  // A fault on the device fails the calls after it too, so a call that
  // failed while the stream failed may only have been the first to see an
  // earlier command's fault: both are reported, the stream's first.
  if (!status.ok() && !synchronized.ok() && !options.syncCommands)
    return Status(synchronized.code(),
                  strCat(synchronized.message(), "; first reported by ",
                         status.message()));
  KILN_RETURN_IF_ERROR(status);
  KILN_RETURN_IF_ERROR(synchronized);
  if (plan.profile && plan.runs > 0)
    KILN_RETURN_IF_ERROR(recordProfile(plan));
  outputs.scatter(staging.host, plan.tensors.outputData());
  ++plan.runs;
  return Status();
}

Status CudaSession::createProfile(const bp::EntryPoint &entry,
                                  EntryPlan &plan) {
  std::vector<CommandProfile::Command> commands;
  for (const Step &step : plan.steps) {
    CommandProfile::Command command;
    command.description = step.description;
    if (step.launch) {
      const Launch &launch = *step.launch;
      command.kind = "kernel";
      command.what = *launch.kernel;
      command.description +=
          strCat(" grid ", launch.grid[0], "x", launch.grid[1], "x",
                 launch.grid[2], " block ", launch.block[0], "x",
                 launch.block[1], "x", launch.block[2]);
    } else if (step.gemm) {
      command.kind = "gemm";
      command.what = step.gemm->description();
    } else if (step.attention) {
      command.kind = "attention";
      command.what = step.attention->description();
    } else if (step.cudnnAttention) {
      command.kind = "attention";
      command.what = step.cudnnAttention->description();
    } else if (step.layerNorm) {
      command.kind = "layer_norm";
      command.what = step.layerNorm->description();
    } else if (step.copy) {
      command.kind = "copy";
    } else if (step.waitFor) {
      command.kind = "wait";
    } else {
      command.kind = "collectives";
    }
    commands.push_back(std::move(command));
  }
  return CommandProfile::create(entry.name(), std::move(commands),
                                plan.profile);
}

Status CudaSession::recordProfile(EntryPlan &plan) {
  KILN_RETURN_IF_ERROR(plan.profile->accumulate());
  std::vector<const CommandProfile *> profiles;
  for (const EntryPlan &each : plans)
    if (each.profile)
      profiles.push_back(each.profile.get());
  std::string header = strCat(
      "Kiln CUDA profile (KILN_CUDA_PROFILE): ", bundleName, ", target '",
      targetName, "', ", deviceName, ", rank ", rank, " of ", worldSize, "\n");
  return writeProfile(options.profilePath, header, profiles);
}

/// With collectives in flight, a peer that died or hung would leave the
/// stream waiting forever: the wait is bounded by the collective timeout,
/// and NCCL's asynchronous errors end it too. Either aborts the
/// communicator, which stops its kernels, so the stream drains.
Status CudaSession::finishRun(const std::string &failedOnDevice) {
  if (!comm)
    return checkCu(cuStreamSynchronize(stream), "cuStreamSynchronize")
        .withContext(failedOnDevice);
  Deadline deadline(collectiveTimeoutSeconds);
  for (;;) {
    CUresult state = cuStreamQuery(stream);
    if (state == CUDA_SUCCESS)
      return Status();
    if (state != CUDA_ERROR_NOT_READY)
      return checkCu(state, "cuStreamQuery").withContext(failedOnDevice);
    ncclResult_t asyncError = ncclSuccess;
    ncclResult_t queried = ncclCommGetAsyncError(comm, &asyncError);
    if (queried != ncclSuccess)
      return abortCommunicator(rankFailure(
          checkNccl(queried, "ncclCommGetAsyncError", comm).message()));
    if (asyncError != ncclSuccess && asyncError != ncclInProgress)
      return abortCommunicator(rankFailure(strCat(
          "NCCL failed while the run's collectives were in flight (a rank "
          "died or its network failed): ",
          checkNccl(asyncError, "ncclCommGetAsyncError", comm).message())));
    if (deadline.passed())
      return abortCommunicator(rankFailure(
          strCat("timed out after ", deadline.describe(),
                 " waiting for the run and its collectives; another rank "
                 "failed, hung or stopped issuing the same steps")));
    std::this_thread::sleep_for(kPollInterval);
  }
}

CudaSession::EntryPlan *CudaSession::findPlan(const std::string &entryName) {
  auto found = planIndex.find(entryName);
  return found == planIndex.end() ? nullptr : &plans[found->second];
}

Status CudaSession::runEntry(const std::string &entryName,
                             const kiln_tensor_t *inputs, size_t inputCount,
                             bool staged, const kiln_tensor_t *outputs,
                             size_t outputCount) {
  EntryPlan *plan = findPlan(entryName);
  if (!plan)
    return entryPointNotFound(bundleName, manifest, entryName);
  std::lock_guard<std::mutex> lock(mutex);
  if (!communicatorLost.ok())
    return communicatorLost.withContext(
        strCat(bundleName, ": target '", targetName,
               "': the session cannot run since its NCCL communicator was "
               "aborted"));
  KILN_RETURN_IF_ERROR(external->checkAllSet(bundleName));
  KILN_RETURN_IF_ERROR(
      staged ? plan->tensors.bindOutputs(outputs, outputCount)
             : plan->tensors.bind(inputs, inputCount, outputs, outputCount));
  return runBound(*plan, staged)
      .withContext(strCat(bundleName, ": target '", targetName,
                          "': entry point '", entryName, "'"));
}

Status CudaSession::allocateStagedInputs(StagedInputs &stage) {
  const char *what = "the staged inputs";
  if (!copyStream)
    KILN_RETURN_IF_ERROR(
        checkCu(cuStreamCreate(&copyStream, CU_STREAM_NON_BLOCKING),
                "cuStreamCreate")
            .withContext("the stream of the staged inputs' copies"));
  uint64_t bytes = stage.stager.getLayout().end;
  if (bytes > 0 && !stage.host) {
    void *host = nullptr;
    KILN_RETURN_IF_ERROR(
        checkCu(cuMemHostAlloc(&host, bytes, 0), "cuMemHostAlloc")
            .withContext(what));
    stage.host = static_cast<uint8_t *>(host);
  }
  // Grown one slot at a time, so that a failure leaves nothing unowned.
  stage.slots.resize(stage.stager.slotCount());
  for (StagedInputs::Slot &slot : stage.slots) {
    if (bytes > 0 && !slot.device)
      KILN_RETURN_IF_ERROR(
          checkCu(cuMemAlloc(&slot.device, bytes), "cuMemAlloc")
              .withContext(what));
    for (CUevent *event : {&slot.copied, &slot.consumed})
      if (!*event)
        KILN_RETURN_IF_ERROR(
            checkCu(cuEventCreate(event, CU_EVENT_DISABLE_TIMING),
                    "cuEventCreate")
                .withContext(what));
  }
  stage.allocated = true;
  return Status();
}

/// The pinned buffer is rewritten only once the last staged copy has read
/// it, and a slot's device buffer only after the run that took the set in it
/// copied it out.
Status CudaSession::stageInputs(const std::string &entryName,
                                const kiln_tensor_t *inputs,
                                size_t inputCount) {
  EntryPlan *plan = findPlan(entryName);
  if (!plan)
    return entryPointNotFound(bundleName, manifest, entryName);
  std::string where = strCat(bundleName, ": target '", targetName,
                             "': entry point '", entryName, "'");
  std::lock_guard<std::mutex> lock(stageMutex);
  ContextScope current(context);
  KILN_RETURN_IF_ERROR(current.status);
  StagedInputs &stage = plan->stage;
  InputStager &stager = stage.stager;
  if (!stage.allocated)
    KILN_RETURN_IF_ERROR(allocateStagedInputs(stage).withContext(where));
  size_t index = 0;
  KILN_RETURN_IF_ERROR(stager.freeSlot(index).withContext(where));
  if (stage.lastCopied)
    KILN_RETURN_IF_ERROR(
        checkCu(cuEventSynchronize(stage.lastCopied), "cuEventSynchronize")
            .withContext(where + ": the last staged copy"));
  KILN_RETURN_IF_ERROR(stager.copy(inputs, inputCount, stage.host));
  const StagedInputs::Slot &slot = stage.slots[index];
  uint64_t bytes = stager.getLayout().end;
  if (bytes > 0) {
    KILN_RETURN_IF_ERROR(
        checkCu(cuStreamWaitEvent(copyStream, slot.consumed, 0),
                "cuStreamWaitEvent")
            .withContext(where));
    KILN_RETURN_IF_ERROR(
        checkCu(cuMemcpyHtoDAsync(slot.device, stage.host, bytes, copyStream),
                "cuMemcpyHtoDAsync")
            .withContext(where + ": copying the staged inputs"));
  }
  KILN_RETURN_IF_ERROR(
      checkCu(cuEventRecord(slot.copied, copyStream), "cuEventRecord")
          .withContext(where));
  stage.lastCopied = slot.copied;
  stager.push(index);
  return Status();
}

Status CudaSession::findParameter(const std::string &name, size_t byteSize,
                                  const void *data, CUdeviceptr &address) {
  auto found = parameterIndex.find(name);
  if (found == parameterIndex.end())
    return notFound(bundleName, ": no parameter '", name, "'");
  const bp::Parameter &parameter =
      manifest.parameters(static_cast<int>(found->second));
  if (byteSize != parameter.size_bytes())
    return invalidArgument("parameter '", name, "' (",
                           describeTensorType(parameter.tensor()), ") has ",
                           parameter.size_bytes(), " bytes, not ", byteSize);
  if (byteSize > 0 && !data)
    return invalidArgument("parameter '", name, "': data is NULL");
  address = parameterBase + parameter.weights_offset();
  return Status();
}

/// Parameter copies go through the session's stream, ordered after the
/// runs (which are already finished: every run synchronizes).
Status CudaSession::getParameter(const std::string &name, void *data,
                                 size_t byteSize) {
  std::lock_guard<std::mutex> lock(mutex);
  CUdeviceptr address = 0;
  KILN_RETURN_IF_ERROR(findParameter(name, byteSize, data, address));
  if (byteSize == 0)
    return Status();
  ContextScope current(context);
  KILN_RETURN_IF_ERROR(current.status);
  KILN_RETURN_IF_ERROR(
      checkCu(cuMemcpyDtoHAsync(data, address, byteSize, stream),
              "cuMemcpyDtoHAsync")
          .withContext(strCat("parameter '", name, "'")));
  return checkCu(cuStreamSynchronize(stream), "cuStreamSynchronize")
      .withContext(strCat("parameter '", name, "'"));
}

Status CudaSession::setParameter(const std::string &name, const void *data,
                                 size_t byteSize) {
  std::lock_guard<std::mutex> lock(mutex);
  CUdeviceptr address = 0;
  KILN_RETURN_IF_ERROR(findParameter(name, byteSize, data, address));
  if (fixed)
    KILN_RETURN_IF_ERROR(fixed->check(
        manifest, static_cast<int>(parameterIndex[name]), data, byteSize));
  if (byteSize > 0) {
    ContextScope current(context);
    KILN_RETURN_IF_ERROR(current.status);
    KILN_RETURN_IF_ERROR(
        checkCu(cuMemcpyHtoDAsync(address, data, byteSize, stream),
                "cuMemcpyHtoDAsync")
            .withContext(strCat("parameter '", name, "'")));
    KILN_RETURN_IF_ERROR(
        checkCu(cuStreamSynchronize(stream), "cuStreamSynchronize")
            .withContext(strCat("parameter '", name, "'")));
  }
  external->markSet(static_cast<int>(parameterIndex[name]));
  return Status();
}

/// Finalizes the communicator (flushing what was issued) and destroys it;
/// where that fails or passes the collective timeout (a peer gone), aborts
/// it instead.
void CudaSession::releaseCommunicator() {
  if (!comm)
    return;
  ncclResult_t finalized = ncclCommFinalize(comm);
  if ((finalized == ncclSuccess || finalized == ncclInProgress) &&
      awaitCommunicator("ncclCommFinalize", "releasing the communicator").ok())
    ncclCommDestroy(comm);
  else
    ncclCommAbort(comm);
  comm = nullptr;
}

/// Releases in reverse order of creation; failures cannot be reported from
/// here, and each release is independent of the others' success.
CudaSession::~CudaSession() {
  if (!context)
    return;
  if (cuCtxPushCurrent(context) == CUDA_SUCCESS) {
    if (stream)
      cuStreamSynchronize(stream);
    for (EntryPlan &plan : plans) {
      if (plan.graphExec)
        cuGraphExecDestroy(plan.graphExec);
      if (plan.graph)
        cuGraphDestroy(plan.graph);
      plan.steps.clear();
      for (CUevent event : plan.events)
        cuEventDestroy(event);
      if (plan.staging.host)
        cuMemFreeHost(plan.staging.host);
      if (plan.staging.device)
        cuMemFree(plan.staging.device);
      StagedInputs &stage = plan.stage;
      if (stage.lastCopied)
        cuEventSynchronize(stage.lastCopied);
      for (StagedInputs::Slot &slot : stage.slots) {
        for (CUevent event : {slot.copied, slot.consumed})
          if (event)
            cuEventDestroy(event);
        if (slot.device)
          cuMemFree(slot.device);
      }
      if (stage.host)
        cuMemFreeHost(stage.host);
    }
    if (copyStream)
      cuStreamDestroy(copyStream);
    // After the graphs, which may hold the communicator's resources.
    releaseCommunicator();
    if (commStream)
      cuStreamDestroy(commStream);
    if (blasLt)
      cublasLtDestroy(blasLt);
    for (const Ones &vector : ones)
      cuMemFree(vector.pointer);
    if (parameterBase)
      cuMemFree(parameterBase);
    // The gemm workspace with it.
    if (arenaAllocation)
      cuMemFree(arenaAllocation);
    if (module)
      cuModuleUnload(module);
    if (cudnn)
      cudnnDestroy(cudnn);
    if (cudnnWorkspace)
      cuMemFree(cudnnWorkspace);
    // While the context is current: they unload the attention and
    // layer-norm kernels.
    attentionKernels.reset();
    layerNormKernels.reset();
    if (stream)
      cuStreamDestroy(stream);
    CUcontext popped = nullptr;
    cuCtxPopCurrent(&popped);
  }
  cuDevicePrimaryCtxRelease(device);
}

} // namespace kiln::runtime::cuda
