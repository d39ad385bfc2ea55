/*===- kiln/runtime.h - the C API of libkilnrt ----------------------------===*
 *
 * Opens compiled Kiln bundles (.kiln files) and runs their entry points.
 *
 * Conventions, as in IREE's runtime API:
 * - Objects are opaque handles. Whoever creates or opens one owns it and
 *   releases it with the matching _release function; release functions accept
 *   NULL.
 * - Every other function returns a kiln_status_t; KILN_OK (0) is success.
 *   On failure, kiln_status_message() on the same thread says what went wrong
 *   and names the file, section, array or offset at fault. Results come back
 *   through out_ parameters, which are written only on success.
 * - Nothing aborts the process and no C++ exception leaves the library. A
 *   bundle holds machine code: only run bundles from a source you trust.
 * - Each function states its thread safety.
 *
 * See docs/runtime.md for an example and docs/bundle-format.md for the file.
 *
 *===----------------------------------------------------------------------===*/

#ifndef KILN_RUNTIME_H
#define KILN_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#if defined(KILN_RUNTIME_BUILDING_LIBRARY)
#define KILN_API __attribute__((visibility("default")))
#else
#define KILN_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/*===----------------------------------------------------------------------===*
 * Status
 *===----------------------------------------------------------------------===*/

typedef enum kiln_status_t {
  KILN_OK = 0,
  /* A file could not be opened, read, mapped or written. */
  KILN_STATUS_IO_ERROR = 1,
  /* A bundle or array file is corrupt, truncated or not of the right kind. */
  KILN_STATUS_FORMAT_ERROR = 2,
  /* The caller passed something wrong: a NULL pointer, a tensor of the wrong
   * name, type, shape or size. */
  KILN_STATUS_INVALID_ARGUMENT = 3,
  /* No entry point, target or parameter has the given name or index. */
  KILN_STATUS_NOT_FOUND = 4,
  /* Valid, but beyond this runtime: a newer format version, a target it
   * cannot run, code for another architecture. */
  KILN_STATUS_UNSUPPORTED = 5,
  KILN_STATUS_OUT_OF_MEMORY = 6,
  /* A bug in the runtime. */
  KILN_STATUS_INTERNAL = 7,
  /* A collective across ranks failed: the MPI library reported an error, or
   * a wait passed the collective timeout (another rank failed or hung). */
  KILN_STATUS_COLLECTIVE_ERROR = 8,
} kiln_status_t;

/* The name of a status code, e.g. "format error". Never NULL.
 * Thread safety: safe from any thread. */
KILN_API const char *kiln_status_name(kiln_status_t status);

/* The message of the most recent call on the calling thread that failed, ""
 * if none has. Valid until the next failing call on this thread.
 * Thread safety: safe from any thread; each thread has its own message. */
KILN_API const char *kiln_status_message(void);

/*===----------------------------------------------------------------------===*
 * Tensors
 *===----------------------------------------------------------------------===*/

/* Element types; the values are those of kiln.bundle.ElementType. */
typedef enum kiln_element_type_t {
  KILN_ELEMENT_TYPE_F32 = 1,
  KILN_ELEMENT_TYPE_F16 = 2,
  KILN_ELEMENT_TYPE_BF16 = 3,
  KILN_ELEMENT_TYPE_F64 = 4,
  KILN_ELEMENT_TYPE_I64 = 5,
  KILN_ELEMENT_TYPE_I32 = 6,
  KILN_ELEMENT_TYPE_I8 = 7,
  /* One byte per element, 0 or 1. */
  KILN_ELEMENT_TYPE_BOOL = 8,
  KILN_ELEMENT_TYPE_U8 = 9,
  KILN_ELEMENT_TYPE_U16 = 10,
  KILN_ELEMENT_TYPE_U32 = 11,
  KILN_ELEMENT_TYPE_U64 = 12,
  KILN_ELEMENT_TYPE_I16 = 13,
  /* The narrow types: one byte per element, its bits in the low bits (the
   * layout of ml_dtypes' float8_e4m3fn ... uint2 arrays). */
  KILN_ELEMENT_TYPE_F8E4M3FN = 14,
  KILN_ELEMENT_TYPE_F8E4M3FNUZ = 15,
  KILN_ELEMENT_TYPE_F8E5M2 = 16,
  KILN_ELEMENT_TYPE_F8E5M2FNUZ = 17,
  KILN_ELEMENT_TYPE_F8E8M0 = 18,
  KILN_ELEMENT_TYPE_F4E2M1 = 19,
  KILN_ELEMENT_TYPE_I4 = 20,
  KILN_ELEMENT_TYPE_U4 = 21,
  KILN_ELEMENT_TYPE_I2 = 22,
  KILN_ELEMENT_TYPE_U2 = 23,
} kiln_element_type_t;

/* "f32", "f16", "bf16", "f64", "i64", "i32", "i16", "i8", "u64", "u32",
 * "u16", "u8", "bool", the narrow types' "f8e4m3fn", "f8e4m3fnuz",
 * "f8e5m2", "f8e5m2fnuz", "f8e8m0", "f4e2m1", "i4", "u4", "i2", "u2", or
 * "unknown".
 * Thread safety: safe from any thread. */
KILN_API const char *kiln_element_type_name(kiln_element_type_t type);

/* Bytes per element; 0 for an unknown type.
 * Thread safety: safe from any thread. */
KILN_API size_t kiln_element_type_size(kiln_element_type_t type);

/* A dense, row-major tensor the caller owns, passed to kiln_session_run.
 * `data` must be aligned to the element size (64 bytes is best) and hold
 * `byte_size` bytes, exactly what the element type and shape need. */
typedef struct kiln_tensor_t {
  const char *name;
  kiln_element_type_t element_type;
  int32_t rank;
  const int64_t *shape;
  void *data;
  size_t byte_size;
} kiln_tensor_t;

/* What a bundle says about a tensor. The strings and the shape belong to the
 * bundle and live as long as it. */
typedef struct kiln_tensor_info_t {
  const char *name;
  kiln_element_type_t element_type;
  int32_t rank;
  const int64_t *shape;
  size_t byte_size;
} kiln_tensor_info_t;

/*===----------------------------------------------------------------------===*
 * Bundle: an opened, fully validated .kiln file
 *===----------------------------------------------------------------------===*/

typedef struct kiln_bundle_t kiln_bundle_t;

typedef struct kiln_bundle_info_t {
  const char *producer;   /* e.g. "kilnc 0.1.0" */
  const char *model_name; /* may be "" */
  size_t entry_point_count;
  size_t target_count;
  size_t parameter_count;
  /* Bytes of all parameters together. */
  uint64_t parameter_bytes;
  /* Entries of the bundle's metadata (see kiln_bundle_get_metadata). */
  size_t metadata_count;
} kiln_bundle_info_t;

typedef struct kiln_entry_point_info_t {
  const char *name;
  size_t input_count;
  size_t output_count;
  /* The CPU target's commands and arena (0 and 0 in a bundle without a CPU
   * target); kiln_bundle_get_program describes the other targets'. */
  size_t command_count;
  /* Scratch memory a run of this entry point uses. */
  uint64_t arena_bytes;
} kiln_entry_point_info_t;

/* What an entry point runs on a target other than the CPU. */
typedef struct kiln_program_info_t {
  size_t command_count;
  /* Of which kernel launches and matrix products; the rest are attention
   * and layer-norm commands, collectives and the waits for them. */
  size_t launch_count;
  size_t gemm_count;
  uint64_t arena_bytes;
  /* All-reduces (AllReduceMean: gradients or the loss averaged over the
   * ranks of a data-parallel run, through NCCL on CUDA); 0 in a program
   * compiled without data parallelism. */
  size_t collective_count;
  /* A sharded optimizer's collectives (kilnc --shard-optimizer):
   * reduce-scatters and all-gathers (NCCL), and local shards (copies). */
  size_t shard_collective_count;
  /* Attention on the runtime's tensor-core kernels (each a forward, or a
   * backward of two launches); also counted in command_count only. */
  size_t attention_count;
  /* Layer normalization on the runtime's own kernels (each a forward, or a
   * backward of two launches); also counted in command_count only. */
  size_t layer_norm_count;
} kiln_program_info_t;

typedef struct kiln_target_info_t {
  const char *name;   /* e.g. "cpu" */
  const char *triple; /* e.g. "x86_64-unknown-linux-gnu" */
  const char *cpu;    /* e.g. "haswell"; may be "" */
  size_t kernel_count;
  /* Bytes of the target's code: the CPU's shared object, or all of a CUDA
   * target's images together. */
  uint64_t code_bytes;
  /* The architectures of a CUDA target's code images by format, e.g.
   * "sm_80 sm_90a cubin, compute_90a ptx"; "" for the CPU. */
  const char *images;
} kiln_target_info_t;

typedef struct kiln_parameter_info_t {
  kiln_tensor_info_t tensor;
  /* Nonzero when the training step updates the parameter from its gradient:
   * a weight it trains. Zero for optimizer state, for buffers (tensors the
   * exporter records as buffers or constants, or that kilnc --trainable
   * leaves out) and for parameters no gradient reaches (kilnc --freeze). */
  int trainable;
  /* Nonzero for optimizer state sharded over this many ranks (kilnc
   * --shard-optimizer): each rank's session holds its own shard, and a
   * session opens only in a run of exactly this many ranks. */
  int shard_ranks;
  /* Nonzero when the bundle's code relies on the parameter's stored value
   * (kilnc compiled it in: a mask buffer that makes attention causal).
   * kiln_session_set_parameter refuses any other value for it. */
  int fixed;
} kiln_parameter_info_t;

/* Opens the bundle at `path`: maps it read-only and checks everything (magic,
 * version, sizes, bounds, every checksum, the manifest). A corrupt, truncated
 * or foreign file fails with KILN_STATUS_FORMAT_ERROR (or UNSUPPORTED for a
 * newer format version), never crashes. Release with kiln_bundle_release.
 * The file must not be modified in place while open (writers that replace it
 * by rename, as kilnc does, are fine).
 * Thread safety: safe from any thread. */
KILN_API kiln_status_t kiln_bundle_open(const char *path,
                                        kiln_bundle_t **out_bundle);

/* Releases a bundle; sessions created from it stay valid. NULL is ignored.
 * Thread safety: no other call may use `bundle` at the same time. */
KILN_API void kiln_bundle_release(kiln_bundle_t *bundle);

/* The kiln_bundle_get_* queries only read the bundle.
 * Thread safety: safe from any number of threads at once. */
KILN_API kiln_status_t kiln_bundle_get_info(const kiln_bundle_t *bundle,
                                            kiln_bundle_info_t *out_info);

KILN_API kiln_status_t
kiln_bundle_get_entry_point(const kiln_bundle_t *bundle, size_t index,
                            kiln_entry_point_info_t *out_info);

/* The program entry point `entry_index` runs on the target called
 * `target_name` ("cuda"). KILN_STATUS_NOT_FOUND when the entry point has
 * none for that target (the CPU's is in kiln_entry_point_info_t). */
KILN_API kiln_status_t kiln_bundle_get_program(const kiln_bundle_t *bundle,
                                               size_t entry_index,
                                               const char *target_name,
                                               kiln_program_info_t *out_info);

/* The index of the entry point called `name`; KILN_STATUS_NOT_FOUND (with
 * the names there are in the message) if there is none. */
KILN_API kiln_status_t kiln_bundle_find_entry_point(const kiln_bundle_t *bundle,
                                                    const char *name,
                                                    size_t *out_index);

KILN_API kiln_status_t kiln_bundle_get_entry_point_input(
    const kiln_bundle_t *bundle, size_t entry_index, size_t input_index,
    kiln_tensor_info_t *out_info);

KILN_API kiln_status_t kiln_bundle_get_entry_point_output(
    const kiln_bundle_t *bundle, size_t entry_index, size_t output_index,
    kiln_tensor_info_t *out_info);

KILN_API kiln_status_t kiln_bundle_get_target(const kiln_bundle_t *bundle,
                                              size_t index,
                                              kiln_target_info_t *out_info);

KILN_API kiln_status_t kiln_bundle_get_parameter(
    const kiln_bundle_t *bundle, size_t index, kiln_parameter_info_t *out_info);

/* The value of the metadata entry `key`: string facts the compiler records
 * for drivers, e.g. "training.grad_accum" = "4" (docs/bundle-format.md lists
 * the keys kilnc writes). The string belongs to the bundle and lives as long
 * as it. KILN_STATUS_NOT_FOUND (naming the key) if the bundle has no such
 * entry, which for every key kilnc writes means its default. */
KILN_API kiln_status_t kiln_bundle_get_metadata(const kiln_bundle_t *bundle,
                                                const char *key,
                                                const char **out_value);

/* Metadata entry `index` (below kiln_bundle_info_t.metadata_count), in the
 * stored order (kilnc sorts them by key); the strings belong to the bundle.
 * KILN_STATUS_NOT_FOUND for an index out of range. */
KILN_API kiln_status_t
kiln_bundle_get_metadata_entry(const kiln_bundle_t *bundle, size_t index,
                               const char **out_key, const char **out_value);

/* A 64-bit identity of the bundle: FNV-1a over the manifest's bytes, then the
 * CRC-32 of every section (4 bytes little-endian each, in table order). It
 * changes when the manifest, the weights or the code change, and is equal for
 * byte-identical bundles wherever they are stored; drivers record it in
 * checkpoints to refuse resuming with another bundle. */
KILN_API kiln_status_t kiln_bundle_get_fingerprint(const kiln_bundle_t *bundle,
                                                   uint64_t *out_fingerprint);

/*===----------------------------------------------------------------------===*
 * Session: a bundle made ready to run on one target
 *===----------------------------------------------------------------------===*/

typedef struct kiln_session_t kiln_session_t;

/* Creates a session that runs `bundle` on the target called `target_name`
 * (NULL picks "cpu"). It loads the target's code and looks up every kernel,
 * allocates the arena once (64-byte aligned, large enough for every entry
 * point), and maps the parameters from the weights section copy-on-write, so
 * they cost no memory until written and the file never changes. The session
 * keeps what it needs of the bundle; the bundle may be released first.
 * A CUDA target (one with code images) runs in libkilnrt-cuda.so, loaded
 * from libkilnrt.so's directory on first use: the session loads the image
 * for the device (KILN_CUDA_DEVICE; unset, the local rank modulo the device
 * count, so device 0 for a single rank), allocates the arena and the
 * parameters in device memory and uploads the parameters; see
 * docs/runtime.md. When the CUDA programs hold all-reduces, the session
 * also joins an NCCL communicator of all ranks (kiln_distributed_init; a
 * single rank without it): every rank must then create its session, and
 * a rank left waiting for the others fails with
 * KILN_STATUS_COLLECTIVE_ERROR after the collective timeout.
 * Errors: KILN_STATUS_NOT_FOUND for an unknown target or a kernel the code
 * does not export, KILN_STATUS_UNSUPPORTED for a target this runtime cannot
 * run (a CUDA target without an NVIDIA driver, a device or the CUDA backend
 * library, naming what is missing) or code for another architecture,
 * KILN_STATUS_INVALID_ARGUMENT for a bundle whose optimizer state is sharded
 * over another number of ranks than the run has (kiln_parameter_info_t).
 * Thread safety: safe from any thread; sessions are independent of each
 * other, each with its own arena, parameters and copy of the code. */
KILN_API kiln_status_t kiln_session_create(const kiln_bundle_t *bundle,
                                           const char *target_name,
                                           kiln_session_t **out_session);

/* Releases a session, its arena, parameters and code. NULL is ignored.
 * Thread safety: no other call may use `session` at the same time. */
KILN_API void kiln_session_release(kiln_session_t *session);

/* The name prefix of the outputs that count an input's indices out of range
 * (see kiln_session_run); they are not the model's outputs. */
#define KILN_INDEX_CHECK_PREFIX "kiln.index_check|"

/* Runs the entry point `entry_point` once: reads `inputs`, writes `outputs`,
 * and updates parameters in place where the entry point does (a training
 * step). The tensors are matched by name, in any order; every input and
 * output of the entry point must be given exactly once with its element type,
 * shape and byte size. A missing, extra, duplicated, mistyped or misshaped
 * tensor fails with KILN_STATUS_INVALID_ARGUMENT naming it, before anything
 * runs. Outputs must not overlap inputs. A run allocates nothing.
 * An entry point that indexes with an input (token ids into an embedding,
 * class labels of a loss) also returns, as an f32 output whose name starts
 * with KILN_INDEX_CHECK_PREFIX ("kiln.index_check|INPUT|RANGE"), how many
 * of that input's values were out
 * of range; when one is not zero the run fails with
 * KILN_STATUS_INVALID_ARGUMENT naming the input and its range. The run has
 * happened then, with those indices clamped into range: its outputs, and a
 * training step's update of the parameters, are not to be used.
 * The compiled kernels are multithreaded themselves (their parallel loops and
 * matrix products share one OpenMP thread pool, all cores by default;
 * OMP_NUM_THREADS limits it, and OpenBLAS runs single-threaded on it); the
 * commands of one run execute in order on the calling thread.
 * Thread safety: safe from any thread; calls on one session are serialized
 * (they share its arena and parameters), calls on different sessions run in
 * parallel. */
KILN_API kiln_status_t kiln_session_run(kiln_session_t *session,
                                        const char *entry_point,
                                        const kiln_tensor_t *inputs,
                                        size_t input_count,
                                        const kiln_tensor_t *outputs,
                                        size_t output_count);

/* Stages inputs for a later kiln_session_run_staged of `entry_point`, so
 * that a loader thread prepares batch k+1 while the step runs batch k. The
 * tensors are checked as kiln_session_run checks its inputs (errors name the
 * tensor) and copied before the call returns, so the caller may reuse them at
 * once: on the CPU into a buffer of the session's; on a CUDA target into
 * pinned host memory, from which their copy to the device starts on a stream
 * of its own, overlapping the run in progress, and the call returns without
 * waiting for it. Staged sets wait in order, at most two at a time (a loader
 * may stage set k+1 before the run of set k has taken it); each staged run
 * takes the oldest. A third stage while two wait fails with
 * KILN_STATUS_INVALID_ARGUMENT; a failed stage leaves the waiting sets as
 * they were. The first call for an entry point allocates its staging
 * buffers (on the CPU three times the inputs' size; on CUDA once pinned and
 * twice on the device).
 * Thread safety: safe from any thread; staging calls on one session are
 * serialized with each other, but not with the session's runs: a stage may
 * go on while another thread is inside a run of the same session. */
KILN_API kiln_status_t kiln_session_stage_inputs(kiln_session_t *session,
                                                 const char *entry_point,
                                                 const kiln_tensor_t *inputs,
                                                 size_t input_count);

/* Runs `entry_point` as kiln_session_run does, on the oldest set of inputs
 * kiln_session_stage_inputs staged for it, which the run uses up: each
 * staged set serves one run. With nothing staged it fails with
 * KILN_STATUS_INVALID_ARGUMENT before anything runs; the outputs are checked
 * as kiln_session_run checks them.
 * Thread safety: as kiln_session_run. */
KILN_API kiln_status_t kiln_session_run_staged(kiln_session_t *session,
                                               const char *entry_point,
                                               const kiln_tensor_t *outputs,
                                               size_t output_count);

/* Stores in `*out_bytes` the size of the arena the session allocated when it
 * was created: the largest arena of its entry points (kilnc --report=memory
 * prints the same figure as the peak arena). Runs allocate nothing more.
 * Thread safety: safe from any thread. */
KILN_API kiln_status_t kiln_session_get_arena_bytes(
    const kiln_session_t *session, uint64_t *out_bytes);

/* Copies the current value of the parameter called `name` into `data`
 * (`byte_size` bytes, exactly the parameter's size); see
 * kiln_bundle_get_parameter for its type and shape.
 * Thread safety: safe from any thread; serialized with runs of the session. */
KILN_API kiln_status_t kiln_session_get_parameter(kiln_session_t *session,
                                                  const char *name, void *data,
                                                  size_t byte_size);

/* Replaces the value of the parameter called `name` with `byte_size` bytes
 * (exactly its size) from `data`, e.g. to load a checkpoint. A fixed
 * parameter (kiln_parameter_info_t) takes only the value it has:
 * KILN_STATUS_INVALID_ARGUMENT for any other.
 * Thread safety: safe from any thread; serialized with runs of the session. */
KILN_API kiln_status_t kiln_session_set_parameter(kiln_session_t *session,
                                                  const char *name,
                                                  const void *data,
                                                  size_t byte_size);

/*===----------------------------------------------------------------------===*
 * Distributed runs: ranks started by an MPI launcher
 *===----------------------------------------------------------------------===*/

/* How kiln_distributed_init sets up the process-wide communicator. */
typedef struct kiln_distributed_options_t {
  /* The longest a rank waits for one collective (a gradient all-reduce in a
   * compiled step, a barrier, a host all-reduce) before it gives up: another
   * rank has then failed, hung or left the step. <= 0: no limit. */
  double collective_timeout_seconds;
} kiln_distributed_options_t;

typedef struct kiln_distributed_info_t {
  /* This process's rank in [0, world_size), and among the ranks on its node
   * (shared memory) in [0, local_size). A single rank: 0, 1, 0, 1. */
  int32_t rank;
  int32_t world_size;
  int32_t local_rank;
  int32_t local_size;
  /* "mpi" when the ranks communicate through MPI, "none" for a single
   * process that no launcher started. */
  const char *backend;
} kiln_distributed_info_t;

/* Sets up the process-wide communicator that kiln/abi/collectives.h (called by
 * steps compiled with kilnc --data-parallel), kiln_distributed_barrier and
 * kiln_distributed_all_reduce_f64 use, and says where this process stands.
 * When an MPI launcher started the process (mpirun or srun: the environment
 * holds OMPI_COMM_WORLD_SIZE, PMIX_RANK, PMI_RANK or PMI_SIZE, or
 * SLURM_PROCID within a job step), it initialises MPI (unless the
 * application already has), duplicates MPI_COMM_WORLD and sets
 * MPI_ERRORS_RETURN on it; otherwise it makes a single rank and makes no MPI
 * call at all. `options` may be NULL (no timeout). Once per process:
 * KILN_STATUS_INVALID_ARGUMENT when already initialised, UNSUPPORTED after
 * kiln_distributed_finalize of an MPI run (MPI cannot start twice).
 * Thread safety: call once, before the collectives are used. */
KILN_API kiln_status_t
kiln_distributed_init(const kiln_distributed_options_t *options,
                      kiln_distributed_info_t *out_info);

/* Frees the communicator and finalises MPI if kiln_distributed_init
 * initialised it; every rank must call it (MPI_Finalize is collective), so a
 * rank that fails calls kiln_distributed_abort instead. Without an earlier
 * init it does nothing. No collective may be outstanding.
 * Thread safety: no other call of this section may run at the same time. */
KILN_API kiln_status_t kiln_distributed_finalize(void);

/* In an MPI run of several ranks, ends every rank's process with
 * `exit_code` (MPI_Abort) and does not return: what a rank that fails calls,
 * so that the others do not wait for it. In a single rank (or before init)
 * it does nothing and returns; the caller then exits as it would have.
 * Thread safety: safe from any thread. */
KILN_API void kiln_distributed_abort(int exit_code);

/* Returns when every rank has called it; KILN_STATUS_COLLECTIVE_ERROR after
 * the collective timeout or on an MPI error, naming the rank. A single rank
 * returns at once.
 * Thread safety: safe from any thread; all ranks must issue the same
 * collectives in the same order. */
KILN_API kiln_status_t kiln_distributed_barrier(void);

typedef enum kiln_reduce_op_t {
  KILN_REDUCE_SUM = 0,
  KILN_REDUCE_MIN = 1,
  KILN_REDUCE_MAX = 2,
} kiln_reduce_op_t;

/* Replaces the `count` host doubles at `values` by their reduction over all
 * ranks (e.g. to average a metric, or to agree whether any rank failed:
 * MAX of 0/1 flags). Errors as kiln_distributed_barrier.
 * Thread safety: as kiln_distributed_barrier. */
KILN_API kiln_status_t kiln_distributed_all_reduce_f64(double *values,
                                                       size_t count,
                                                       kiln_reduce_op_t op);

/* Writes every rank's `bytes` bytes at `input` to `output` (world size times
 * `bytes`), rank 0's first: e.g. to save the shards of a sharded optimizer
 * state. A single rank copies. Errors as kiln_distributed_barrier.
 * Thread safety: as kiln_distributed_barrier. */
KILN_API kiln_status_t kiln_distributed_all_gather(const void *input,
                                                   void *output, size_t bytes);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* KILN_RUNTIME_H */
