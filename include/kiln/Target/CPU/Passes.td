//===- Passes.td - the CPU target's passes -----------------*- tablegen -*-===//
//
// The passes only the CPU target runs (lib/Target/CPU/Transforms/).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TARGET_CPU_PASSES_TD
#define KILN_TARGET_CPU_PASSES_TD

include "mlir/Pass/PassBase.td"

def KilnOutlineKernels : Pass<"kiln-outline-kernels", "mlir::ModuleOp"> {
  let summary = "Moves each kernel into a private function of its own";
  let description = [{
    Runs on bufferized, memory-planned IR, as the CPU target's first step to
    loops. In every function with a body, each op of the entry block that is
    a linalg op or a `memref.copy` (a kernel) becomes a call of a new private
    function `<function>_kernel<N>` (N counts from 0 per function) marked
    `passthrough = ["noinline"]`, whose body is the kernel. The function's
    arguments are the kernel's operands and the values its regions use from
    outside, in that order; constants among them are cloned into the body
    instead. A kernel that would need an argument other than a statically
    shaped memref with the identity layout or a scalar (the bare-pointer
    calling convention entry functions use) stays where it is. LLVM's
    optimizer and scheduler grow faster than linearly with a function's
    size: many small functions compile much faster than one training step
    with hundreds of kernels.
  }];
  let dependentDialects = ["::mlir::func::FuncDialect"];
}

def KilnProfileMarks : Pass<"kiln-profile-marks", "mlir::ModuleOp"> {
  let summary = "Has every command of each entry function report its time";
  let description = [{
    Runs after kiln-outline-kernels. Each public function with a body (an
    entry point) calls `kiln_cpu_profile_start(slots)` first and
    `kiln_cpu_profile_mark(slots, id)` after each of its commands: a call of
    an outlined kernel, a matrix product kiln-lower-gemm-to-blas made (its
    `kiln.cost` attribute, which the pass removes), a call into the runtime
    (collectives and the like; not `omp_*` queries), any other op with
    regions. libkilnrt (kiln/abi/profile.h) adds the time since the previous
    call to the command's total when the environment variable
    `KILN_CPU_PROFILE` names a report file, and returns at once otherwise.

    Two exported globals carry the rest: `kiln_cpu_profile_slots`, i64s
    (the last mark's time, then each command's nanoseconds and count), and
    `kiln_cpu_profile_table`, a NUL-terminated text whose first line is
    `kiln-cpu-profile 1` and then one tab-separated line per command id:
    entry, kind (kernel, gemm, collective, call, loop), floating-point
    operations (a kernel's iterations times the arithmetic of its body; a
    product's 2 m n k per batch element), bytes read and bytes written (each
    operand's buffer once; an output is read too when the body reads it or a
    product accumulates into it), what it is (the op, its loop ranges and
    its body's arithmetic; a product's sizes) and where it came from (the
    ONNX node's name). Ids count from 0 across the module, in entry and op
    order. A module without commands is left as it is.
  }];
  let dependentDialects = ["::mlir::func::FuncDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::LLVM::LLVMDialect"];
}

def KilnSimdLoops : Pass<"kiln-simd-loops", "mlir::ModuleOp"> {
  let summary = "Makes the innermost loops of parallel dimensions omp.simd";
  let description = [{
    Runs on loops, before scf-to-openmp. An `scf.for` marked `kiln.parallel`
    (the CPU target marks the innermost loop it makes of a linalg op's
    parallel dimensions) becomes `omp.simd` around an `omp.loop_nest` with
    the same bounds and body, when LLVM can vectorize it: no iteration
    arguments, a body of `memref.load`, `memref.store` (each at an element
    indexed by the loop's variable) and scalar `arith` and `math` ops, with
    no call or nested region. The mark goes from every loop.

    Such a loop's iterations are independent however its buffers alias
    (each writes its own elements and reads an output only where it writes
    it), which LLVM cannot see when an update passes one buffer as input and
    output: it left those loops scalar. omp.simd's translation puts every
    access of the loop in one access group and marks the loop
    `llvm.loop.parallel_accesses` and `llvm.loop.vectorize.enable`, so LLVM
    vectorizes it without runtime overlap checks. Results are unchanged:
    each lane computes what its iteration did.
  }];
  let dependentDialects = ["::mlir::omp::OpenMPDialect"];
}

def KilnLowerGemmToBlas : Pass<"kiln-lower-gemm-to-blas", "mlir::ModuleOp"> {
  let summary = "Calls BLAS for f32 and f64 matrix products on buffers";
  let description = [{
    Rewrites the bufferized matrix products that convert-kiln-to-linalg marks
    with `kiln.matmul` into calls of `cblas_sgemm` / `cblas_dgemm`, passing
    the transposes as BLAS flags. A product whose output was just zero-filled
    overwrites it (beta = 0, and the fill goes); any other accumulates into
    it (beta = 1), as the contraction does.

    The products share the threads of the generated loops instead of
    OpenBLAS starting its own (the runtime runs OpenBLAS single-threaded): a
    product of at least 2^20 multiply-adds becomes an `scf.parallel` (an
    OpenMP worksharing loop) over its batch elements and, where the batch is
    smaller than the team, over blocks of the larger of its output's rows and
    columns (at least 32 each), one call per block; the team's size
    (`omp_get_max_threads`) is read at run time. Smaller products are one
    call per batch element on the calling thread.
  }];
  let dependentDialects = ["::mlir::func::FuncDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::arith::ArithDialect"];
}

def KilnPromoteReductionAccumulators
    : Pass<"kiln-promote-reduction-accumulators", "mlir::ModuleOp"> {
  let summary = "Carries a reduction loop's accumulator in a register";
  let description = [{
    Runs on the loops linalg's ops on buffers become
    (`convert-linalg-to-parallel-loops`), which accumulate a reduction through
    memory: every iteration of the reduction's `scf.for` loads the output
    element, combines and stores it back. LLVM can neither keep that element
    in a register (it cannot tell that the loop's other loads do not read it)
    nor vectorize the sum, and such loops were the scalar code of the CPU
    training step (softmax and layer-norm rows, losses, bias gradients).

    Where a loop's only write is one `memref.store` to an element the loop
    does not move (the buffer and indices defined outside it), and its only
    read of that buffer is one matching `memref.load` before the store, in
    the loop's own block, and nothing else in it has memory effects, the
    element becomes the loop's iteration argument: loaded before the loop,
    stored after it. Inner loops come first, so a nest of reduction loops is
    promoted loop by loop. The pass relies on what holds for loops from linalg
    ops on buffers: a reduction's inputs never alias its output (one-shot
    bufferization keeps them apart), so no other load in the loop reads the
    element.

    A floating-point `arith.addf` or `arith.mulf` that combines the carried
    value gets the fastmath flag `reassoc`, which lets LLVM vectorize the
    reduction: the order of the additions changes, as it does in any
    vectorized or blocked reduction (PyTorch's included).
  }];
  let dependentDialects = ["::mlir::memref::MemRefDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::arith::ArithDialect"];
}

#endif // KILN_TARGET_CPU_PASSES_TD
