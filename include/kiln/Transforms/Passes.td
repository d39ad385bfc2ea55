//===- Passes.td - Kiln's passes ---------------------------*- tablegen -*-===//

#ifndef KILN_TRANSFORMS_PASSES_TD
#define KILN_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def KilnDecompose : Pass<"kiln-decompose", "mlir::ModuleOp"> {
  let summary = "Expands composite kiln ops into the core ops";
  let description = [{
    Rewrites softmax, log-softmax, layer and batch normalization, the losses
    and reduce_mean / reduce_l2 / reduce_logsumexp into elementwise ops,
    broadcasts, reductions and gathers. Activations defined by formulas (gelu,
    sigmoid, softplus...) stay: code generation computes them directly.
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
    and the loss are differentiated. Run kiln-decompose first: softmax,
    normalizations and losses are differentiated through their
    decompositions.
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
    returns the loss and, for every trainable parameter and optimizer state
    tensor, its updated value as a result marked `kiln.update = "<param>"`:
    the bundle writes those results into the parameter's own storage, so the
    state is updated in place. Optimizer state lives in new `kiln.param`
    symbols (`<param>.momentum_buffer`, `<param>.exp_avg`,
    `<param>.exp_avg_sq`, and the step count `optimizer.step`), starting at
    zero. The update rules are torch.optim's: SGD with momentum (dampening 0)
    and L2 weight decay, and AdamW with bias correction and decoupled weight
    decay.
  }];
  let options = [
    Option<"function", "function", "std::string", "\"forward\"",
           "The function whose gradient function to use">,
    Option<"optimizer", "optimizer", "std::string", "\"sgd\"",
           "sgd or adamw">,
    Option<"lr", "lr", "double", "0.01", "Learning rate">,
    Option<"momentum", "momentum", "double", "0.0", "SGD momentum">,
    Option<"weightDecay", "weight-decay", "double", "0.0",
           "Weight decay (L2 for SGD, decoupled for AdamW)">,
    Option<"beta1", "beta1", "double", "0.9", "AdamW beta1">,
    Option<"beta2", "beta2", "double", "0.999", "AdamW beta2">,
    Option<"eps", "eps", "double", "1e-8", "AdamW epsilon">
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

def KilnPlanMemory : Pass<"kiln-plan-memory", "mlir::ModuleOp"> {
  let summary = "Places every transient buffer in one arena";
  let description = [{
    Runs on bufferized IR. Every statically shaped `memref.alloc` in an entry
    function becomes a `memref.view` into one `memref<Nxi8>` arena argument
    appended to the function (marked `kiln.arena`), at an offset chosen from
    the buffers' live intervals: buffers whose intervals do not overlap share
    memory; buffers are placed largest first, each at the lowest 64-byte
    aligned offset where it fits (first fit in size order). The arena size
    is recorded as
    the `kiln.arena_bytes` function attribute.
  }];
  let dependentDialects = ["::mlir::memref::MemRefDialect",
                           "::mlir::arith::ArithDialect"];
}

def KilnLowerGemmToBlas : Pass<"kiln-lower-gemm-to-blas", "mlir::ModuleOp"> {
  let summary = "Calls BLAS for f32 and f64 matrix products on buffers";
  let description = [{
    Rewrites the bufferized matrix products that convert-kiln-to-linalg marks
    with `kiln.matmul` into calls of `cblas_sgemm` / `cblas_dgemm`, one per
    batch element, passing the transposes as BLAS flags.
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

#endif // KILN_TRANSFORMS_PASSES_TD
