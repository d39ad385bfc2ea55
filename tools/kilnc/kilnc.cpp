//===- kilnc.cpp - the Kiln compiler driver -------------------------------===//
//
// ONNX in, kiln IR (and, in later releases, a .kiln bundle) out, with exit
// codes and diagnostics a build pipeline can show.
//
//===----------------------------------------------------------------------===//

#include "Budget.h"
#include "CostModel.h"
#include "Report.h"
#include "Training.h"

#include "kiln/Bundle/EmitBundle.h"
#include "kiln/Compiler/Compile.h"
#include "kiln/Compiler/Pipelines.h"
#include "kiln/Import/ONNX.h"
#include "kiln/InitAll.h"
#include "kiln/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"

using namespace llvm;

namespace {

cl::OptionCategory kilncCategory("kilnc options");

cl::opt<std::string> inputFile(cl::Positional, cl::desc("<model.onnx>"),
                               cl::Required, cl::cat(kilncCategory));

cl::opt<std::string> outputFile("o", cl::desc("Output file ('-' for stdout)"),
                                cl::value_desc("file"), cl::init("-"),
                                cl::cat(kilncCategory));

enum class EmitKind { Kiln, Imported, Lowered, Bundle };
cl::opt<EmitKind> emit(
    "emit", cl::desc("What to produce"), cl::init(EmitKind::Kiln),
    cl::values(clEnumValN(EmitKind::Kiln, "kiln",
                          "the imported model as kiln dialect IR, with the "
                          "training pipeline run when a step or gradients "
                          "are asked for (default)"),
               clEnumValN(EmitKind::Imported, "imported",
                          "the imported model as the training pipeline "
                          "takes it (--trainable applied)"),
               clEnumValN(EmitKind::Lowered, "lowered",
                          "the IR the target's code generator takes, after "
                          "the compile pipeline (one target)"),
               clEnumValN(EmitKind::Bundle, "bundle",
                          "a compiled .kiln bundle (needs -o FILE)")),
    cl::cat(kilncCategory));

cl::opt<bool> dumpPipeline(
    "dump-pipeline",
    cl::desc("Print the kiln-opt command that runs this compile's passes on "
             "the IR of --emit=imported, and stop"),
    cl::init(false), cl::cat(kilncCategory));

cl::list<std::string>
    dims("dim", cl::desc("Bind the symbolic dimension NAME to N (repeatable)"),
         cl::value_desc("NAME=N"), cl::cat(kilncCategory));

cl::opt<int64_t> batchSize(
    "batch-size",
    cl::desc("Bind the leading symbolic dimension of every graph input to N"),
    cl::value_desc("N"), cl::init(0), cl::cat(kilncCategory));

cl::list<std::string> bindInputs(
    "bind-input",
    cl::desc("Freeze graph input NAME to the constant in FILE, an ONNX "
             "TensorProto (.pb) or a NumPy array (.npy) (repeatable)"),
    cl::value_desc("NAME=FILE"), cl::cat(kilncCategory));

cl::opt<bool> inference(
    "inference",
    cl::desc("Compile the model's graph as the entry point 'forward' into a "
             "bundle (implies --emit=bundle); a model with ONNX training_info "
             "also gets its 'train_step'"),
    cl::init(false), cl::cat(kilncCategory));

cl::opt<bool> gradients(
    "gradients",
    cl::desc("With --inference, also compile the entry point 'forward_grad', "
             "returning the loss and its gradient for every parameter"),
    cl::init(false), cl::cat(kilncCategory));

// Kiln built with the CUDA toolkit compiles for both targets unless told
// otherwise: one bundle then runs wherever it lands.
#ifdef KILN_CUDA_DEFAULT
constexpr const char *kDefaultTargets = "cpu,cuda";
#else
constexpr const char *kDefaultTargets = "cpu";
#endif

cl::opt<std::string> target(
    "target",
    cl::desc("Targets to generate code for: cpu, cuda, or cpu,cuda for one "
             "bundle that runs on either (default: cpu,cuda when Kiln is "
             "built with CUDA, else cpu)"),
    cl::value_desc("list"), cl::init(kDefaultTargets), cl::cat(kilncCategory));

cl::list<std::string> cudaArchs(
    "cuda-arch",
    cl::desc("CUDA architectures to assemble cubins for (default: "
             "sm_80,sm_90a); PTX for the first is kept for newer GPUs"),
    cl::value_desc("list"), cl::CommaSeparated, cl::cat(kilncCategory));

enum class Amp { Off, BF16, FP16 };
cl::opt<Amp>
    amp("amp",
        cl::desc("Mixed precision on the CUDA target (the CPU target computes "
                 "in f32)"),
        cl::values(clEnumValN(Amp::Off, "off", "f32 throughout (default)"),
                   clEnumValN(Amp::BF16, "bf16",
                              "matrix products on bf16 operands with f32 "
                              "accumulation; f32 master weights, optimizer and "
                              "everything else"),
                   clEnumValN(Amp::FP16, "fp16",
                              "matrix products on f16 operands with f32 "
                              "accumulation, and a dynamic loss scale in the "
                              "training step (--loss-scale)")),
        cl::init(Amp::Off), cl::cat(kilncCategory));

enum class AmpActivations { Narrow, F32 };
cl::opt<AmpActivations> ampActivations(
    "amp-activations",
    cl::desc("Under --amp: how the products whose results are activations "
             "(or their gradients) store them"),
    cl::values(clEnumValN(AmpActivations::Narrow, "narrow",
                          "in bf16 (f16 under fp16), summed in f32 and "
                          "rounded once, as autocast stores them (default)"),
               clEnumValN(AmpActivations::F32, "f32",
                          "in f32: twice the bytes for every kernel that "
                          "reads them, no rounding of the results")),
    cl::init(AmpActivations::Narrow), cl::cat(kilncCategory));

using CudaAttention = kiln::CompileOptions::CudaAttention;
cl::opt<CudaAttention> cudaAttention(
    "cuda-attention",
    cl::desc("How the CUDA target computes attention and its gradient"),
    cl::values(clEnumValN(CudaAttention::Flash, "flash",
                          "tensor-core kernels that never store the score "
                          "matrices, under --amp=bf16 or fp16 and for head "
                          "sizes 16, 32, 64 and 128; loops for the rest "
                          "(default)"),
               clEnumValN(CudaAttention::Loops, "loops",
                          "loops a thread per query or key row that never "
                          "store the score matrices"),
               clEnumValN(CudaAttention::Expanded, "expanded",
                          "score products, softmax kernels and products, as "
                          "the CPU target"),
               clEnumValN(CudaAttention::Cudnn, "cudnn",
                          "cuDNN's fused attention, under --amp=bf16 or fp16, "
                          "for causal or unmasked attention (its output and "
                          "gradients stored in 16 bits); as flash for the "
                          "rest")),
    cl::init(CudaAttention::Flash), cl::cat(kilncCategory));

cl::opt<bool> cudaGeluEpilogue(
    "cuda-gelu-epilogue",
    cl::desc("CUDA target: apply the tanh GELU, and its derivative in the "
             "backward pass, as cuBLASLt epilogues of the matrix products "
             "they read, instead of kernels of their own"),
    cl::init(false), cl::cat(kilncCategory));

cl::opt<bool> externalWeights(
    "external-weights",
    cl::desc("Store no initial values of trainable parameters in the bundle: "
             "the runtime's caller sets every one before the first run "
             "(kiln-run --params FILE)"),
    cl::init(false), cl::cat(kilncCategory));

cl::opt<bool> emulateCuda(
    "emulate-cuda",
    cl::desc("Testing without a GPU: a CPU bundle that runs the CUDA "
             "target's kernels one thread after another, and its matrix "
             "products through BLAS"),
    cl::init(false), cl::Hidden, cl::cat(kilncCategory));

cl::opt<std::string> cudaPath(
    "cuda-path",
    cl::desc("The CUDA toolkit whose ptxas and libdevice --target=cuda uses "
             "(default: the one Kiln was built with)"),
    cl::value_desc("dir"), cl::init(""), cl::cat(kilncCategory));

cl::opt<std::string>
    cpu("cpu",
        cl::desc("CPU to generate code for, e.g. haswell, skylake-avx512 "
                 "(default: this machine's)"),
        cl::value_desc("name"), cl::init("host"), cl::cat(kilncCategory));

enum class Report { Fusion, Memory, Cost };
cl::list<Report> reports(
    "report", cl::desc("After compiling a bundle, print a report to stdout"),
    cl::CommaSeparated,
    cl::values(clEnumValN(Report::Fusion, "fusion",
                          "kernel counts per entry point before and after "
                          "fusion"),
               clEnumValN(Report::Memory, "memory",
                          "parameter, optimizer-state, input, output and "
                          "arena bytes"),
               clEnumValN(Report::Cost, "cost",
                          "the CUDA target's commands on a roofline of the "
                          "--gpu: FLOPs, bytes, predicted time")),
    cl::cat(kilncCategory));

cl::list<std::string>
    gpus("gpu",
         cl::desc("The GPUs --report=cost models, one report each: h100 "
                  "(default), h200, a100"),
         cl::value_desc("names"), cl::CommaSeparated, cl::cat(kilncCategory));

cl::opt<bool> debugIR("debug-ir",
                      cl::desc("Print the IR after every compiler pass to "
                               "stderr (slow; for debugging)"),
                      cl::init(false), cl::cat(kilncCategory));

cl::opt<bool> elideWeights(
    "elide-weights",
    cl::desc("Print tensors of more than 16 elements elided, not in full"),
    cl::init(false), cl::cat(kilncCategory));

int fail(const Twine &message) {
  WithColor::error(errs(), "kilnc") << message << "\n";
  return 1;
}

} // namespace

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  mlir::registerAsmPrinterCLOptions();
  mlir::registerMLIRContextCLOptions();
  cl::HideUnrelatedOptions(
      {&kilncCategory, &kilnc::trainingCategory(), &kilnc::memoryCategory()});
  cl::SetVersionPrinter([](raw_ostream &os) {
    os << "kilnc (Kiln) " << KILN_VERSION << "\n  LLVM/MLIR "
       << LLVM_VERSION_STRING << "\n";
  });
  cl::ParseCommandLineOptions(
      argc, argv,
      "kilnc: compiles ONNX models with Kiln\n\n"
      "  kilnc model.onnx --batch-size=8 --emit=kiln -o model.mlir\n"
      "  kilnc model.onnx --batch-size=8 --inference -o model.kiln\n");

  if (auto error = kilnc::applyTrainConfig())
    return fail(toString(std::move(error)));
  if (auto error = kilnc::checkTrainingFlags(gradients, amp == Amp::FP16))
    return fail(toString(std::move(error)));
  if (auto error = kilnc::checkMemoryFlags(batchSize.getNumOccurrences()))
    return fail(toString(std::move(error)));
  bool training = kilnc::trainingRequested();
  bool bundle = emit == EmitKind::Bundle ||
                ((inference || training) && emit.getNumOccurrences() == 0);
  // Whether the model is compiled for a target (a bundle, or the IR its
  // code generator takes).
  bool compiles = bundle || emit == EmitKind::Lowered;
  std::optional<int64_t> maxBatchFor = kilnc::maxBatchFor();
  if (!reports.empty() && !bundle)
    return fail("--report needs a bundle (--inference or a training spec)");
  if ((maxBatchFor || kilnc::memoryBudget()) && !bundle)
    return fail(
        std::string(maxBatchFor ? "--max-batch-for" : "--memory-budget") +
        " needs a bundle (--inference or a training spec)");
  if (maxBatchFor && !reports.empty())
    return fail("--max-batch-for compiles nothing to report on; leave out "
                "--report");
  if (dumpPipeline && maxBatchFor)
    return fail("--max-batch-for compiles at many batch sizes; leave out "
                "--dump-pipeline");
  if (bundle && !maxBatchFor && !dumpPipeline && outputFile == "-")
    return fail("a bundle is binary: name the output file with -o FILE.kiln");
  kiln::CompileOptions compileOptions;
  compileOptions.cpuTarget = compileOptions.cudaTarget = false;
  SmallVector<StringRef> targets;
  StringRef(target).split(targets, ',');
  for (StringRef name : targets) {
    bool *enabled = name == "cpu"    ? &compileOptions.cpuTarget
                    : name == "cuda" ? &compileOptions.cudaTarget
                                     : nullptr;
    if (!enabled)
      return fail("--target: unknown target '" + name.str() +
                  "' (expected cpu, cuda or cpu,cuda)");
    if (*enabled)
      return fail("--target: '" + name.str() + "' is named twice");
    *enabled = true;
  }
  if (!cudaArchs.empty())
    compileOptions.cuda.archs.assign(cudaArchs.begin(), cudaArchs.end());
  if (auto error = kiln::checkCudaArchs(compileOptions.cuda.archs))
    return fail("--cuda-arch: " + toString(std::move(error)));
  // --emulate-cuda stands for the CUDA target on the CPU.
  if (emulateCuda && !target.getNumOccurrences())
    compileOptions.cudaTarget = false;
  if ((cudaArchs.getNumOccurrences() || cudaPath.getNumOccurrences()) &&
      !compileOptions.cudaTarget)
    return fail("--cuda-arch and --cuda-path need --target=cuda (or "
                "cpu,cuda)");
  compileOptions.cuda.toolkitPath = cudaPath;
  compileOptions.emulateCuda = emulateCuda;
  if (cudaAttention.getNumOccurrences() && !compileOptions.cudaTarget &&
      !emulateCuda)
    return fail("--cuda-attention applies to the CUDA target: use it with "
                "--target=cuda or cpu,cuda");
  compileOptions.cudaAttention = cudaAttention;
  if (cudaGeluEpilogue && !compileOptions.cudaTarget && !emulateCuda)
    return fail("--cuda-gelu-epilogue applies to the CUDA target: use it "
                "with --target=cuda or cpu,cuda");
  compileOptions.cudaGeluEpilogue = cudaGeluEpilogue;
  if (amp != Amp::Off) {
    if (!compileOptions.cudaTarget && !emulateCuda)
      return fail(std::string("--amp=") + (amp == Amp::BF16 ? "bf16" : "fp16") +
                  " applies to the CUDA target: use it with --target=cuda or "
                  "cpu,cuda");
    compileOptions.cudaPrecision =
        amp == Amp::BF16 ? kiln::Precision::BF16 : kiln::Precision::F16;
  } else if (ampActivations.getNumOccurrences()) {
    return fail("--amp-activations applies under --amp=bf16 or fp16");
  }
  compileOptions.ampNarrowActivations =
      ampActivations == AmpActivations::Narrow;
  if (emulateCuda && (compileOptions.cudaTarget || !compileOptions.cpuTarget))
    return fail("--emulate-cuda makes a CPU bundle: use it with --target=cpu");
  bool costReport = llvm::is_contained(reports, Report::Cost);
  if (gpus.getNumOccurrences() && !costReport)
    return fail("--gpu names the GPU of --report=cost; add --report=cost");
  std::vector<const kilnc::GpuModel *> gpuModels;
  for (const std::string &name :
       gpus.empty() ? std::vector<std::string>{"h100"} : gpus) {
    const kilnc::GpuModel *model = kilnc::findGpu(name);
    if (!model)
      return fail("--gpu=" + name +
                  ": unknown GPU (known: " + kilnc::gpuNames() + ")");
    gpuModels.push_back(model);
  }
  if (costReport && !compileOptions.cudaTarget)
    return fail("--report=cost models the CUDA target's commands: use it with "
                "--target=cuda or cpu,cuda");

  kiln::ImportOptions options;
  for (const std::string &binding : dims) {
    auto parsed = kiln::parseDimBinding(binding);
    if (!parsed)
      return fail("--dim: " + toString(parsed.takeError()));
    options.dims[parsed->first] = parsed->second;
  }
  if (batchSize.getNumOccurrences()) {
    if (batchSize <= 0)
      return fail("--batch-size must be a positive integer");
    options.batchSize = batchSize;
  }
  for (const std::string &binding : bindInputs) {
    auto [name, file] = StringRef(binding).split('=');
    if (name.empty() || file.empty())
      return fail("--bind-input expects NAME=FILE, got '" + binding + "'");
    options.boundInputs[name] = file.str();
  }

  mlir::DialectRegistry registry;
  kiln::registerAllDialects(registry);
  mlir::MLIRContext context(registry);
  context.printOpOnDiagnostic(false);

  // The imported model, with the training passes run when a step or
  // gradients were asked for.
  bool notedRemarks = false, notedTrained = false;
  auto prepare = [&](const kiln::ImportOptions &importOptions)
      -> Expected<mlir::OwningOpRef<mlir::ModuleOp>> {
    auto module = kiln::importONNXFile(context, inputFile, importOptions);
    if (!module)
      return module.takeError();
    // A model with ONNX training_info brings its own training step, which
    // the importer made the function train_step.
    bool ownStep = (*module)->lookupSymbol("train_step") != nullptr;
    if (ownStep && (training || kilnc::lossRequested()))
      return createStringError(
          inconvertibleErrorCode(),
          inputFile + ": the model defines its training step (ONNX "
                      "training_info); --optimizer, --loss and the flags "
                      "that configure them do not apply to it");
    if (compiles && !inference && !training && !ownStep)
      return createStringError(
          inconvertibleErrorCode(),
          std::string(bundle ? "--emit=bundle" : "--emit=lowered") +
              " needs --inference, a training spec "
              "(--optimizer=sgd|adam|adamw|adagrad) or a model with "
              "training_info");
    if (gradients && !inference)
      return createStringError(inconvertibleErrorCode(),
                               "--gradients needs --inference");
    if (gradients || training) {
      Expected<std::vector<std::string>> trainable = kilnc::trainableNames();
      if (!trainable)
        return trainable.takeError();
      if (Error error = kilnc::markTrainable(**module, *trainable))
        return std::move(error);
      if (emit == EmitKind::Imported)
        return std::move(*module);
      mlir::PassManager pm(&context);
      kiln::buildTrainingPipeline(
          pm, kilnc::trainingOptions(amp == Amp::FP16, gradients));
      std::string diagnostic, remark;
      unsigned remarks = 0;
      mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &d) {
        if (d.getSeverity() == mlir::DiagnosticSeverity::Remark) {
          if (remarks++ == 0)
            remark = d.str();
        } else if (diagnostic.empty()) {
          diagnostic = d.str();
        }
        return mlir::success();
      });
      if (mlir::failed(pm.run(**module)))
        return createStringError(inconvertibleErrorCode(),
                                 inputFile + ": " + diagnostic);
      // The passes' remarks (attention left expanded), once per compilation
      // and for all the places they were made.
      if (remarks && !notedRemarks) {
        notedRemarks = true;
        WithColor::note(errs(), "kilnc")
            << inputFile << ": " << remark
            << (remarks > 1 ? " (" + std::to_string(remarks) + " places)"
                            : std::string())
            << "; docs/kilnc.md, \"Training steps\", says which attention "
               "fuses\n";
      }
      if (!notedTrained) {
        notedTrained = true;
        kilnc::noteTrainedParameters(**module, inputFile, !trainable->empty());
      }
    }
    return std::move(*module);
  };

  compileOptions.cpu.cpu = cpu;
  compileOptions.printIRAfterAll = debugIR;
  if (maxBatchFor) {
    auto atBatch = [&](int64_t batch) {
      kiln::ImportOptions batched = options;
      batched.batchSize = batch;
      return prepare(batched);
    };
    if (auto error =
            kilnc::printMaxBatch(atBatch, *maxBatchFor, compileOptions, outs()))
      return fail(inputFile + ": " + toString(std::move(error)));
    return 0;
  }

  auto module = prepare(options);
  if (!module)
    return fail(toString(module.takeError()));
  if (std::optional<int64_t> budget = kilnc::memoryBudget())
    if (auto error = kilnc::fitMemoryBudget(**module, *budget, compileOptions))
      return fail(inputFile + ": " + toString(std::move(error)));
  // The targets compiled for, one compile pipeline each.
  SmallVector<kiln::CompileOptions> perTarget;
  if (compiles) {
    if (compileOptions.cpuTarget) {
      perTarget.push_back(compileOptions);
      perTarget.back().cudaTarget = false;
    }
    if (compileOptions.cudaTarget) {
      perTarget.push_back(compileOptions);
      perTarget.back().cpuTarget = false;
    }
  }
  if (dumpPipeline) {
    // Single quotes for the shell.
    auto quoted = [](const std::string &text) {
      std::string out = "'";
      for (char c : text)
        out += c == '\'' ? std::string("'\\''") : std::string(1, c);
      return out + "'";
    };
    outs() << "# On the IR of: kilnc " << inputFile
           << " <the same flags> --emit=imported -o model.mlir\n";
    std::string train;
    if (gradients || training)
      train = " --kiln-train-pipeline=" +
              quoted(kiln::printTrainingOptions(
                  kilnc::trainingOptions(amp == Amp::FP16, gradients)));
    if (perTarget.empty())
      outs() << "kiln-opt model.mlir" << train << "\n";
    for (const kiln::CompileOptions &one : perTarget)
      outs() << "kiln-opt model.mlir" << train << " --kiln-compile-pipeline="
             << quoted(kiln::printCompileOptions(one)) << "\n";
    return 0;
  }
  if (emit == EmitKind::Lowered) {
    if (perTarget.size() != 1)
      return fail("--emit=lowered prints one target's IR: name one with "
                  "--target=cpu or --target=cuda");
    compileOptions.planOnly = true;
    auto compiled = kiln::compileModel(**module, compileOptions);
    if (!compiled)
      return fail(inputFile + ": " + toString(compiled.takeError()));
  }
  if (bundle) {
    auto compiled = kiln::compileModel(**module, compileOptions);
    if (!compiled)
      return fail(inputFile + ": " + toString(compiled.takeError()));
    kiln::BundleOptions bundleOptions;
    bundleOptions.externalWeights = externalWeights;
    if (auto error = kiln::writeBundle(
            *compiled, outputFile, sys::path::stem(inputFile), bundleOptions))
      return fail(toString(std::move(error)));
    for (Report report : reports) {
      if (report == Report::Fusion)
        kilnc::printFusionReport(*compiled, outs());
      else if (report == Report::Memory)
        kilnc::printMemoryReport(*compiled, outs());
      else if (compiled->cuda)
        for (const kilnc::GpuModel *gpuModel : gpuModels)
          kilnc::printCostReport(*compiled, *gpuModel, outs());
    }
    return 0;
  }

  // Open the output only now, so a failed compile never clobbers it.
  std::string error;
  auto output = mlir::openOutputFile(outputFile, &error);
  if (!output)
    return fail(error);
  mlir::OpPrintingFlags flags;
  if (elideWeights)
    flags.elideLargeElementsAttrs(16);
  (*module)->print(output->os(), flags);
  output->os() << "\n";
  if (output->os().has_error())
    return fail("cannot write '" + outputFile + "'");
  output->keep();
  return 0;
}
