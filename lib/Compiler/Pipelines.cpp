//===- Pipelines.cpp - Kiln's pass pipelines, built and registered --------===//
//
// kiln IR -> (training: loss, gradients, step) -> decomposed core ops ->
// linalg on tensors (fused) -> buffers -> BLAS calls or the CUDA target's
// commands, and one planned arena. compileModel and kiln-opt's registered
// pipelines build the passes here, from the same option structs.
//
//===----------------------------------------------------------------------===//

#include "kiln/Compiler/Pipelines.h"

#include "kiln/Conversion/Passes.h"
#include "kiln/KilnOps.h"
#include "kiln/Target/CPU/Passes.h"
#include "kiln/Target/CUDA/Passes.h"
#include "kiln/Transforms/Passes.h"
#include "kiln/Transforms/Training/Passes.h"

#include "mlir/Dialect/Bufferization/Transforms/OneShotAnalysis.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/Passes.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"

#include <cstdio>
#include <variant>

using namespace mlir;
using llvm::Expected;

namespace {

/// Which count a CountKernelsPass records.
enum class Stage { KilnOps, BeforeFusion, AfterFusion };

/// Records, per function, how many kernels the IR holds at one point of the
/// pipeline: kiln ops, linalg ops (and kiln-attention-kernel's loops), or
/// (after bufferization) linalg ops, calls, copies and those loops, each of
/// which the compiled code runs as one loop nest or call.
struct CountKernelsPass
    : PassWrapper<CountKernelsPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(CountKernelsPass)
  CountKernelsPass(Stage stage, llvm::StringMap<kiln::KernelCounts> &counts)
      : stage(stage), counts(counts) {}
  StringRef getArgument() const override { return "kiln-count-kernels"; }
  void runOnOperation() override {
    for (auto function : getOperation().getOps<func::FuncOp>()) {
      int64_t n = 0;
      function.walk([&](Operation *op) {
        if (stage == Stage::KilnOps)
          n += op->getDialect() && op->getDialect()->getNamespace() == "kiln" &&
               !isa<kiln::ConstantOp, kiln::GetParamOp>(op);
        else if (stage == Stage::BeforeFusion)
          n += isa<linalg::LinalgOp, scf::ForallOp>(op);
        else
          n += isa<linalg::LinalgOp, func::CallOp, memref::CopyOp,
                   scf::ParallelOp>(op);
      });
      kiln::KernelCounts &c = counts[function.getName()];
      (stage == Stage::KilnOps        ? c.kilnOps
       : stage == Stage::BeforeFusion ? c.beforeFusion
                                      : c.afterFusion) = n;
    }
  }
  Stage stage;
  llvm::StringMap<kiln::KernelCounts> &counts;
};

/// Counts kernels here when the caller wants the counts.
void countKernels(OpPassManager &pm, Stage stage,
                  llvm::StringMap<kiln::KernelCounts> *counts) {
  if (counts)
    pm.addPass(std::make_unique<CountKernelsPass>(stage, *counts));
}

/// The passes on tensors. For the CUDA target (`forCuda`) layer norms
/// become the row kernels' op (kiln-fused-layer-norm), and attention the
/// tensor-core kernels' op (kiln-flash-attention) or loops over the rows
/// (kiln-attention-kernel), before the rest of the composite ops are
/// expanded.
} // namespace

void kiln::buildIndexChecks(OpPassManager &pm) {
  pm.addPass(kiln::createKilnCheckIndices());
}

void kiln::buildTensorPipeline(OpPassManager &pm,
                               const kiln::CompileOptions &options,
                               bool forCuda,
                               llvm::StringMap<kiln::KernelCounts> *counts) {
  pm.addPass(kiln::createKilnExternalizeParams());
  using Attention = kiln::CompileOptions::CudaAttention;
  if (forCuda) {
    // Layer norms go to the runtime's row kernels whatever the attention.
    kiln::KilnDecomposeOptions keep;
    keep.keepAttention = options.cudaAttention != Attention::Expanded;
    keep.keepLayerNorm = true;
    pm.addPass(kiln::createKilnDecompose(keep));
    pm.addPass(createCanonicalizerPass());
    pm.addPass(kiln::createKilnFusedLayerNorm());
  }
  if (forCuda && options.cudaAttention != Attention::Expanded) {
    std::string amp;
    if (options.cudaPrecision != kiln::Precision::F32)
      amp = options.cudaPrecision == kiln::Precision::BF16 ? "bf16" : "f16";
    if ((options.cudaAttention == Attention::Flash ||
         options.cudaAttention == Attention::Cudnn) &&
        !amp.empty()) {
      kiln::KilnFlashAttentionOptions flash;
      flash.amp = amp;
      flash.cudnn = options.cudaAttention == Attention::Cudnn;
      pm.addPass(kiln::createKilnFlashAttention(flash));
    }
    kiln::KilnAttentionKernelOptions kernel;
    kernel.amp = amp;
    pm.addPass(kiln::createKilnAttentionKernel(kernel));
  }
  pm.addPass(kiln::createKilnDecompose());
  pm.addPass(createCanonicalizerPass());
  countKernels(pm, Stage::KilnOps, counts);
  pm.addPass(kiln::createConvertKilnToLinalg());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  countKernels(pm, Stage::BeforeFusion, counts);
  pm.addPass(kiln::createKilnMatmulAccumulate());
  if (options.rematerialize)
    pm.addPass(kiln::createKilnRematerialize());
  kiln::KilnFuseElementwiseOptions fuse;
  fuse.transposes = forCuda;
  fuse.cheapBroadcasts = forCuda;
  // On the CPU a merged update streams seven arrays per parameter; eight
  // parameters' 56 streams ran the Llama-style model's AdamW at 6 GB/s
  // (KILN_CPU_PROFILE), two at a time took 8 to 20 ms less per step. On
  // CUDA merging saves launches.
  fuse.updatesPerLoop = forCuda ? 8 : 2;
  pm.addPass(kiln::createKilnFuseElementwise(fuse));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(kiln::createKilnSplitSharedFills());
}

/// Bufferizes and plans memory. For the CPU target (`forCpu`) products
/// become CBLAS calls and collectives calls into the runtime; otherwise both
/// stay for the target to lower itself, and linear layers' biases move into
/// their products (kiln-gemm-bias).
void kiln::buildBufferPipeline(OpPassManager &pm,
                               const kiln::CompileOptions &options, bool forCpu,
                               kiln::Precision precision,
                               llvm::StringMap<kiln::KernelCounts> *counts) {
  // cuBLASLt adds a linear layer's bias as it stores the product and sums
  // its gradient as it multiplies the weight's; long sums into few outputs
  // get more threads.
  if (!forCpu) {
    pm.addPass(kiln::createKilnGemmBias());
    pm.addPass(kiln::createKilnGemmBiasGrad());
    pm.addPass(kiln::createKilnSplitReductions());
    pm.addPass(createCanonicalizerPass());
    pm.addPass(kiln::createKilnMergeSiblingReductions());
    // A tensor both merged reductions read is one input again.
    pm.addPass(createCanonicalizerPass());
  }
  if (precision != kiln::Precision::F32) {
    kiln::KilnAutoMixedPrecisionOptions amp;
    amp.type = precision == kiln::Precision::BF16 ? "bf16" : "f16";
    amp.store = options.ampNarrowActivations;
    pm.addPass(kiln::createKilnAutoMixedPrecision(amp));
    pm.addPass(createCanonicalizerPass());
    pm.addPass(createCSEPass());
    // CSE merged the zero inits kiln-split-shared-fills had split.
    pm.addPass(kiln::createKilnSplitSharedFills());
  }
  // Tanh GELUs and their gradients into the products they read, on the
  // stored types kiln-amp chose.
  if (!forCpu && options.cudaGeluEpilogue)
    pm.addPass(kiln::createKilnGemmGelu());
  // A value computed only to be inserted into a larger tensor (a
  // concatenation: the gradients of q, k and v into the qkv projection's)
  // is computed into its slice of that tensor, with no copy after.
  // Products' matrices whose rows are not a multiple of 16 bytes long
  // (GPT-2's logits) are stored with padded rows, which cuBLASLt's fastest
  // kernels need.
  if (!forCpu) {
    pm.addPass(kiln::createKilnComputeIntoSlices());
    pm.addPass(kiln::createKilnPadMatrixRows());
  }
  bufferization::OneShotBufferizePassOptions bufferize;
  bufferize.bufferizeFunctionBoundaries = true;
  bufferize.functionBoundaryTypeConversion =
      bufferization::LayoutMapOption::IdentityLayoutMap;
  pm.addPass(bufferization::createOneShotBufferizePass(bufferize));
  // Its constants' globals in an order (and with names) of their own, not
  // the run's: the same model gives the same bundle.
  pm.addPass(kiln::createKilnOrderGlobals());
  // kiln-attention-kernel's loops, for kiln-gpu-outline-kernels. The
  // copies of slices computed in place (kiln-compute-into-slices) copy a
  // view onto an equal one: CSE makes them one, and canonicalization drops
  // the copy.
  if (!forCpu) {
    pm.addPass(createForallToParallelLoopPass());
    pm.addPass(createCSEPass());
  }
  bufferization::BufferResultsToOutParamsPassOptions outParams;
  // Results are computed into their own buffers and copied out at the end:
  // an output that updates a parameter in place may only be written once
  // every read of the old value is done.
  outParams.hoistStaticAllocs = false;
  outParams.modifyPublicFunctions = true;
  pm.addPass(bufferization::createBufferResultsToOutParamsPass(outParams));
  pm.addPass(createCanonicalizerPass());
  if (forCpu)
    pm.addPass(kiln::createKilnLowerGemmToBlas());
  pm.addPass(kiln::createKilnUpdateInPlace());
  kiln::KilnPlanMemoryOptions plan;
  // Bytes freed by one kernel go, where the arena has room, to no kernel
  // soon after it, so that the two can run in one launch
  // (kiln-gpu-merge-launches).
  if (!forCpu)
    plan.reuseDistance = 256;
  pm.addPass(kiln::createKilnPlanMemory(plan));
  // After planning, which sees each collective as a use of its buffers.
  if (forCpu)
    pm.addPass(kiln::createKilnLowerCollectives());
  // The CPU target's bundle that runs the CUDA target's kernels: their
  // outlining for the CPU, its products through BLAS.
  if (!forCpu && options.emulateCuda) {
    pm.addPass(kiln::createKilnGPUOutlineKernels());
    pm.addPass(kiln::createKilnGPUMergeLaunches());
    pm.addPass(kiln::createKilnGPUEmulate());
    pm.addPass(kiln::createKilnLowerGemmToBlas());
    pm.addPass(kiln::createKilnLowerCollectives());
  }
  countKernels(pm, Stage::AfterFusion, counts);
}

//===----------------------------------------------------------------------===//
// The training pipeline
//===----------------------------------------------------------------------===//

void kiln::buildTrainingPipeline(OpPassManager &pm,
                                 const TrainingOptions &options) {
  std::string lossName = options.lossOutput;
  if (!options.loss.empty()) {
    KilnAddLossOptions add;
    add.kind = options.loss;
    add.on = options.lossOn;
    add.labels = options.labels;
    add.name = lossName = "loss";
    add.classAxis = options.lossClassAxis;
    add.ignoreIndex = options.ignoreIndex;
    add.labelSmoothing = options.labelSmoothing;
    pm.addPass(createKilnAddLoss(add));
  }
  // GELU as one op keeps only its input for the backward pass. Attention,
  // layer norms and cross-entropy keep their own ops through autodiff, whose
  // rules recompute the probabilities (the statistics) instead of keeping
  // the intermediates; compiling the bundle decomposes them afterwards.
  pm.addPass(createKilnFuseGelu());
  pm.addPass(createKilnFuseAttention());
  KilnDecomposeOptions decompose;
  decompose.keepAttention = true;
  decompose.keepLayerNorm = true;
  decompose.keepCrossEntropy = true;
  pm.addPass(createKilnDecompose(decompose));
  // Folded first, so autodiff differentiates the simplified graph (matrix
  // products with their transposes absorbed, constants folded).
  pm.addPass(createCanonicalizerPass());
  KilnAutodiffOptions autodiff;
  autodiff.loss = lossName;
  autodiff.freeze = options.freeze;
  pm.addPass(createKilnAutodiff(autodiff));
  if (options.optimizer.empty())
    return;
  KilnTrainStepOptions step;
  step.keepGradFunction = options.keepGradients;
  step.optimizer = options.optimizer;
  step.lr = options.lr;
  step.momentum = options.momentum;
  step.nesterov = options.nesterov;
  step.weightDecay = options.weightDecay;
  step.beta1 = options.beta1;
  step.beta2 = options.beta2;
  step.eps = options.eps;
  step.lrDecay = options.lrDecay;
  step.initialAccumulator = options.initialAccumulator;
  step.schedule = options.schedule;
  step.warmupSteps = options.warmupSteps;
  step.totalSteps = options.totalSteps;
  step.gradClip = options.gradClip;
  step.gradAccum = options.gradAccum;
  step.dataParallel = options.dataParallel;
  step.bucketBytes = options.bucketBytes;
  step.shardOptimizer = options.shardOptimizer;
  step.lossScale = options.lossScale;
  step.lossScaleGrowthInterval = options.lossScaleGrowthInterval;
  pm.addPass(createKilnTrainStep(step));
}

namespace {

//===----------------------------------------------------------------------===//
// Textual options
//===----------------------------------------------------------------------===//

/// One `key=value` option of a struct's textual form.
template <typename T> struct Field {
  const char *key;
  std::variant<std::string T::*, double T::*, int64_t T::*, bool T::*> member;
};

using kiln::TrainingOptions;
const Field<TrainingOptions> kTrainingFields[] = {
    {"loss", &TrainingOptions::loss},
    {"loss-on", &TrainingOptions::lossOn},
    {"labels", &TrainingOptions::labels},
    {"loss-output", &TrainingOptions::lossOutput},
    {"loss-class-axis", &TrainingOptions::lossClassAxis},
    {"ignore-index", &TrainingOptions::ignoreIndex},
    {"label-smoothing", &TrainingOptions::labelSmoothing},
    {"freeze", &TrainingOptions::freeze},
    {"optimizer", &TrainingOptions::optimizer},
    {"keep-gradients", &TrainingOptions::keepGradients},
    {"lr", &TrainingOptions::lr},
    {"momentum", &TrainingOptions::momentum},
    {"nesterov", &TrainingOptions::nesterov},
    {"weight-decay", &TrainingOptions::weightDecay},
    {"beta1", &TrainingOptions::beta1},
    {"beta2", &TrainingOptions::beta2},
    {"eps", &TrainingOptions::eps},
    {"lr-decay", &TrainingOptions::lrDecay},
    {"initial-accumulator", &TrainingOptions::initialAccumulator},
    {"schedule", &TrainingOptions::schedule},
    {"warmup-steps", &TrainingOptions::warmupSteps},
    {"total-steps", &TrainingOptions::totalSteps},
    {"grad-clip", &TrainingOptions::gradClip},
    {"grad-accum", &TrainingOptions::gradAccum},
    {"data-parallel", &TrainingOptions::dataParallel},
    {"bucket-bytes", &TrainingOptions::bucketBytes},
    {"shard-optimizer", &TrainingOptions::shardOptimizer},
    {"loss-scale", &TrainingOptions::lossScale},
    {"loss-scale-growth-interval", &TrainingOptions::lossScaleGrowthInterval},
};

std::string formatValue(const std::string &value) {
  // Braces keep a value with spaces (or none) one value.
  if (value.empty() || value.find_first_of(" {}") != std::string::npos)
    return "{" + value + "}";
  return value;
}
std::string formatValue(double value) {
  // The fewest digits that give the same double back.
  for (int digits = 1;; ++digits) {
    char buffer[32];
    std::snprintf(buffer, sizeof(buffer), "%.*g", digits, value);
    std::string text = buffer;
    double back;
    if (digits >= 17 || (!StringRef(text).getAsDouble(back) && back == value))
      return text;
  }
}
std::string formatValue(int64_t value) { return std::to_string(value); }
std::string formatValue(bool value) { return value ? "true" : "false"; }

template <typename T>
std::string printFields(const T &options, llvm::ArrayRef<Field<T>> fields) {
  T defaults;
  std::string text;
  for (const Field<T> &field : fields)
    std::visit(
        [&](auto member) {
          if (options.*member == defaults.*member)
            return;
          if (!text.empty())
            text += ' ';
          text += std::string(field.key) + "=" + formatValue(options.*member);
        },
        field.member);
  return text;
}

llvm::Error optionError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// Splits `key=value key={value with spaces} ...`.
Expected<SmallVector<std::pair<StringRef, StringRef>>>
splitOptions(StringRef text) {
  SmallVector<std::pair<StringRef, StringRef>> options;
  text = text.trim();
  while (!text.empty()) {
    size_t equals = text.find('=');
    size_t space = text.find(' ');
    if (equals == StringRef::npos ||
        (space != StringRef::npos && space < equals))
      return optionError("expected key=value, not '" +
                         text.take_until([](char c) { return c == ' '; }) +
                         "'");
    StringRef key = text.take_front(equals);
    text = text.drop_front(equals + 1);
    StringRef value;
    if (text.starts_with("{")) {
      size_t close = text.find('}');
      if (close == StringRef::npos)
        return optionError("option '" + key + "': no '}' closes its value");
      value = text.slice(1, close);
      text = text.drop_front(close + 1);
    } else {
      value = text.take_until([](char c) { return c == ' '; });
      text = text.drop_front(value.size());
    }
    options.push_back({key, value});
    text = text.ltrim();
  }
  return options;
}

llvm::Error parseValue(StringRef key, StringRef text, std::string &value) {
  value = text.str();
  return llvm::Error::success();
}
llvm::Error parseValue(StringRef key, StringRef text, double &value) {
  if (text.getAsDouble(value))
    return optionError("option '" + key + "': '" + text + "' is not a number");
  return llvm::Error::success();
}
llvm::Error parseValue(StringRef key, StringRef text, int64_t &value) {
  if (text.getAsInteger(10, value))
    return optionError("option '" + key + "': '" + text +
                       "' is not an integer");
  return llvm::Error::success();
}
llvm::Error parseValue(StringRef key, StringRef text, bool &value) {
  if (text == "true" || text == "1")
    value = true;
  else if (text == "false" || text == "0")
    value = false;
  else
    return optionError("option '" + key + "': '" + text +
                       "' is not true or false");
  return llvm::Error::success();
}

template <typename T>
Expected<T> parseFields(StringRef text, llvm::ArrayRef<Field<T>> fields) {
  auto options = splitOptions(text);
  if (!options)
    return options.takeError();
  T result;
  llvm::StringSet<> seen;
  for (auto [key, value] : *options) {
    const Field<T> *field = llvm::find_if(
        fields, [&, key = key](const Field<T> &f) { return key == f.key; });
    if (field == fields.end()) {
      std::string known;
      for (const Field<T> &f : fields)
        known += (known.empty() ? "" : ", ") + std::string(f.key);
      return optionError("unknown option '" + key + "' (known: " + known + ")");
    }
    if (!seen.insert(key).second)
      return optionError("option '" + key + "' is given twice");
    if (llvm::Error error = std::visit(
            [&, key = key, value = value](auto member) {
              return parseValue(key, value, result.*member);
            },
            field->member))
      return std::move(error);
  }
  return result;
}

} // namespace

std::string kiln::printTrainingOptions(const TrainingOptions &options) {
  return printFields<TrainingOptions>(options, kTrainingFields);
}

Expected<kiln::TrainingOptions> kiln::parseTrainingOptions(StringRef text) {
  return parseFields<TrainingOptions>(text, kTrainingFields);
}

//===----------------------------------------------------------------------===//
// The compile pipeline
//===----------------------------------------------------------------------===//

void kiln::buildCompilePipeline(OpPassManager &pm,
                                const CompileOptions &options) {
  bool cpu = options.cpuTarget && !options.emulateCuda;
  bool forCuda = !options.cpuTarget || options.emulateCuda;
  buildIndexChecks(pm);
  buildTensorPipeline(pm, options, forCuda);
  buildBufferPipeline(pm, options, cpu,
                      cpu ? Precision::F32 : options.cudaPrecision);
}

namespace {

/// The compile pipeline's options in textual form: a flat struct of what
/// CompileOptions holds for one target.
struct CompileText {
  std::string target = "cpu";
  std::string amp = "off";
  std::string ampActivations = "narrow";
  std::string cudaAttention = "flash";
  bool geluEpilogue = false;
  bool rematerialize = false;
  bool emulateCuda = false;
};
const Field<CompileText> kCompileFields[] = {
    {"target", &CompileText::target},
    {"amp", &CompileText::amp},
    {"amp-activations", &CompileText::ampActivations},
    {"cuda-attention", &CompileText::cudaAttention},
    {"gelu-epilogue", &CompileText::geluEpilogue},
    {"rematerialize", &CompileText::rematerialize},
    {"emulate-cuda", &CompileText::emulateCuda},
};

using Attention = kiln::CompileOptions::CudaAttention;

} // namespace

std::string kiln::printCompileOptions(const CompileOptions &options) {
  CompileText text;
  text.target = options.cpuTarget ? "cpu" : "cuda";
  text.amp = options.cudaPrecision == Precision::BF16  ? "bf16"
             : options.cudaPrecision == Precision::F16 ? "fp16"
                                                       : "off";
  text.ampActivations = options.ampNarrowActivations ? "narrow" : "f32";
  text.cudaAttention = options.cudaAttention == Attention::Loops ? "loops"
                       : options.cudaAttention == Attention::Expanded
                           ? "expanded"
                       : options.cudaAttention == Attention::Cudnn ? "cudnn"
                                                                   : "flash";
  text.geluEpilogue = options.cudaGeluEpilogue;
  text.rematerialize = options.rematerialize;
  text.emulateCuda = options.emulateCuda;
  // The target is always named.
  std::string rest = printFields<CompileText>(text, kCompileFields);
  if (text.target == "cpu")
    return rest.empty() ? "target=cpu" : "target=cpu " + rest;
  return rest;
}

Expected<kiln::CompileOptions> kiln::parseCompileOptions(StringRef text) {
  auto parsed = parseFields<CompileText>(text, kCompileFields);
  if (!parsed)
    return parsed.takeError();
  CompileOptions options;
  if (parsed->target != "cpu" && parsed->target != "cuda")
    return optionError("target must be cpu or cuda, not '" + parsed->target +
                       "'");
  options.cpuTarget = parsed->target == "cpu";
  options.cudaTarget = !options.cpuTarget;
  if (parsed->amp == "bf16")
    options.cudaPrecision = Precision::BF16;
  else if (parsed->amp == "fp16")
    options.cudaPrecision = Precision::F16;
  else if (parsed->amp != "off")
    return optionError("amp must be off, bf16 or fp16, not '" + parsed->amp +
                       "'");
  if (parsed->ampActivations != "narrow" && parsed->ampActivations != "f32")
    return optionError("amp-activations must be narrow or f32, not '" +
                       parsed->ampActivations + "'");
  options.ampNarrowActivations = parsed->ampActivations == "narrow";
  if (parsed->cudaAttention == "loops")
    options.cudaAttention = Attention::Loops;
  else if (parsed->cudaAttention == "expanded")
    options.cudaAttention = Attention::Expanded;
  else if (parsed->cudaAttention == "cudnn")
    options.cudaAttention = Attention::Cudnn;
  else if (parsed->cudaAttention != "flash")
    return optionError("cuda-attention must be flash, loops, expanded or "
                       "cudnn, not '" +
                       parsed->cudaAttention + "'");
  options.cudaGeluEpilogue = parsed->geluEpilogue;
  options.rematerialize = parsed->rematerialize;
  options.emulateCuda = parsed->emulateCuda;
  if (options.emulateCuda && !options.cpuTarget)
    return optionError("emulate-cuda makes a CPU bundle: it goes with "
                       "target=cpu");
  return options;
}

//===----------------------------------------------------------------------===//
// Registration
//===----------------------------------------------------------------------===//

namespace {

/// Registers a pipeline whose textual options `parse` reads (the keys of
/// `fields`, listed in its description) and `build` turns into passes.
template <typename Text, typename Options>
void registerPipeline(StringRef name, const std::string &description,
                      llvm::ArrayRef<Field<Text>> fields,
                      Expected<Options> (*parse)(StringRef),
                      void (*build)(OpPassManager &, const Options &)) {
  std::string keys;
  for (const Field<Text> &field : fields)
    keys += std::string(" ") + field.key;
  registerPassPipeline(
      name, description + "; options:" + keys + ")",
      [name = name.str(), parse,
       build](OpPassManager &pm, StringRef text,
              llvm::function_ref<LogicalResult(const llvm::Twine &)> error) {
        Expected<Options> options = parse(text);
        if (!options)
          return error(name + ": " + llvm::toString(options.takeError()));
        build(pm, *options);
        return success();
      },
      [](llvm::function_ref<void(const mlir::detail::PassOptions &)>) {});
}

} // namespace

void kiln::registerPipelines() {
  registerPipeline<TrainingOptions, TrainingOptions>(
      "kiln-train-pipeline",
      "What kilnc runs on the imported model for a training step or "
      "gradients (\"optimizer=adamw lr=0.001 ...\", kilnc's training flags",
      kTrainingFields, parseTrainingOptions, buildTrainingPipeline);
  registerPipeline<CompileText, CompileOptions>(
      "kiln-compile-pipeline",
      "What kilnc runs to compile the model for one target, up to its code "
      "generator (\"target=cpu\" or \"target=cuda amp=bf16 ...\"",
      kCompileFields, parseCompileOptions, buildCompilePipeline);
}
