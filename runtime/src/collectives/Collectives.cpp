//===- Collectives.cpp - the process-wide communicator --------------------===//
//
// One communicator per process: a single rank, which makes no MPI call at
// all, or MPI (a duplicate of MPI_COMM_WORLD with MPI_ERRORS_RETURN). The
// collectives compiled steps call (kiln/abi/collectives.h) start nonblocking
// all-reduces whose requests live in a table the communicator owns; every
// wait polls with MPI_Test up to the collective timeout, so a rank whose
// peer failed or hung ends with a message instead of waiting forever.
//
//===----------------------------------------------------------------------===//

#include "collectives/Collectives.h"

#include "kiln/abi/collectives.h"

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <unistd.h>
#include <vector>

namespace kiln::runtime {

namespace {

using Clock = std::chrono::steady_clock;

class Communicator {
public:
  virtual ~Communicator() = default;
  virtual const DistributedInfo &info() const = 0;
  /// kiln_collective_all_reduce_mean_f32_begin; failures end the process.
  virtual int64_t beginMeanF32(float *data, int64_t count) = 0;
  /// kiln_collective_reduce_scatter_mean_f32_begin and
  /// kiln_collective_all_gather_f32_begin, for the world size they were
  /// compiled for; failures end the process.
  virtual int64_t beginReduceScatterMeanF32(const float *input, float *output,
                                            int64_t count) = 0;
  virtual int64_t beginAllGatherF32(const float *input, float *output,
                                    int64_t count) = 0;
  /// kiln_collective_wait; failures end the process.
  virtual void wait(int64_t request) = 0;
  virtual Status barrier() = 0;
  virtual Status allReduce(double *values, size_t count, ReduceOp op) = 0;
  virtual Status broadcast(void *data, size_t bytes, int root) = 0;
  virtual Status allGather(const void *input, void *output, size_t bytes) = 0;
  virtual double timeoutSeconds() const = 0;
  virtual Status finalize() = 0;
  virtual void abort(int exitCode) = 0;
};

/// One process: nothing to communicate.
class SingleRank final : public Communicator {
public:
  const DistributedInfo &info() const override { return single; }
  int64_t beginMeanF32(float *, int64_t) override { return 0; }
  // One rank's shard is the whole value.
  int64_t beginReduceScatterMeanF32(const float *input, float *output,
                                    int64_t count) override {
    std::memcpy(output, input, static_cast<size_t>(count) * sizeof(float));
    return 0;
  }
  int64_t beginAllGatherF32(const float *input, float *output,
                            int64_t count) override {
    std::memcpy(output, input, static_cast<size_t>(count) * sizeof(float));
    return 0;
  }
  void wait(int64_t) override {}
  Status barrier() override { return Status(); }
  Status allReduce(double *, size_t, ReduceOp) override { return Status(); }
  Status broadcast(void *, size_t, int root) override {
    if (root != 0)
      return invalidArgument("broadcast from rank ", root,
                             " in a run of one rank");
    return Status();
  }
  Status allGather(const void *input, void *output, size_t bytes) override {
    if (bytes > 0)
      std::memcpy(output, input, bytes);
    return Status();
  }
  double timeoutSeconds() const override { return 0; }
  Status finalize() override { return Status(); }
  void abort(int) override {}

private:
  DistributedInfo single;
};

std::string mpiErrorText(int error) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(error, text, &length) != MPI_SUCCESS)
    return "MPI error " + std::to_string(error);
  return std::string(text, static_cast<size_t>(length));
}

/// Ranks communicating through MPI. Every MPI call holds `mutex` (MPI is
/// initialised with MPI_THREAD_SERIALIZED).
class MpiCommunicator final : public Communicator {
public:
  MpiCommunicator(MPI_Comm comm, const DistributedInfo &info,
                  double timeoutSeconds, bool ownsMpi)
      : comm(comm), information(info), timeout(timeoutSeconds),
        ownsMpi(ownsMpi) {}

  const DistributedInfo &info() const override { return information; }

  int64_t beginMeanF32(float *data, int64_t count) override {
    if (count <= 0 || information.worldSize == 1)
      return 0;
    std::lock_guard<std::mutex> lock(mutex);
    size_t index = takeSlot();
    Slot &slot = slots[index];
    slot.data = data;
    slot.count = count;
    slot.what = "the all-reduce of " + std::to_string(count) + " f32 values";
    // MPI counts are ints: a larger buffer goes in pieces.
    for (int64_t offset = 0; offset < count; offset += INT_MAX) {
      int piece = static_cast<int>(std::min<int64_t>(count - offset, INT_MAX));
      slot.requests.push_back(MPI_REQUEST_NULL);
      int error = MPI_Iallreduce(MPI_IN_PLACE, data + offset, piece, MPI_FLOAT,
                                 MPI_SUM, comm, &slot.requests.back());
      if (error != MPI_SUCCESS)
        fatal("MPI_Iallreduce of " + std::to_string(count) +
              " f32 values failed: " + mpiErrorText(error));
    }
    return static_cast<int64_t>(index) + 1;
  }

  int64_t beginReduceScatterMeanF32(const float *input, float *output,
                                    int64_t count) override {
    return beginShards("reduce-scatter", "MPI_Ireduce_scatter_block", output,
                       count, [&](int n, MPI_Request *request) {
                         return MPI_Ireduce_scatter_block(input, output, n,
                                                          MPI_FLOAT, MPI_SUM,
                                                          comm, request);
                       });
  }

  int64_t beginAllGatherF32(const float *input, float *output,
                            int64_t count) override {
    return beginShards("all-gather", "MPI_Iallgather", nullptr, count,
                       [&](int n, MPI_Request *request) {
                         return MPI_Iallgather(input, n, MPI_FLOAT, output, n,
                                               MPI_FLOAT, comm, request);
                       });
  }

  void wait(int64_t request) override {
    if (request == 0)
      return;
    Slot *slot = nullptr;
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (request < 0 || static_cast<uint64_t>(request) > slots.size() ||
          !slots[static_cast<size_t>(request - 1)].busy)
        fatal("kiln_collective_wait: request " + std::to_string(request) +
              " is not outstanding");
      slot = &slots[static_cast<size_t>(request - 1)];
    }
    Status status = waitFor(slot->requests, slot->what + " (request " +
                                                std::to_string(request) + ")");
    if (!status.ok())
      fatal(status.message());
    // The mean, as PyTorch's DistributedDataParallel divides the sum (an
    // all-gather has nothing to divide).
    float divisor = static_cast<float>(information.worldSize);
    for (int64_t i = 0; i < slot->count; ++i)
      slot->data[i] /= divisor;
    std::lock_guard<std::mutex> lock(mutex);
    slot->busy = false;
    slot->data = nullptr;
    slot->count = 0;
    slot->requests.clear();
    freeSlots.push_back(static_cast<size_t>(request - 1));
  }

  Status barrier() override {
    std::vector<MPI_Request> requests(1, MPI_REQUEST_NULL);
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (int error = MPI_Ibarrier(comm, &requests[0]))
        return failure("MPI_Ibarrier failed: " + mpiErrorText(error));
    }
    return waitFor(requests, "a barrier");
  }

  Status allReduce(double *values, size_t count, ReduceOp op) override {
    if (count > INT_MAX)
      return invalidArgument("kiln_distributed_all_reduce_f64: ", count,
                             " values are more than one call takes");
    MPI_Op mpiOp = op == ReduceOp::Sum   ? MPI_SUM
                   : op == ReduceOp::Min ? MPI_MIN
                                         : MPI_MAX;
    std::vector<MPI_Request> requests(1, MPI_REQUEST_NULL);
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (int error =
              MPI_Iallreduce(MPI_IN_PLACE, values, static_cast<int>(count),
                             MPI_DOUBLE, mpiOp, comm, &requests[0]))
        return failure("MPI_Iallreduce of " + std::to_string(count) +
                       " host values failed: " + mpiErrorText(error));
    }
    return waitFor(requests, "an all-reduce of " + std::to_string(count) +
                                 " host values");
  }

  Status broadcast(void *data, size_t bytes, int root) override {
    if (root < 0 || root >= information.worldSize)
      return invalidArgument("broadcast from rank ", root, " in a run of ",
                             information.worldSize, " ranks");
    if (bytes > INT_MAX)
      return invalidArgument("a broadcast of ", bytes,
                             " bytes is more than one call takes");
    std::vector<MPI_Request> requests(1, MPI_REQUEST_NULL);
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (int error = MPI_Ibcast(data, static_cast<int>(bytes), MPI_BYTE, root,
                                 comm, &requests[0]))
        return failure("MPI_Ibcast of " + std::to_string(bytes) +
                       " bytes failed: " + mpiErrorText(error));
    }
    return waitFor(requests, "a broadcast of " + std::to_string(bytes) +
                                 " bytes from rank " + std::to_string(root));
  }

  Status allGather(const void *input, void *output, size_t bytes) override {
    // In 8-, 4- or 2-byte units where they divide the size, so that as many
    // bytes pass as a step's collectives move (2^31 - 1 f32 per rank).
    size_t unit = bytes % 8 == 0   ? 8
                  : bytes % 4 == 0 ? 4
                  : bytes % 2 == 0 ? 2
                                   : 1;
    MPI_Datatype type = unit == 8   ? MPI_UINT64_T
                        : unit == 4 ? MPI_UINT32_T
                        : unit == 2 ? MPI_UINT16_T
                                    : MPI_BYTE;
    if (bytes / unit > INT_MAX)
      return invalidArgument("an all-gather of ", bytes,
                             " bytes per rank is more than one call takes");
    int count = static_cast<int>(bytes / unit);
    std::vector<MPI_Request> requests(1, MPI_REQUEST_NULL);
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (int error = MPI_Iallgather(input, count, type, output, count, type,
                                     comm, &requests[0]))
        return failure("MPI_Iallgather of " + std::to_string(bytes) +
                       " bytes per rank failed: " + mpiErrorText(error));
    }
    return waitFor(requests, "an all-gather of " + std::to_string(bytes) +
                                 " bytes per rank");
  }

  double timeoutSeconds() const override { return timeout; }

  Status finalize() override {
    std::lock_guard<std::mutex> lock(mutex);
    if (freeSlots.size() != slots.size())
      return invalidArgument(
          "kiln_distributed_finalize: ", slots.size() - freeSlots.size(),
          " collectives are still outstanding");
    if (int error = MPI_Comm_free(&comm))
      return failure("MPI_Comm_free failed: " + mpiErrorText(error));
    if (ownsMpi)
      if (int error = MPI_Finalize())
        return failure("MPI_Finalize failed: " + mpiErrorText(error));
    return Status();
  }

  void abort(int exitCode) override {
    std::fflush(stdout);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, exitCode);
    _exit(exitCode);
  }

private:
  /// An outstanding collective: its MPI requests, what it is (for
  /// messages), and the `count` values at `data` to divide by the world
  /// size once it is done (none for an all-gather).
  struct Slot {
    std::vector<MPI_Request> requests;
    std::string what;
    float *data = nullptr;
    int64_t count = 0;
    bool busy = false;
  };

  /// Starts a collective on shards of `count` values: `start(count,
  /// request)` makes the MPI call `call`. The `count` values at `mean`, if
  /// given, are a sum the wait divides by the world size.
  template <typename Start>
  int64_t beginShards(const char *name, const char *call, float *mean,
                      int64_t count, Start start) {
    std::string what = std::string("the ") + name + " of " +
                       std::to_string(count * information.worldSize) +
                       " f32 values";
    if (count > INT_MAX)
      fatal(what + ": shards of more than " + std::to_string(INT_MAX) +
            " values per rank are not supported");
    std::lock_guard<std::mutex> lock(mutex);
    size_t index = takeSlot();
    Slot &slot = slots[index];
    slot.what = what;
    if (mean) {
      slot.data = mean;
      slot.count = count;
    }
    slot.requests.push_back(MPI_REQUEST_NULL);
    if (int error = start(static_cast<int>(count), &slot.requests.back()))
      fatal(std::string(call) + " for " + what +
            " failed: " + mpiErrorText(error));
    return static_cast<int64_t>(index) + 1;
  }

  /// A free slot of the request table, marked busy. Holds `mutex`.
  size_t takeSlot() {
    size_t index = slots.size();
    if (!freeSlots.empty()) {
      index = freeSlots.back();
      freeSlots.pop_back();
    } else {
      slots.emplace_back();
    }
    slots[index].busy = true;
    return index;
  }

  Status failure(const std::string &what) const {
    return collectiveError("rank ", information.rank, " of ",
                           information.worldSize, ": ", what);
  }

  /// Polls `requests` until all are done, the timeout passes or MPI fails.
  /// Sleeps between polls after the first few, so that a waiting rank leaves
  /// the cores to the compute of ranks sharing its node.
  Status waitFor(std::vector<MPI_Request> &requests, const std::string &what) {
    Clock::time_point start = Clock::now();
    for (long polls = 0;; ++polls) {
      int done = 0;
      {
        std::lock_guard<std::mutex> lock(mutex);
        if (int error =
                MPI_Testall(static_cast<int>(requests.size()), requests.data(),
                            &done, MPI_STATUSES_IGNORE))
          return failure("MPI_Testall on " + what +
                         " failed: " + mpiErrorText(error));
      }
      if (done)
        return Status();
      double waited =
          std::chrono::duration<double>(Clock::now() - start).count();
      if (timeout > 0 && waited > timeout) {
        char seconds[32];
        std::snprintf(seconds, sizeof(seconds), "%g", timeout);
        return failure("timed out after " + std::string(seconds) +
                       " s waiting for " + what +
                       "; another rank failed, hung or stopped issuing the "
                       "same collectives");
      }
      if (polls > 1000)
        std::this_thread::sleep_for(
            std::chrono::microseconds(polls > 100000 ? 1000 : 50));
    }
  }

  /// Ends every rank: what compiled code cannot be told.
  [[noreturn]] void fatal(const std::string &message) {
    std::string line =
        message.rfind("rank ", 0) == 0 ? message : failure(message).message();
    std::fprintf(stderr, "kiln: error: %s\n", line.c_str());
    abort(1);
    _exit(1);
  }

  MPI_Comm comm;
  DistributedInfo information;
  double timeout;
  bool ownsMpi;
  std::mutex mutex;
  /// A deque, so that a slot stays put while the table grows.
  std::deque<Slot> slots;
  std::vector<size_t> freeSlots;
};

std::mutex stateMutex;
std::unique_ptr<Communicator> current;
/// `current` for the collectives, read without the lock.
std::atomic<Communicator *> active{nullptr};
bool mpiFinalized = false;

Communicator &communicator() {
  static SingleRank fallback;
  Communicator *comm = active.load(std::memory_order_acquire);
  return comm ? *comm : fallback;
}

bool hasEnv(const char *name) {
  const char *value = std::getenv(name);
  return value && *value;
}

/// MPI set up on the duplicate of MPI_COMM_WORLD.
Status createMpiCommunicator(double timeoutSeconds,
                             std::unique_ptr<Communicator> &out) {
  int initialized = 0, ownsMpi = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided) !=
        MPI_SUCCESS)
      return collectiveError("MPI_Init_thread failed");
    ownsMpi = 1;
    if (provided < MPI_THREAD_SERIALIZED)
      return collectiveError("the MPI library provides thread level ", provided,
                             ", below MPI_THREAD_SERIALIZED");
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm comm = MPI_COMM_NULL, local = MPI_COMM_NULL;
  DistributedInfo info;
  info.backend = "mpi";
  int error = MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  if (error == MPI_SUCCESS)
    error = MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  if (error == MPI_SUCCESS)
    error = MPI_Comm_rank(comm, &info.rank);
  if (error == MPI_SUCCESS)
    error = MPI_Comm_size(comm, &info.worldSize);
  if (error == MPI_SUCCESS)
    error = MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, info.rank,
                                MPI_INFO_NULL, &local);
  if (error == MPI_SUCCESS)
    error = MPI_Comm_rank(local, &info.localRank);
  if (error == MPI_SUCCESS)
    error = MPI_Comm_size(local, &info.localSize);
  if (local != MPI_COMM_NULL)
    MPI_Comm_free(&local);
  if (error != MPI_SUCCESS)
    return collectiveError("setting up the MPI communicator failed: ",
                           mpiErrorText(error));
  out = std::make_unique<MpiCommunicator>(comm, info, timeoutSeconds,
                                          ownsMpi != 0);
  return Status();
}

} // namespace

bool launchedByMpi() {
  return hasEnv("OMPI_COMM_WORLD_SIZE") || hasEnv("PMIX_RANK") ||
         hasEnv("PMI_RANK") || hasEnv("PMI_SIZE") ||
         (hasEnv("SLURM_PROCID") && hasEnv("SLURM_STEP_ID"));
}

Status initDistributed(double timeoutSeconds, DistributedInfo &info) {
  std::lock_guard<std::mutex> lock(stateMutex);
  if (current)
    return invalidArgument("kiln_distributed_init: already initialised");
  if (mpiFinalized)
    return unsupported("kiln_distributed_init: MPI cannot be initialised "
                       "again after kiln_distributed_finalize");
  std::unique_ptr<Communicator> comm;
  if (launchedByMpi())
    KILN_RETURN_IF_ERROR(createMpiCommunicator(timeoutSeconds, comm));
  else
    comm = std::make_unique<SingleRank>();
  info = comm->info();
  current = std::move(comm);
  active.store(current.get(), std::memory_order_release);
  return Status();
}

Status finalizeDistributed() {
  std::lock_guard<std::mutex> lock(stateMutex);
  if (!current)
    return Status();
  KILN_RETURN_IF_ERROR(current->finalize());
  mpiFinalized = std::string(current->info().backend) == "mpi";
  active.store(nullptr, std::memory_order_release);
  current.reset();
  return Status();
}

void abortDistributed(int exitCode) { communicator().abort(exitCode); }

Status barrier() { return communicator().barrier(); }

Status allReduce(double *values, size_t count, ReduceOp op) {
  return communicator().allReduce(values, count, op);
}

Status broadcast(void *data, size_t bytes, int root) {
  return communicator().broadcast(data, bytes, root);
}

Status allGather(const void *input, void *output, size_t bytes) {
  return communicator().allGather(input, output, bytes);
}

DistributedInfo distributedInfo() { return communicator().info(); }

double collectiveTimeoutSeconds() { return communicator().timeoutSeconds(); }

} // namespace kiln::runtime

extern "C" {

int64_t kiln_collective_all_reduce_mean_f32_begin(float *data, int64_t count) {
  return kiln::runtime::communicator().beginMeanF32(data, count);
}

namespace {

/// The sharded optimizer's collectives run only at the world size their
/// step was compiled for (sessions refuse others; this guards callers that
/// bypass them).
kiln::runtime::Communicator &communicatorFor(int64_t ranks, const char *call) {
  kiln::runtime::Communicator &comm = kiln::runtime::communicator();
  int worldSize = comm.info().worldSize;
  if (ranks != worldSize) {
    std::fprintf(stderr,
                 "kiln: error: rank %d of %d: %s: the step was compiled for "
                 "%lld ranks (kilnc --shard-optimizer)\n",
                 comm.info().rank, worldSize, call,
                 static_cast<long long>(ranks));
    comm.abort(1);
    _exit(1);
  }
  return comm;
}

} // namespace

int64_t kiln_collective_reduce_scatter_mean_f32_begin(const float *input,
                                                      float *output,
                                                      int64_t count,
                                                      int64_t ranks) {
  return communicatorFor(ranks, "kiln_collective_reduce_scatter_mean_f32_begin")
      .beginReduceScatterMeanF32(input, output, count);
}

int64_t kiln_collective_all_gather_f32_begin(const float *input, float *output,
                                             int64_t count, int64_t ranks) {
  return communicatorFor(ranks, "kiln_collective_all_gather_f32_begin")
      .beginAllGatherF32(input, output, count);
}

void kiln_collective_local_shard_f32(const float *input, float *output,
                                     int64_t count, int64_t ranks) {
  kiln::runtime::Communicator &comm =
      communicatorFor(ranks, "kiln_collective_local_shard_f32");
  std::memcpy(output, input + comm.info().rank * count,
              static_cast<size_t>(count) * sizeof(float));
}

void kiln_collective_wait(int64_t request) {
  kiln::runtime::communicator().wait(request);
}

} // extern "C"
