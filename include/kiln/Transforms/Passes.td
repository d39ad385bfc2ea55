//===- Passes.td - Kiln's passes both targets run ----------*- tablegen -*-===//
//
// The passes of the tensor and buffer pipelines that every target runs
// (lib/Transforms/), in the order lib/Compiler/Pipelines.cpp runs them.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TRANSFORMS_PASSES_TD
#define KILN_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def KilnCheckIndices : Pass<"kiln-check-indices", "mlir::ModuleOp"> {
  let summary = "Counts the out-of-range indices an entry point is given";
  let description = [{
    Lowered, a gather or a loss clamps an index into range, so a token id
    past the vocabulary or a class label past the classes trains silently on
    the wrong row. For every function with a body, each index operand that
    is one of its arguments (through casts and reshapes) gets a count, in
    the same run, of its elements outside the range they may take:
    - the indices of `kiln.gather` from a parameter (an embedding table):
      `[0, n)`, as `torch.nn.Embedding`; from other data: `[-n, n)`, as
      ONNX's Gather, where a negative index counts from the end;
    - the labels of `kiln.cross_entropy`, `kiln.cross_entropy_grad` and
      `kiln.nll_loss`: `[0, C)` or `ignore_index`.
    Each count is an f32 scalar result appended to the function, named
    `kiln.index_check|INPUT|RANGE` (INPUT the argument's `kiln.name`, RANGE
    the allowed values in words): the runtime fails a run whose count is not
    zero, naming the input (docs/runtime.md). Indices the graph computes
    itself are not counted.
  }];
  let dependentDialects = ["::kiln::KilnDialect"];
}

def KilnFuseGelu : Pass<"kiln-fuse-gelu", "mlir::ModuleOp"> {
  let summary = "Recognises GELU written out as elementwise ops";
  let description = [{
    Rewrites `0.5 * x * (1 + erf(x / sqrt(2)))` into `kiln.gelu` and
    `0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))` into
    `kiln.gelu {approximate = tanh}`, as exporters write GELU where the
    opset has no Gelu operator (ONNX before opset 20). The products and sums
    may be grouped in any order, division by a constant counts as
    multiplication by its reciprocal, `x^3` may be `pow(x, 3)` or products,
    and constants may be broadcast splats (matched to a relative 1e-5).
    Every intermediate value must have no other user. A training step then
    keeps `x` for the backward pass instead of the intermediates.
  }];
  let dependentDialects = ["::kiln::KilnDialect"];
}

def KilnFuseAttention : Pass<"kiln-fuse-attention", "mlir::ModuleOp"> {
  let summary = "Recognises attention and forms kiln.attention";
  let description = [{
    Rewrites the chain
    `matmul(q, kᵀ) [* c | / c] [masked by select] [+ mask] -> softmax -> matmul(·, v)`
    into one `kiln.attention`, so that kiln-autodiff differentiates it with
    its own rule instead of through the softmax's decomposition. `c` is a
    splat constant (the scale is `c` or `1 / c`), applied to the scores or
    to q or k before the product (the factors multiply); the softmax is
    along the last dimension. The mask is an added tensor (a broadcast one
    is taken before the broadcast), a `select` that puts -inf where a
    condition holds (or where it does not), which becomes the additive mask
    `select(cond, -inf, 0)`, or such a select with a mask added after it,
    the two masks summed. A select may fill with a finite value at most
    -2^100 (the lowest float, as Hugging Face's GPT-2 and DistilBERT do).
    Where its condition is a constant that keeps a key in every row and no
    mask is added after it, that is exactly -inf. Where a row may drop
    every key (a padding condition, as DistilBERT's), PyTorch's
    probabilities there are uniform and its scores get no gradient: the
    attention is `masked_fill`, its mask `select(cond, fill, 0)`, which
    gives both. A mask added after such a fill makes a row it drops whole
    uniform over the keys the sum leaves at the fill, with a gradient only
    for those the select kept. Where the select drops exactly the keys
    after each query's position (Hugging Face's GPT-2 with an attention
    mask), the attention is `causal_fill`, its mask `select(cond, 0, fill)`
    plus the added one; on any other condition that chain stays expanded,
    with a remark on its last product (kilnc prints the first as a note).
    The transposes of
    q, k and v, as matmul flags or as transpose ops, become transposes of
    the operands. A chain fuses only when each of its intermediate values
    has no other user.
  }];
  let dependentDialects = ["::kiln::KilnDialect"];
}

def KilnDecompose : Pass<"kiln-decompose", "mlir::ModuleOp"> {
  let summary = "Expands composite kiln ops into the core ops";
  let description = [{
    Rewrites softmax, log-softmax, attention and layer normalization and
    their gradients, batch normalization, the losses and the cross-entropy's
    gradient, and reduce_mean /
    reduce_l2 / reduce_logsumexp into elementwise ops, matrix products, broadcasts, reductions and gathers.
    Activations defined by formulas (gelu, sigmoid, softplus...) stay: code
    generation computes them directly. An nll_loss of a log_softmax over the
    classes that nothing else reads becomes kiln.cross_entropy first (its
    canonicalization), which keep-cross-entropy then keeps.
  }];
  let options = [
    Option<"keepAttention", "keep-attention", "bool", "false",
           "Leave kiln.attention and kiln.attention_grad as they are (kilnc "
           "does until kiln-autodiff has used attention's own gradient, and "
           "for the CUDA target until kiln-attention-kernel)">,
    Option<"keepLayerNorm", "keep-layer-norm", "bool", "false",
           "Leave kiln.layer_norm and kiln.layer_norm_grad as they are "
           "(kilnc does until kiln-autodiff has used the layer norm's own "
           "gradient, and for the CUDA target until kiln-fused-layer-norm)">,
    Option<"keepCrossEntropy", "keep-cross-entropy", "bool", "false",
           "Leave kiln.cross_entropy as it is where its class weights are "
           "absent or a constant (kilnc does until kiln-autodiff has used "
           "its own gradient, kiln.cross_entropy_grad)">
  ];
  let dependentDialects = ["::kiln::KilnDialect"];
}

def KilnExternalizeParams : Pass<"kiln-externalize-params", "mlir::ModuleOp"> {
  let summary = "Turns kiln.get_param reads into entry function arguments";
  let description = [{
    Every function that reads parameters gets one argument per parameter it
    reads, appended after its own, marked with `kiln.param = "NAME"`; the
    reads are replaced by those arguments. The parameters themselves stay in
    the module: their initial values go into the bundle.
  }];
}

def KilnMatmulAccumulate : Pass<"kiln-matmul-accumulate", "mlir::ModuleOp"> {
  let summary = "Folds an addition into the matrix product that feeds it";
  let description = [{
    Runs on linalg on tensors, before elementwise fusion. A matrix product
    (a contraction marked `kiln.matmul`) accumulates into its output, so an
    elementwise `x + y` of two same-shaped tensors (identity indexing, one
    `arith.addf`) where one operand is a product into a zero fill that
    nothing else reads (possibly through a `tensor.expand_shape`, the other
    operand then collapsed to the product's shape) becomes that product
    accumulating into the other operand, when that operand is computed (not
    an argument, a broadcast or a transposition) and read by nothing else:
    typically two gradient contributions to one value, the later product
    accumulating into the earlier. The addition's loop and buffer go, and
    `kiln-lower-gemm-to-blas` calls gemm with beta = 1. A broadcast bias is
    left to elementwise fusion, which reads it in the consumer's pass.
  }];
  let statistics = [
    Statistic<"numFolded", "folded", "Additions folded into matrix products">
  ];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect"];
}

def KilnFuseElementwise : Pass<"kiln-fuse-elementwise", "mlir::ModuleOp"> {
  let summary = "Fuses elementwise linalg ops into their consumers, within limits";
  let description = [{
    Runs on linalg on tensors, after convert-kiln-to-linalg and CSE. Applies
    linalg's elementwise fusion patterns (those of
    `linalg-fuse-elementwise-ops`: an all-parallel `linalg.generic` whose
    result another reads is merged into that reader), fusing a producer
    into the consumer that reads it unless:
    - the consumer is marked `kiln.matmul`: matrix products stay plain
      contractions, which kiln-lower-gemm-to-blas turns into BLAS calls;
    - the value is returned by the function (a `func.return` operand): it is
      materialized anyway, reading it beats recomputing it, and an optimizer
      update can then write it in place (kiln-update-in-place).

    Otherwise a producer whose payload only yields its inputs (a broadcast, a
    transposition) always fuses. A producer that computes something does
    not fuse when its value has several users (each would recompute it; a
    training step keeps forward values for the backward pass anyway), but
    for an optimizer loop of at most four `arith` operations (or a square
    root or its reciprocal) that only optimizer loops read, element for
    element: with `--amp=fp16` a parameter's update reads each new moment
    for the step and again to keep it or the old one, and recomputing it in
    each beats writing it to memory from a kernel of its own. Nor does it
    fuse into a `linalg.generic` that reads it through an indexing map that is
    not a permutation (one that broadcasts it, as a contraction does its
    operands: the producer's work would be redone for every element of the
    broadcast, a 0-d bias correction computed per parameter element).

    Then, in the optimizer update (ops marked with the optimizer phase, see
    `kiln-train-step`), a loop that computes a new state which only the
    return and one update loop read (Adam's moments, read by the new
    parameter), with the same iteration space and identity indexing on both
    sides, is merged into that update loop: the merged loop computes the
    state once, yields it as an extra result and uses it for the others. An
    AdamW step then takes one loop per parameter instead of three, and
    `kiln-update-in-place` writes each of its results into its own storage.
    Last, the finished updates (results only returned) of parameters with
    the same iteration space are merged side by side, up to
    `updates-per-loop` parameters a loop (8 by default, as the CUDA target
    compiles: fewer launches; the CPU target takes 2, since every merged
    parameter adds seven arrays the loop streams at once).

    With `transposes` (the CUDA target), `linalg.transpose` ops become
    `linalg.generic` first, so that a transposition fuses into the
    elementwise kernel that reads it (attention's per-head q, k and v into
    their rounding to bf16) instead of being a kernel of its own.

    With `cheap-broadcasts` (the CUDA target), a producer with one use whose
    payload is at most four `arith` operations, or a square root or its
    reciprocal, also fuses into a consumer that broadcasts it: a
    normalization's mean (`sum / n`) and reciprocal deviation, per row, are
    recomputed for each element of the row instead of being kernels of
    their own.
  }];
  let options = [
    Option<"transposes", "transposes", "bool", /*default=*/"false",
           "Fuse linalg.transpose ops too, as linalg.generic">,
    Option<"cheapBroadcasts", "cheap-broadcasts", "bool", /*default=*/"false",
           "Fuse cheap producers into consumers that broadcast them">,
    Option<"updatesPerLoop", "updates-per-loop", "unsigned", /*default=*/"8",
           "Merge at most this many same-shaped parameters' optimizer "
           "updates into one loop (1: none merged)">
  ];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::tensor::TensorDialect"];
}

def KilnSplitSharedFills : Pass<"kiln-split-shared-fills", "mlir::ModuleOp"> {
  let summary = "Gives each user of a tensor fill its own fill";
  let description = [{
    Runs on linalg on tensors, just before bufferization. A `linalg.fill` on
    tensors of a `tensor.empty` whose result has several uses (CSE merges the
    identical zero inits of reductions and matrix products into one) becomes
    one copy of the `tensor.empty` and the fill per use, placed just before
    its user. Bufferized, the shared value would be allocated once and copied
    into a fresh buffer for every user that writes it; a fill per user writes
    each buffer once, where a product that overwrites its output finds it
    dead. Fills of anything but a `tensor.empty` stay shared.
  }];
}

def KilnOrderGlobals : Pass<"kiln-order-globals", "mlir::ModuleOp"> {
  let summary = "Orders and names bufferized constants by their contents";
  let description = [{
    One-shot bufferization makes each constant tensor a `memref.global`,
    named from its type and a counter, in the order it visits the functions,
    which changes from run to run. This pass sorts the module's private
    globals by type, then by their bytes, merges equal ones, names them
    `__constant_0`, `__constant_1`, ... in that order and puts them at the
    top of the module, so that the same model always gives the same bundle.
  }];
  let dependentDialects = ["::mlir::memref::MemRefDialect"];
}

def KilnUpdateInPlace : Pass<"kiln-update-in-place", "mlir::ModuleOp"> {
  let summary = "Writes parameter updates straight into the parameter's storage";
  let description = [{
    After bufferization each result is computed into its own buffer and
    copied into its out-parameter at the end. An out-parameter marked
    `kiln.update = "<param>"` is the parameter's own storage at run time, so
    for those the pass makes the elementwise kernel that computes the new
    value write the out-parameter directly, and drops the copy and the
    buffer, when that is safe: every other read of the old value comes
    before the kernel (the kernel moves down past the last one when nothing
    in between touches what it reads or writes), and the kernel reads the old
    value only at the element it writes (same permutation indexing map, all
    loops parallel). A kernel with several outputs (a parameter and its
    optimizer states) is handled output by output. Otherwise the copy stays.
  }];
  let dependentDialects = ["::mlir::memref::MemRefDialect"];
}

def KilnPlanMemory : Pass<"kiln-plan-memory", "mlir::ModuleOp"> {
  let summary = "Places every transient buffer in one arena";
  let description = [{
    Runs on bufferized IR. Every statically shaped `memref.alloc` in an entry
    function becomes a `memref.view` into one `memref<Nxi8>` arena argument
    appended to the function (marked `kiln.arena`), at an offset chosen from
    the buffers' live intervals: buffers whose intervals do not overlap share
    memory. Buffers are placed largest first, each at a 64-byte aligned
    offset in a gap left by the buffers alive at the same time: the smallest
    gap it fits in (best fit), or, where that packs worse for the function,
    the lowest (first fit). The arena size is recorded as the
    `kiln.arena_bytes` function attribute.

    At the position where the buffers alive at once are largest (`live`,
    the least any placement could need), `kiln.arena_peak` records what
    they hold, by the phase of the op that first writes each buffer (see
    `kiln-train-step`): `activations`, values of the forward pass;
    `gradients`, values of the backward pass still alive when the optimizer
    update begins; `workspace`, everything else (temporaries of the backward
    pass and of the update). The sizes are rounded up to the alignment.

    With `reuse-distance=N` (the CUDA target's pipeline sets 256), a
    buffer also keeps off the bytes of the buffers alive within N ops
    (those that touch memory: not views, allocations or constants) of it,
    before or after, where that fits in the arena of the buffers placed
    before it; where it does not, it keeps off those within N/2 ops, N/4,
    and so on down to 1, and otherwise takes the plain placement's gap.
    Kernels near each other that share no buffer can then run as one launch
    (`kiln-gpu-merge-launches`), where reusing the bytes one has just
    finished reading would order them. A buffer placed this way can still
    push a later, smaller one past the arena's end: the placement is kept
    when its arena is at most 1/16 larger than the plain one's, which is
    kept otherwise.
  }];
  let options = [
    Option<"reuseDistance", "reuse-distance", "unsigned", "0",
           "Ops within which buffers keep off each other's bytes where the "
           "arena has room (0: a buffer's bytes are free once it is dead)">
  ];
  let dependentDialects = ["::mlir::memref::MemRefDialect",
                           "::mlir::arith::ArithDialect"];
}

#endif // KILN_TRANSFORMS_PASSES_TD
