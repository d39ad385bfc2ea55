//===- Passes.td - Kiln's passes ---------------------------*- tablegen -*-===//

#ifndef KILN_TRANSFORMS_PASSES_TD
#define KILN_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

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

def KilnAutodiff : Pass<"kiln-autodiff", "mlir::ModuleOp"> {
  let summary = "Builds the gradient function of a scalar loss (reverse mode)";
  let description = [{
    For the function `function` and its result named `loss` (a scalar float,
    the `kiln.name` of the result), adds `<function>_grad`, which returns the
    loss and then the gradient of the loss with respect to every trainable
    parameter the function reads (every float `kiln.param`, minus those whose
    name matches `freeze`), named `<param>.grad`. Gradients are built in
    reverse op order from each op's DifferentiableOpInterface; values used
    several times (and parameters read several times, as tied embeddings
    are) accumulate their gradients; only ops between a trainable parameter
    and the loss are differentiated. A float parameter with no differentiable
    path to the loss (a mask, running statistics) is a buffer: it gets no
    gradient result, so no optimizer updates it. So is a parameter marked
    `kiln.buffer` (the importer marks those PyTorch's exporter records as
    buffers or constants; kilnc --trainable those it does not name). Each
    parameter that gets a gradient is marked `kiln.trained`, and the module
    `kiln.differentiated`. Run kiln-decompose first: softmax,
    normalizations and losses are differentiated through their
    decompositions; kiln.attention (kiln-decompose with keep-attention
    leaves it) has its own rule.
  }];
  let options = [
    Option<"function", "function", "std::string", "\"forward\"",
           "The function to differentiate">,
    Option<"loss", "loss", "std::string", "\"loss\"",
           "The name (kiln.name) of the result to differentiate">,
    Option<"freeze", "freeze", "std::string", "\"\"",
           "Parameters whose name matches this regular expression anywhere "
           "get no gradient (anchor it with ^ and $ to match whole names)">
  ];
  let dependentDialects = ["::kiln::KilnDialect"];
}

def KilnAddLoss : Pass<"kiln-add-loss", "mlir::ModuleOp"> {
  let summary = "Adds a loss of a model output against a new labels input";
  let description = [{
    For a model exported without its loss: appends to `function` an argument
    named `labels` and a scalar result named `name` computing, from the
    result named `on`:
    - `cross_entropy`: softmax cross-entropy (torch.nn.CrossEntropyLoss) of
      logits whose classes lie on `class-axis` (1 as in PyTorch; -1 for
      `[batch, sequence, vocabulary]` language-model logits) against int64
      class indices shaped like the logits without that axis; labels equal to
      `ignore-index` count for nothing, `label-smoothing` mixes the target
      with the uniform distribution; the mean over counted elements;
    - `mse`: the mean squared error against labels of the output's type;
    - `bce_with_logits`: binary cross-entropy of sigmoid(output) against
      float targets of the output's type, computed stably from the logits as
      torch.nn.BCEWithLogitsLoss does; the mean over all elements.
  }];
  let options = [
    Option<"function", "function", "std::string", "\"forward\"",
           "The function to add the loss to">,
    Option<"kind", "kind", "std::string", "\"cross_entropy\"",
           "cross_entropy, mse or bce_with_logits">,
    Option<"on", "on", "std::string", "\"\"",
           "The result (kiln.name) the loss is computed from; the only "
           "result when empty">,
    Option<"labels", "labels", "std::string", "\"labels\"",
           "The name of the new labels argument">,
    Option<"name", "name", "std::string", "\"loss\"",
           "The name of the new loss result">,
    Option<"classAxis", "class-axis", "int64_t", "1",
           "cross_entropy: the axis of the classes (negative counts from the "
           "end)">,
    Option<"ignoreIndex", "ignore-index", "int64_t", "-100",
           "cross_entropy: the label value that contributes nothing">,
    Option<"labelSmoothing", "label-smoothing", "double", "0.0",
           "cross_entropy: label smoothing in [0, 1)">
  ];
  let dependentDialects = ["::kiln::KilnDialect"];
}

def KilnTrainStep : Pass<"kiln-train-step", "mlir::ModuleOp"> {
  let summary = "Builds the train_step entry point from a gradient function";
  let description = [{
    From `<function>_grad` (kiln-autodiff's output: the loss, then one
    `<param>.grad` per trainable parameter) builds `train_step`, which
    returns the loss, the learning rate the update used (`lr`), the global
    gradient norm before clipping (`grad_norm`, with `grad-clip`), and, for
    every trainable parameter and optimizer state tensor, its updated value
    as a result marked `kiln.update = "<param>"`: the bundle writes those
    results into the parameter's own storage, so the state is updated in
    place. Optimizer state lives in new `kiln.param` symbols marked
    `kiln.optimizer_state`: the step count `optimizer.step` and, per
    parameter, `<param>.momentum_buffer` (SGD with momentum),
    `<param>.exp_avg` and `<param>.exp_avg_sq` (Adam, AdamW) or `<param>.sum`
    (Adagrad), starting at zero (Adagrad's sum at `initial-accumulator`).

    The update rules are torch.optim's (PyTorch 1.13, single-tensor path):
    SGD with momentum (dampening 0), Nesterov momentum and L2 weight decay;
    Adam with L2 weight decay; AdamW with decoupled weight decay; Adagrad
    with `lr-decay`. Both Adam variants use bias correction.

    The learning rate of update `t` (from 1) is `lr * f(t - 1)` for the
    `schedule`: `constant` (f = 1 after warm-up), `linear` (Hugging Face
    `get_linear_schedule_with_warmup`) or `cosine` (half a cosine,
    `get_cosine_schedule_with_warmup`); all ramp up linearly over
    `warmup-steps`. `grad-clip` scales the gradients by
    `min(1, max / (norm + 1e-6))` of their global L2 norm, as
    torch.nn.utils.clip_grad_norm_ does.

    With `grad-accum` K > 1, also builds `accumulate_step`, which adds the
    gradients of one micro-batch into `<param>.grad_accum` state and returns
    the loss; `train_step` then updates with the mean of the K micro-batch
    gradients (the K - 1 accumulated ones and its own) and clears the
    accumulators. The runtime calls `accumulate_step` K - 1 times before
    each `train_step`; the module records K in its `kiln.metadata`
    (`training.grad_accum`).

    With `loss-scale` S > 0, dynamic loss scaling as PyTorch's GradScaler
    does it, entirely in the step (no host synchronization): the backward
    pass of `train_step` (and `accumulate_step`) starts from the scale
    (`amp.loss_scale` state, initially S) instead of 1, so small gradients
    survive f16 products; `train_step` divides the gradients by it, and when
    any is infinite or NaN it skips the update (parameters, optimizer state
    and the update count keep their values) and halves the scale; after
    `loss-scale-growth-interval` updates in a row without one
    (`amp.growth_tracker`) it doubles it. `train_step` returns the scale it
    used as `loss_scale`. With `grad-accum` K > 1 each backward pass starts
    from S / K (as `scaler.scale(loss / K).backward()` in PyTorch), so the
    accumulated gradients are the mean's without a further division.

    With `data-parallel`, the gradients (in buckets of at most
    `bucket-bytes`, each right after the backward pass finishes its last
    gradient) and the loss are averaged over the ranks with
    `kiln.all_reduce_mean`. With `shard-optimizer` N as well, the optimizer
    state is sharded over N ranks (ZeRO-1): each bucket's gradients,
    flattened, joined and padded to a multiple of N, are reduce-scattered
    (`kiln.reduce_scatter_mean`), each rank updates its shard of the
    bucket's parameters (`kiln.local_shard`) with its shard of the state
    (`optimizer.bucket<i>.<state>`, 1/N of the bucket each, marked
    `kiln.shard_ranks = N`), and the updated shards are gathered back
    (`kiln.all_gather`). Gradient clipping and the loss scale's finite check
    sum their partial sums over the ranks.

    Also builds `eval_step`: `function` returning only the loss.
  }];
  let options = [
    Option<"function", "function", "std::string", "\"forward\"",
           "The function whose gradient function to use">,
    Option<"keepGradFunction", "keep-grad-function", "bool", "true",
           "Keep the gradient function as an entry point (false: erase it "
           "once the step is built)">,
    Option<"optimizer", "optimizer", "std::string", "\"sgd\"",
           "sgd, adam, adamw or adagrad">,
    Option<"lr", "lr", "double", "0.01", "Learning rate">,
    Option<"momentum", "momentum", "double", "0.0", "SGD momentum">,
    Option<"nesterov", "nesterov", "bool", "false",
           "SGD: Nesterov momentum">,
    Option<"weightDecay", "weight-decay", "double", "0.0",
           "Weight decay (decoupled for AdamW, L2 for the others)">,
    Option<"beta1", "beta1", "double", "0.9", "Adam/AdamW beta1">,
    Option<"beta2", "beta2", "double", "0.999", "Adam/AdamW beta2">,
    Option<"eps", "eps", "double", "-1.0",
           "Epsilon; negative: torch's default (1e-8 for Adam/AdamW, 1e-10 "
           "for Adagrad)">,
    Option<"lrDecay", "lr-decay", "double", "0.0", "Adagrad learning-rate decay">,
    Option<"initialAccumulator", "initial-accumulator", "double", "0.0",
           "Adagrad: the initial value of the squared-gradient sums">,
    Option<"schedule", "schedule", "std::string", "\"constant\"",
           "constant, linear or cosine">,
    Option<"warmupSteps", "warmup-steps", "int64_t", "0",
           "Updates over which the learning rate ramps up from 0">,
    Option<"totalSteps", "total-steps", "int64_t", "0",
           "linear, cosine: the update at which the learning rate reaches 0">,
    Option<"gradClip", "grad-clip", "double", "0.0",
           "Clip the global gradient norm to this (0: no clipping)">,
    Option<"gradAccum", "grad-accum", "int64_t", "1",
           "Micro-batches per update">,
    Option<"dataParallel", "data-parallel", "bool", "false",
           "Average the gradients and the loss over all ranks "
           "(kiln.all_reduce_mean), bucket by bucket">,
    Option<"bucketBytes", "bucket-bytes", "int64_t", "26214400",
           "data-parallel: the most gradient bytes one all-reduce carries">,
    Option<"shardOptimizer", "shard-optimizer", "int64_t", "0",
           "data-parallel: shard the optimizer state over this many ranks "
           "(ZeRO-1); 0: every rank holds all of it">,
    Option<"lossScale", "loss-scale", "double", "0.0",
           "Dynamic loss scaling (for f16 products): the initial scale; 0: "
           "none">,
    Option<"lossScaleGrowthInterval", "loss-scale-growth-interval", "int64_t",
           "2000",
           "Dynamic loss scaling: successful updates after which the scale "
           "doubles">
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

def KilnRematerialize : Pass<"kiln-rematerialize", "mlir::ModuleOp"> {
  let summary = "Recomputes cheap activations in the backward pass";
  let description = [{
    Runs on linalg on tensors, after CSE (which would merge the copies back)
    and before elementwise fusion. A forward value that the backward pass
    reads, computed by a loop nest with only parallel loops into a
    `tensor.empty` (an elementwise op, a broadcast, a transposition) from
    values the backward pass has at hand anyway (arguments, which include
    the parameters, constants, and values it reads itself), is computed
    again just before the first backward op that reads it, and the backward
    pass reads the copy. The forward buffer then dies after its last forward
    use instead of living until the backward pass: less memory for one more
    loop, which fusion folds into its consumer when that is elementwise.
    Ops are taken last first, so a recomputed value no longer counts as kept
    for the ops that compute its operands. The phases are those
    `kiln-autodiff` marks in locations. `kilnc --memory-budget` turns it on
    when the step does not fit otherwise.
  }];
  let statistics = [
    Statistic<"numRecomputed", "recomputed",
              "Forward ops recomputed for the backward pass">
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
    the same iteration space are merged side by side, up to 8 parameters a
    loop: the update of all parameters takes one loop per distinct shape.

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
           "Fuse cheap producers into consumers that broadcast them">
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

def KilnLowerGemmToBlas : Pass<"kiln-lower-gemm-to-blas", "mlir::ModuleOp"> {
  let summary = "Calls BLAS for f32 and f64 matrix products on buffers";
  let description = [{
    Rewrites the bufferized matrix products that convert-kiln-to-linalg marks
    with `kiln.matmul` into calls of `cblas_sgemm` / `cblas_dgemm`, one per
    batch element, passing the transposes as BLAS flags. A product whose
    output was just zero-filled overwrites it (beta = 0, and the fill goes);
    any other accumulates into it (beta = 1), as the contraction does.
  }];
  let dependentDialects = ["::mlir::func::FuncDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::arith::ArithDialect"];
}

def ConvertKilnToLinalg : Pass<"convert-kiln-to-linalg", "mlir::ModuleOp"> {
  let summary = "Lowers core kiln ops to linalg, tensor, arith and math";
  let description = [{
    Elementwise ops become `linalg.generic` over identical shapes, broadcasts
    and reversals `linalg.generic` with affine maps, reshapes
    `tensor.collapse_shape` / `tensor.expand_shape`, slices and concatenation
    tensor slice ops, reductions `linalg.generic` with reduction iterators,
    matrix products contractions marked `kiln.matmul`, convolutions and
    pooling windowed `linalg.generic`s. Run kiln-decompose first.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::scf::SCFDialect"];
}

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
  }];
  let options = [
    Option<"amp", "amp", "std::string", /*default=*/"\"bf16\"",
           "The 16-bit type the kernels compute in: bf16 or f16">,
  ];
}

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
    (kiln/attention.h) on the same buffers.
  }];
  let dependentDialects = ["::mlir::func::FuncDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::LLVM::LLVMDialect"];
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

    With `type=f16` the operands are rounded to f16 instead, whose range
    ends at 65504: values beyond it become infinities and small gradients
    flush to zero, which is what kiln-train-step's `loss-scale` is for.
  }];
  let options = [
    Option<"type", "type", "std::string", "\"bf16\"",
           "The operands' type: bf16 or f16">
  ];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::arith::ArithDialect"];
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

def KilnLowerCollectives : Pass<"kiln-lower-collectives", "mlir::ModuleOp"> {
  let summary = "Buffer-form collectives as calls into the runtime";
  let description = [{
    The CPU target's lowering of `kiln.all_reduce_mean` on buffers (after
    bufferization and memory planning): for each buffer, a call of the
    runtime's `kiln_collective_all_reduce_mean_f32_begin(data, count)`
    where the op was, and of `kiln_collective_wait(request)` just before the
    first later op that touches the buffer (through any view of it, or a
    pointer computed from it, as library calls take them), so the reduction
    runs while the kernels in between do. The buffers must be contiguous.

    The sharded optimizer's ops likewise: `kiln.reduce_scatter_mean` calls
    `kiln_collective_reduce_scatter_mean_f32_begin(input, output, shard,
    ranks)` and `kiln.all_gather` `kiln_collective_all_gather_f32_begin`,
    each waited for before the first later op that touches its input or
    its output; `kiln.local_shard` is a call of
    `kiln_collective_local_shard_f32`, which copies at once.
  }];
  let dependentDialects = ["::mlir::func::FuncDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::memref::MemRefDialect"];
}

#endif // KILN_TRANSFORMS_PASSES_TD
