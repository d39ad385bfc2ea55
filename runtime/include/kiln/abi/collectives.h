/*===- kiln/abi/collectives.h - collectives compiled steps call ----*- C -*-===*
 *
 * The functions a step compiled with `kilnc --data-parallel` calls to
 * average its gradients across ranks. libkilnrt exports them; the step's CPU
 * shared object, which libkilnrt loads, refers to them by name.
 *
 * They work on the process-wide communicator that kiln_distributed_init
 * (kiln/runtime.h) sets up. Without it, or in a run of one rank, they return
 * at once and change nothing. Compiled code cannot receive errors, so an
 * error (a failing MPI call, a wait that passes the collective timeout, a
 * request that is not outstanding) prints one line naming the rank and the
 * failing call on stderr and ends every rank with exit status 1 (MPI_Abort).
 *
 * Thread safety: the communicator serializes its calls; requests may be
 * issued and waited on from any thread, each request waited on exactly once.
 *
 *===----------------------------------------------------------------------===*/

#ifndef KILN_COLLECTIVES_H
#define KILN_COLLECTIVES_H

#include <stdint.h>

#if defined(KILN_RUNTIME_BUILDING_LIBRARY)
#define KILN_COLLECTIVE_API __attribute__((visibility("default")))
#else
#define KILN_COLLECTIVE_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Starts replacing the `count` f32 values at `data` by their mean over all
 * ranks (an in-place sum, then a division by the world size) and returns a
 * request to wait on before `data` is read or written again. Returns 0, with
 * nothing to wait for, in a run of one rank or for count 0. */
KILN_COLLECTIVE_API int64_t
kiln_collective_all_reduce_mean_f32_begin(float *data, int64_t count);

/* The sharded optimizer's collectives (kilnc --shard-optimizer). `ranks` is
 * the world size the step was compiled for; a run of another size is an
 * error (as above). `input` and `output` must not overlap. */

/* Starts writing to `output` this rank's shard, `count` values, of the mean
 * over all ranks of their `ranks * count` values at `input` (shard r is
 * elements [r * count, (r + 1) * count)). Returns a request to wait on
 * before either buffer is touched again; 0 when done at once (one rank). */
KILN_COLLECTIVE_API int64_t kiln_collective_reduce_scatter_mean_f32_begin(
    const float *input, float *output, int64_t count, int64_t ranks);

/* Starts writing to `output` every rank's `count` values at `input`, rank
 * 0's first; a request as above. */
KILN_COLLECTIVE_API int64_t kiln_collective_all_gather_f32_begin(
    const float *input, float *output, int64_t count, int64_t ranks);

/* Copies this rank's shard, `count` values, of the `ranks * count` values at
 * `input` to `output`. No communication. */
KILN_COLLECTIVE_API void kiln_collective_local_shard_f32(const float *input,
                                                         float *output,
                                                         int64_t count,
                                                         int64_t ranks);

/* Waits until the request's collective is done and its output holds the
 * result; the request is then free. Request 0 returns at once. */
KILN_COLLECTIVE_API void kiln_collective_wait(int64_t request);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* KILN_COLLECTIVES_H */
