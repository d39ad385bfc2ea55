//===- Passes.td - the training passes ---------------------*- tablegen -*-===//
//
// The passes that make a model train (lib/Transforms/Training/): the loss,
// the gradients, the training step, rematerialization and the collectives
// of data-parallel steps.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TRANSFORMS_TRAINING_PASSES_TD
#define KILN_TRANSFORMS_TRAINING_PASSES_TD

include "mlir/Pass/PassBase.td"

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

#endif // KILN_TRANSFORMS_TRAINING_PASSES_TD
