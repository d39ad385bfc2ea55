//===- Passes.td - the CUDA target's passes ----------------*- tablegen -*-===//
//
// The passes only the CUDA target runs (lib/Target/CUDA/Transforms/), in
// the order it runs them; kiln-gpu-emulate also makes the emulated CUDA
// target's CPU bundle.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TARGET_CUDA_PASSES_TD
#define KILN_TARGET_CUDA_PASSES_TD

include "mlir/Pass/PassBase.td"

def KilnFusedLayerNorm : Pass<"kiln-fused-layer-norm", "mlir::ModuleOp"> {
  let summary = "Hands layer norms and their gradients to one kernel a row";
  let description = [{
    For the CUDA target: every `kiln.layer_norm` and `kiln.layer_norm_grad`
    on a statically shaped f32 tensor becomes a `kiln.fused_layer_norm` (or
    `kiln.fused_layer_norm_grad`) over the matrix whose rows are the
    leading dimensions and whose columns the normalized ones, reshaped back
    after. The runtime's kernels normalize a row per warp, so a layer norm
    is one kernel where its expansion is six to eight (the statistics'
    partial and final sums, centring, the normalized value and the affine
    map), and its gradient two where the expansion is seven, reading the
    input again instead of keeping the normalized value from the forward.
    A layer norm of a `kiln.add` of two tensors of its type (a residual
    connection), which nothing reads before it, adds them in its kernel and
    returns the sum too; a gradient whose input gradient only a `kiln.add`
    reads (the residual's gradient, summed with it), and whose other two
    are read only after that add, accumulates onto the add's other operand.
    kiln-amp then lets the forward write its result rounded for the matrix
    products that read it, and the gradient a rounded copy of the input's.
  }];
}

def KilnFlashAttention : Pass<"kiln-flash-attention", "mlir::ModuleOp"> {
  let summary = "Hands attention and its gradient to the tensor-core kernels";
  let description = [{
    For the CUDA target computing in bf16 or f16 (`amp`): every
    `kiln.attention` the kernels of `kiln.flash_attention` can take becomes
    one, and every `kiln.attention_grad` of its result (in the same block,
    after it) a `kiln.flash_attention_grad` that reads its statistics. The
    query, key and value are rounded to `amp` first (kiln.cast, which
    fuses with whatever rearranged them into heads); the output and the
    gradients stay f32.

    The kernels take [B, H, S, D] query, key and value with D 16, 32, 64 or
    128 (the value's too), at most 65535 heads in all, and a mask that is
    causal as kiln-attention-kernel tells it (the kernels stop at the
    diagonal and read none), absent, or an f32 mask whose key dimension is
    the keys' (any other dimension may broadcast: a padding mask, whose
    dropped tiles the kernels skip). Attention they cannot
    take stays for kiln-attention-kernel or kiln-decompose.

    With `cudnn`, the ops are marked `cudnn` for cuDNN's fused attention
    where it takes them and store their output and gradients in `amp`, as
    cuDNN writes them: readers widen them (kiln.cast), and the output's
    gradient is rounded to `amp` before the backward reads it. cuDNN takes
    causal attention (a causal_fill without a mask is then the same, since
    every row keeps its diagonal), none, and an additive mask (padding, or
    any bias the kernels take), which it reads clamped to at least -2^100
    (the mask is added to scores in whatever units cuDNN computes them:
    the lowest float times log2 e would be -inf there, and a row whose
    every key it drops NaN rather than uniform). Attention whose gradient
    fills its scores (masked_fill, or causal_fill with a mask) stays with
    Kiln's kernels. Key and value whose heads repeat heads of their own
    (reshape to [B, Hk, 1, S, D], broadcast to [B, Hk, G, S, D], reshape to
    [B, Hk G, S, D], as grouped-query attention is imported) reach cuDNN
    with their Hk heads, and its gradients of them replace the sums over
    each group (reshape to [B, Hk, G, S, D], reduce over G) that autodiff
    made, where those are their only readers.
  }];
  let options = [
    Option<"amp", "amp", "std::string", /*default=*/"\"bf16\"",
           "The 16-bit type the kernels compute in: bf16 or f16">,
    Option<"cudnn", "cudnn", "bool", /*default=*/"false",
           "Hand the attention cuDNN's fused attention takes to it "
           "instead (16-bit output and gradients)">,
  ];
}

def KilnAttentionKernel : Pass<"kiln-attention-kernel", "mlir::ModuleOp"> {
  let summary = "Computes attention and its gradient without storing scores";
  let description = [{
    For the CUDA target: every `kiln.attention` and `kiln.attention_grad`
    on f32 tensors whose head sizes are at most `max-head-size` becomes
    loops (`scf.forall`) over the batch dimensions and rows that never store
    the [B..., Sq, Sk] scores or probabilities:
    - attention: a point per query row reads its query row once, finds the
      maximum score m and the sum l of exp(score - m) in a first pass over
      the keys (l rescaled by exp(m_old - m_new) when the maximum grows),
      and adds the value rows weighted by their probabilities
      exp(score - m) / l in a second;
    - its gradient: a point per query row computes the query's gradient
      (the same two passes, the second adding dS k; the first is skipped
      when the forward is this pass's, whose loops also write each row's m
      and l) and keeps the row's m, l and rowsum(dO O); then a point per
      key row computes the key's and the value's gradients over the query
      rows, recomputing each probability from the score and those
      statistics.
    A mask that is 0 on and below the diagonal and -inf above it (causal
    attention) and known when compiling is not read at all: the loops stop
    at the diagonal. It is known when it is computed elementwise (compare,
    select, cast, slice) from constants, such as kiln-fuse-attention's
    select on a constant condition (too large to fold), and from
    parameters that no entry point updates: a model's mask buffer, such as
    nanoGPT's `masked_fill(bias == 0, -inf)` of `tril(ones)`. Such a
    parameter is marked `kiln.fixed`, and the bundle keeps its value and
    the runtime refuses any other (Parameter.fixed).
    Any other mask is read, broadcast, where each score needs it; first,
    linalg.generic ops compute its bounds: per row of the mask, one past its
    last key that is not -inf, and per column, its first query that is not
    -inf. Each query row's loops end at its row's bound (all keys when the
    row has none, whose probabilities are then 0 / 0 as the softmax's), and
    each key row's loop in the gradient starts at its column's: the scores
    skipped have probability 0. A padding mask of -inf is skipped so; a
    large finite mask value (-10000) is not -inf and is computed. Where the
    attention is `masked_fill`, the gradient's dS is 0 where the mask is at
    most -2^100; where it is `causal_fill`, after each query's position.

    With `amp` (bf16 or f16, as kiln-amp's `type`), what the expanded chain
    would round as product operands is rounded as it is read or computed:
    the query, key, value, output gradient, the probabilities weighting the
    values and dS; the scores, the softmax and every sum stay f32.

    After bufferization, kiln-gpu-outline-kernels makes each loop (as an
    `scf.parallel`) a kernel with a thread per row. Attention the pass does
    not take stays for kiln-decompose.
  }];
  let options = [
    Option<"amp", "amp", "std::string", /*default=*/"\"\"",
           "Round product operands to bf16 or f16 (empty: f32 throughout)">,
    Option<"maxHeadSize", "max-head-size", "int64_t", /*default=*/"128",
           "The largest query/key and value head size computed in loops "
           "(each thread keeps rows of that size in registers)">,
  ];
  let dependentDialects = ["::mlir::scf::SCFDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::tensor::TensorDialect"];
}

def KilnGemmBias : Pass<"kiln-gemm-bias", "mlir::ModuleOp"> {
  let summary = "Bias additions into the matrix products they follow";
  let description = [{
    For the CUDA target, on linalg on tensors after fusion: when an
    elementwise kernel's only use of an f32 product's element (a
    `kiln.matmul` into a zero fill, read by nothing else, possibly through a
    `tensor.expand_shape` that keeps its last dimension) is one `arith.addf`
    with a vector read along the last dimension (a linear layer's bias), the
    product accumulates into a broadcast of that vector instead, marked
    `kiln.gemm_bias`, and the kernel reads the biased product in place of
    the sum. The CUDA target does the broadcast as cuBLASLt's bias epilogue
    (beta 0); elsewhere it is an ordinary kernel. A kernel left copying the
    product goes at the next canonicalization.
  }];
  let statistics = [
    Statistic<"numFolded", "folded", "Bias additions moved into products">
  ];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect"];
}

def KilnGemmBiasGrad : Pass<"kiln-gemm-bias-grad", "mlir::ModuleOp"> {
  let summary = "Bias gradients into the weight-gradient products";
  let description = [{
    For the CUDA target, on linalg on tensors after kiln-gemm-bias: a sum
    of an f32 tensor over all its dimensions but the last into a zero fill
    (a linear layer's bias gradient, `db[j] = sum dy[..., j]`), where an
    unbatched f32 `kiln.matmul` into a zero fill reads the same tensor, seen
    as rows by its last dimension, as an operand whose rows are the
    product's k (the right operand, not transposed, or the left one,
    transposed: the layer's weight gradient), becomes a second output of
    that product: the product's body also adds the operand's element into
    the vector where the other operand's index is 0, so the op still means
    the sum. The product is marked `bias_grad` (and `bias_grad_of_lhs` for
    the left operand) in its `kiln.matmul` flags; the CUDA target makes the
    sum cuBLASLt's bias-gradient epilogue, which reads the operand the
    product reads anyway, instead of a reduction kernel. The merged op goes
    where the product was, or where the sum was when the sum's users come
    first; neither place works, and nothing changes, when the sum's users
    come before the product and the product's operands after the sum.
  }];
  let statistics = [
    Statistic<"numFolded", "folded", "Bias gradients moved into products">
  ];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::arith::ArithDialect"];
}

def KilnSplitReductions : Pass<"kiln-split-reductions", "mlir::ModuleOp"> {
  let summary = "Long reductions in two parallel stages";
  let description = [{
    For the CUDA target, on linalg on tensors: a kernel runs a thread per
    point of its parallel loops, each combining its reduction loops
    sequentially. A `linalg.generic` that combines f32 values
    (`combine(out, g(inputs))` with `arith.addf`, `maximumf`, `maxnumf`,
    `minimumf` or `minnumf`; not a matrix product, and `g` reading no loop
    index) becomes a partial kernel, starting from the combine's identity,
    and a kernel combining the partials into the output:

    - over leading reduction loops into trailing parallel ones, reading
      every input whole (a bias or normalization weight's gradient,
      `[batch, seq, n]` into `[n]`): f groups of rows, f the largest divisor
      of the rows that keeps at least `min-rows` rows a group and
      `f * columns` at most `max-threads`; sums with `max-threads` outputs
      or more stay as they are;
    - over one trailing reduction loop of at least 64 (a row: softmax,
      normalization, cross-entropy), every input read through a projection:
      f interleaved parts, f the largest divisor up to 32 that leaves at
      least 4 elements a part; part g combines elements g, g + f, ..., so
      that neighbouring threads read neighbouring elements.
  }];
  let options = [
    Option<"maxThreads", "max-threads", "int64_t", "65536",
           "The most threads the partial sums get">,
    Option<"minRows", "min-rows", "int64_t", "8",
           "The fewest rows a group sums">
  ];
  let statistics = [
    Statistic<"numSplit", "split", "Sums split in two stages">
  ];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::arith::ArithDialect"];
}

def KilnMergeSiblingReductions
    : Pass<"kiln-merge-sibling-reductions", "mlir::ModuleOp"> {
  let summary = "Independent reductions of one iteration space in one op";
  let description = [{
    For the CUDA target, on linalg on tensors after kiln-split-reductions:
    a `linalg.generic` with a reduction loop, static loop ranges and outputs
    that are fills of `tensor.empty`, and an earlier one (at most 128 ops
    before it in the block) with the same iterator types and loop ranges,
    which it does not depend on and whose results are read only after it,
    become one `linalg.generic` at the later one's place: the inputs and
    outputs of the earlier, then the later's, each output filled anew
    there, and both bodies. Repeated until nothing merges: a layer norm's
    backward sums its bias's and its weight's gradients over the rows in one
    kernel (and their two-stage partials in one each).
  }];
  let statistics = [
    Statistic<"numMerged", "merged", "Reductions merged into an earlier one">
  ];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect"];
}

def KilnAutoMixedPrecision : Pass<"kiln-amp", "mlir::ModuleOp"> {
  let summary = "Matrix products on bf16 or f16 operands with f32 accumulation";
  let description = [{
    Mixed precision as GPUs run it fastest: on linalg on tensors, every
    `kiln.matmul` product of f32 operands reads them rounded to bf16
    (round to nearest even), multiplies in f32 (a product of two bf16
    values is exact in f32) and accumulates into its f32 output. A value is
    rounded once per function, for all the products that read it (a weight
    in the forward and the backward pass). Where the value is computed by
    an elementwise op (a linalg.generic whose loops are all parallel, seen
    through reshapes; a linalg.transpose becomes one first), that op writes
    the rounded copy as one more result, from the element it computes, and
    stops writing the f32 one when nothing else reads it: no rounding
    kernel and no second read of the value. A concatenation (slices
    inserted into an empty tensor) whose every piece is computed so is
    rounded as the same slices of the rounded pieces. A kiln
    fused layer norm writes its result rounded, or a rounded copy beside the
    f32 result when others read that too; its gradient, a rounded copy of
    the input's gradient. Anything else (a parameter, a
    product's result, an attention loop's) gets a new elementwise op
    producing the bf16 tensor. Everything else stays f32: parameters
    (the master weights), their gradients, the optimizer, reductions,
    normalizations and the loss.

    With `store` (the default), the products whose results are
    activations or their gradients also store them in bf16, as autocast
    does: each sums in f32 and rounds once as it stores (`round_once` in
    its `kiln.matmul` flags; cuBLASLt's output type), and every elementwise
    op, reduction or product that reads the result widens each element
    it reads, exactly; so do the layer-norm kernels (kiln.fused_layer_norm's
    input and residual when it has a residual, its gradient's grad and
    accumulate), which compute in f32. A linear layer's bias added by the
    product's epilogue (kiln-gemm-bias) is read rounded, as cuBLASLt reads
    a bias of the output's type. A product keeps its f32 result when that
    result flows through elementwise work only into what the function
    returns (a parameter's gradient on its way to the optimizer, a model's
    output) or into any other op (an attention kernel, a collective), or
    when it accumulates into a value it did not start (a gradient summed
    over several products). Memory-bound kernels
    then move about half the bytes of an f32 activation.

    With `type=f16` the operands are rounded to f16 instead, whose range
    ends at 65504: values beyond it become infinities and small gradients
    flush to zero, which is what kiln-train-step's `loss-scale` is for.
  }];
  let options = [
    Option<"type", "type", "std::string", "\"bf16\"",
           "The operands' type: bf16 or f16">,
    Option<"store", "store", "bool", "true",
           "Products whose results are activations store them in the "
           "operands' type">
  ];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::arith::ArithDialect"];
}

def KilnGemmGelu : Pass<"kiln-gemm-gelu", "mlir::ModuleOp"> {
  let summary = "Tanh GELUs and their gradients as matrix-product epilogues";
  let description = [{
    For the CUDA target, on linalg on tensors after kiln-amp: cuBLASLt
    applies the tanh GELU to a product as it stores it (its GELU epilogue,
    with the bias epilogue before it), and multiplies a product by the
    GELU's derivative at a stored input (its DGELU epilogue). An
    elementwise `linalg.generic` that computes the tanh GELU of a product's
    result (`gelu(P)`, P seen through a tensor.expand_shape that keeps its
    columns), or that multiplies a product's result by the tanh GELU's
    derivative at another tensor x of the result's type (`P * gelu'(x)`,
    the GELU's gradient), is marked `kiln.gemm_epilogue` and the product's
    `kiln.matmul` flags `gelu` (with `gelu_aux` when anything else reads P,
    which the epilogue then also stores) or `dgelu`. The IR keeps its
    meaning: the CUDA target makes the pair one cuBLASLt product writing
    the elementwise op's result (P itself only as the GELU's auxiliary
    output, or not at all), and the emulation runs them as they are. A
    marked op gets a tensor.empty of its own as its output (one shared
    with other ops would let bufferization put its output in the bytes of
    a tensor still read between the product and it, and the pair would
    not fuse).

    What the elementwise op computes is checked by evaluating its body
    (arith and math ops on its inputs) at points across the GELU's range
    against the tanh GELU and its derivative, in double precision, within
    1e-5: how autodiff or an exporter spelled the formula does not matter,
    and an erf GELU is not taken. The product must be unbatched, overwrite
    its output (a zero fill or a bias broadcast, kiln-gemm-bias), have no
    bias gradient, and store the elementwise op's element type; a
    derivative's product must have no other reader. cuBLASLt computes the
    GELU from the f32 sum before rounding it, and the derivative's product
    from its f32 sum: on the device the result differs from these ops' (which
    read P as stored) by that one rounding of a 16-bit P.
  }];
  let statistics = [
    Statistic<"numForward", "forward", "GELUs moved into products">,
    Statistic<"numBackward", "backward",
              "GELU derivatives moved into products">
  ];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect"];
}

def KilnComputeIntoSlices
    : Pass<"kiln-compute-into-slices", "mlir::ModuleOp"> {
  let summary = "Elementwise results computed into the slices they fill";
  let description = [{
    For the CUDA target, on linalg on tensors just before bufferization: a
    `tensor.insert_slice` (unit strides, static sizes) of the result of an
    all-parallel `linalg.generic` (possibly through a
    `tensor.collapse_shape`), which nothing else reads, computed into a
    `tensor.empty` its payload does not read and written through a
    permutation of its loops, gets the generic computing into a
    `tensor.extract_slice` of the insertion's destination instead (expanded
    back to its shape through the collapse's reassociation), moved to just
    before the insertion. Bufferized, the kernel writes the slice of the
    concatenation in place, and the copy the insertion would have been goes
    (attention's q, k and v gradients, transposed into their thirds of the
    qkv projection's gradient).
  }];
  let statistics = [
    Statistic<"numComputed", "computed", "Results computed into slices">
  ];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect"];
}

def KilnPadMatrixRows : Pass<"kiln-pad-matrix-rows", "mlir::ModuleOp"> {
  let summary = "Products' matrices stored with aligned rows";
  let description = [{
    For the CUDA target, on linalg on tensors just before bufferization.
    cuBLASLt's fastest kernels load whole rows of 16 bytes, which a matrix
    whose rows are not a multiple of 16 bytes long does not have (GPT-2's
    50257 logits per token). For each operand and output of a
    `kiln.matmul` product whose last dimension is such a row, the
    `tensor.empty` it is computed into (through the destinations of the
    linalg ops that compute it, and reshapes that keep the last dimension)
    becomes a `tensor.extract_slice` of the first columns of a
    `tensor.empty` whose rows are padded to `row-alignment` bytes. The
    values are the same (an empty tensor's elements are undefined either
    way); bufferized, the ops compute into a view whose rows are further
    apart than they are long, and the product reads or writes it with that
    leading dimension. Only values that reach nothing but linalg ops,
    `tensor.extract` and reshapes that keep the last dimension are padded:
    other ops (the library commands, collectives, results) take contiguous
    buffers.
  }];
  let options = [
    Option<"rowAlignment", "row-alignment", "int64_t", "16",
           "The bytes a padded row's length is a multiple of">
  ];
  let statistics = [
    Statistic<"numPadded", "padded", "Tensors computed into row-padded buffers">
  ];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect"];
}

def KilnGPUOutlineKernels : Pass<"kiln-gpu-outline-kernels", "mlir::ModuleOp"> {
  let summary = "Moves each kernel into a GPU kernel, one thread per point";
  let description = [{
    The CUDA target's first step from bufferized, memory-planned IR. In every
    function with a body, each op of the entry block that is a linalg op
    (other than a `kiln.matmul` product on contiguous buffers, which stays
    for the target to hand to cuBLASLt), a `memref.copy` or a loop the
    lowering wrote (`scf.parallel`, as kiln-attention-kernel's, or
    sequential ones) is a kernel: it becomes a `gpu.launch_func` of a
    `gpu.func` in the module `@kiln_kernels`.

    The kernel's arguments are the buffers its operands are views of: an
    argument of the function, or a `memref.view` of one at a constant offset
    (an arena slot). The view ops between them and the operands (subviews,
    reshapes) move into the kernel with the constants it uses, so only
    contiguous, statically shaped buffers cross the launch (one pointer
    each).

    In the kernel the op becomes loops; the parallel ones (an
    `scf.parallel` at the top of the kernel) collapse into one index space
    of N points, one thread each: blocks of up to
    `block-size` threads, `ceil(N / block-size)` blocks, and a guard for
    the last block. Reductions stay sequential loops inside a thread, and
    so does a parallel dimension that an output does not index (threads
    differing only in it would write the same element at once). A
    kernel with no parallel loop runs on one thread.

    A thread that combines terms into an element of its output in a loop
    (`out[i] = out[i] + x[i, k]` for every k) loads the element once before
    the loop, carries it through it in a register and stores it once after,
    when nothing else in the loop touches that buffer; the same operations
    run in the same order. When a reduction writes every element of its one
    output and the last op before it that touches that buffer (any view of
    the same argument or arena slot) is a `linalg.fill` of it, each element
    starts from the fill's constant and the fill launches nothing.

    A kernel is named `ENTRY_kN`, followed by `_LABEL` when its op's
    location carries one (a FusedLoc whose metadata is "kiln.kernel.LABEL",
    as kiln-attention-kernel's loops have). Kernels with the same body and
    argument types are emitted once and launched on different buffers. A kernel that reads something other than
    constants and such buffers is an error: it cannot run on the GPU yet.
  }];
  let options = [
    Option<"blockSize", "block-size", "int64_t", /*default=*/"256",
           "Threads per block (a multiple of 32, at most 1024)">,
  ];
  let dependentDialects = ["::mlir::gpu::GPUDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::affine::AffineDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::memref::MemRefDialect"];
}

def KilnGPUMergeLaunches : Pass<"kiln-gpu-merge-launches", "mlir::ModuleOp"> {
  let summary = "Launches kernels that do not depend on each other as one";
  let description = [{
    After kiln-gpu-outline-kernels, a step launches one kernel per fused
    loop nest, and many of them are independent: the bf16 copies of the
    weights, the query, key and value transposes, the optimizer's update of
    each parameter. This pass launches each such group as one kernel whose
    blocks are the members' blocks one after another: block `b` of the
    merged grid runs member `i`'s body as its block `b - first_i` when
    `first_i <= b < first_i + blocks_i`. Each member keeps its own threads,
    guard and order of operations, so the results are the same bits. The
    merged blocks are the size of the largest member's; a member of smaller
    blocks runs on its threads `t < threads_i` and leaves the others idle.

    Walking each entry function in order, a launch can join a group before
    it (a group sits where its first launch was) when
    - both launch blocks along x only, with no shared memory (no
      workgroup or other non-global buffer) and no NVVM op (a barrier
      would wait for threads a member's guard leaves out), and either
      their blocks are the same size, or the merged grid would be at most
      256 blocks (less than one wave even on an A100, so what it costs is
      mostly the launch), or at most a quarter of the threads it runs would
      be idle, and
    - it writes no bytes a member reads or writes and reads no bytes a
      member writes (the bytes of the arguments and arena slots the kernels
      receive, an output that updates a parameter in place (`kiln.update`)
      counting as the parameter's argument; an argument is written when the
      kernel does anything with it but load; a kernel that reaches a
      buffer only through subviews at constant offsets, sizes and strides
      touches only their boxes of it, so the query, key and value gradients
      written into their columns of one buffer are apart), and
    - it touches no bytes that a collective before it averages or gathers
      (it would wait for that collective alone, and run beside later ones),
      and
    - it can move up to the group: no op between them touches a buffer it
      touches (every op but a launch counts as reading and writing every
      buffer it names; one naming a buffer of unknown bytes stops it).

    Of the groups it can join it takes the earliest: what it writes is then
    ready sooner, and the launches that read it can join the groups after
    (joining the latest chained a run of two-stage reductions, each first
    stage launched with the second stage of the one before).

    Memory is planned by then, so the bytes say exactly what may run at the
    same time. A merged kernel is named `ENTRY_mN`; a member kernel nothing
    else launches goes.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::arith::ArithDialect"];
}

def KilnGPUEmulate : Pass<"kiln-gpu-emulate", "mlir::ModuleOp"> {
  let summary = "Runs GPU kernels on the host, one thread after another";
  let description = [{
    A test aid for the CUDA target on machines without a GPU: every
    `gpu.func` of the module becomes a private host function taking the
    block and thread index before its buffers, and every `gpu.launch_func`
    a loop nest over the grid's blocks and each block's threads that calls
    it; the `gpu.module` goes. What kiln-gpu-outline-kernels built (the
    thread mapping, the buffers and views each kernel receives, the order of
    launches and products) then compiles for the CPU and can be checked
    against a reference there. Only the x dimension is used, as
    kiln-gpu-outline-kernels launches; a kernel that reads any other
    dimension, or synchronizes its block, is an error. Products marked
    `overwrite` get their zero fill back (and lose the mark), so that they
    mean what linalg ops mean for whatever lowers them on the CPU. The
    buffer forms of `kiln.flash_attention` and its gradient become calls
    into the runtime's host version of the tensor-core kernels
    (kiln/abi/attention.h) on the same buffers.
  }];
  let dependentDialects = ["::mlir::func::FuncDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::LLVM::LLVMDialect"];
}

#endif // KILN_TARGET_CUDA_PASSES_TD
