//===- Collectives.h - the process-wide communicator ------------*- C++ -*-===//
//
// What the distributed part of the C API (kiln_distributed_*), the
// collectives compiled steps call (kiln/abi/collectives.h) and the backends
// that set up their own device communicators (BackendHost) share: one
// communicator per process, a single rank (no MPI call at all) or MPI.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_SRC_COLLECTIVES_H
#define KILN_RUNTIME_SRC_COLLECTIVES_H

#include "kiln/runtime/Status.h"

#include <cstddef>
#include <string>

namespace kiln::runtime {

struct DistributedInfo {
  int rank = 0;
  int worldSize = 1;
  int localRank = 0;
  int localSize = 1;
  /// "none" or "mpi".
  const char *backend = "none";
};

enum class ReduceOp { Sum, Min, Max };

/// Whether an MPI launcher (mpirun, srun) started this process, judged from
/// its environment.
bool launchedByMpi();

/// Sets up the communicator; `timeoutSeconds` <= 0 means no limit.
Status initDistributed(double timeoutSeconds, DistributedInfo &info);
Status finalizeDistributed();
/// MPI_Abort in an MPI run of several ranks; returns otherwise.
void abortDistributed(int exitCode);
Status barrier();
Status allReduce(double *values, size_t count, ReduceOp op);
/// Sends `bytes` bytes at `data` on rank `root` to `data` on every other
/// rank, bounded by the collective timeout; a single rank returns at once.
Status broadcast(void *data, size_t bytes, int root);
/// Writes every rank's `bytes` bytes at `input` to `output`, in rank order,
/// bounded by the collective timeout; a single rank copies.
Status allGather(const void *input, void *output, size_t bytes);

/// Where this process stands: what kiln_distributed_init said, or a single
/// rank when it was not called (or after kiln_distributed_finalize).
DistributedInfo distributedInfo();
/// The longest a rank waits for the others in one collective; 0 (no limit)
/// for a single rank, which has no one to wait for.
double collectiveTimeoutSeconds();

} // namespace kiln::runtime

#endif // KILN_RUNTIME_SRC_COLLECTIVES_H
