//===- Collectives.h - the process-wide communicator ------------*- C++ -*-===//
//
// What the distributed part of the C API (kiln_distributed_*) and the
// collectives compiled steps call (kiln/collectives.h) share: one
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

} // namespace kiln::runtime

#endif // KILN_RUNTIME_SRC_COLLECTIVES_H
