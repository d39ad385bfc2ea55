//===- CPUTarget.cpp - kiln modules to a CPU shared object ----------------===//

#include "kiln/Target/CPU.h"
#include "kiln/Target/Support.h"

#include "kiln/Target/CPU/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Utils/Utils.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/IR/DiagnosticHandler.h"
#include "llvm/IR/DiagnosticInfo.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/SubtargetFeature.h"

using namespace mlir;
using kiln::makeError;
using llvm::Expected;

std::string kiln::cpuKernelSymbol(StringRef entry) {
  return ("kiln_" + entry).str();
}

namespace {

/// memref.copy between non-contiguous buffers would need a runtime helper
/// library; as linalg.copy it becomes plain loops.
struct CopyToLinalgPass
    : PassWrapper<CopyToLinalgPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(CopyToLinalgPass)
  void runOnOperation() override {
    getOperation().walk([](memref::CopyOp copy) {
      OpBuilder b(copy);
      linalg::CopyOp::create(b, copy.getLoc(), copy.getSource(),
                             copy.getTarget());
      copy.erase();
    });
  }
};

/// The iterations of a loop dimension from `lb` to `ub` by `step`, when
/// they are constants (and the step positive).
std::optional<int64_t> constantTripCount(Value lb, Value ub, Value step) {
  auto l = getConstantIntValue(lb), u = getConstantIntValue(ub),
       s = getConstantIntValue(step);
  if (!l || !u || !s || *s <= 0)
    return std::nullopt;
  return std::max<int64_t>(0, (*u - *l + *s - 1) / *s);
}

/// Static iteration count of `op`'s loop nest (its own trip count times the
/// largest of its nested loops'), saturating.
int64_t iterationCount(Operation *op) {
  int64_t own = 1;
  auto tripCount = [](Value lb, Value ub, Value step) -> int64_t {
    // Unknown: assume large.
    return constantTripCount(lb, ub, step).value_or(1 << 20);
  };
  if (auto parallel = dyn_cast<scf::ParallelOp>(op)) {
    for (auto [lb, ub, step] :
         llvm::zip(parallel.getLowerBound(), parallel.getUpperBound(),
                   parallel.getStep()))
      own = std::min<int64_t>(own * tripCount(lb, ub, step), int64_t(1) << 40);
  } else if (auto loop = dyn_cast<scf::ForOp>(op)) {
    own = tripCount(loop.getLowerBound(), loop.getUpperBound(), loop.getStep());
  }
  int64_t inner = 1;
  for (Region &region : op->getRegions())
    for (Operation &nested : region.getOps())
      if (isa<scf::ParallelOp, scf::ForOp>(nested))
        inner = std::max(inner, iterationCount(&nested));
  return std::min<int64_t>(own * inner, int64_t(1) << 40);
}

/// Keeps scf.parallel (which becomes an OpenMP worksharing loop) only for
/// outermost loops with enough work to pay for waking the thread team;
/// every other one becomes a sequential loop nest.
struct ChooseParallelLoopsPass
    : PassWrapper<ChooseParallelLoopsPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(ChooseParallelLoopsPass)
  static constexpr int64_t kMinParallelIterations = 1 << 15;

  void runOnOperation() override {
    SmallVector<scf::ParallelOp> sequential;
    getOperation().walk([&](scf::ParallelOp op) {
      if (!op.getInitVals().empty())
        return;
      bool nested = op->getParentOfType<scf::ParallelOp>() != nullptr;
      if (nested || iterationCount(op) < kMinParallelIterations)
        sequential.push_back(op);
    });
    // The walk visits inner loops first: a loop is rewritten before the one
    // that holds it is cloned.
    for (scf::ParallelOp op : sequential) {
      OpBuilder b(op);
      scf::LoopNest nest = scf::buildLoopNest(
          b, op.getLoc(), op.getLowerBound(), op.getUpperBound(), op.getStep(),
          [&](OpBuilder &nb, Location, ValueRange ivs) {
            IRMapping mapping;
            mapping.map(op.getInductionVars(), ivs);
            for (Operation &inner : op.getBody()->without_terminator())
              nb.clone(inner, mapping);
          });
      markParallel(nest);
      op.erase();
    }
    // Of a loop kept parallel, only its leading dimensions are shared out:
    // the fewest whose iterations number kParallelPrefix or more. OpenMP
    // collapses the shared dimensions into one loop whose body recomputes
    // every index by division, which LLVM does not vectorize; the others
    // stay loops of their own, the innermost a plain loop LLVM vectorizes.
    SmallVector<scf::ParallelOp> kept;
    getOperation().walk([&](scf::ParallelOp op) {
      if (op.getInitVals().empty() && op.getNumLoops() > 1)
        kept.push_back(op);
    });
    for (scf::ParallelOp op : kept)
      shareLeadingDimensions(op);
  }

  static constexpr int64_t kParallelPrefix = 64;

  static void shareLeadingDimensions(scf::ParallelOp op) {
    unsigned shared = 0;
    int64_t iterations = 1;
    for (auto [lb, ub, step] :
         llvm::zip(op.getLowerBound(), op.getUpperBound(), op.getStep())) {
      std::optional<int64_t> count = constantTripCount(lb, ub, step);
      if (!count)
        return; // Unknown trip counts: left as they are.
      iterations *= std::max<int64_t>(1, *count);
      ++shared;
      if (iterations >= kParallelPrefix)
        break;
    }
    if (shared == op.getNumLoops())
      return;
    OpBuilder b(op);
    ValueRange lbs = op.getLowerBound(), ubs = op.getUpperBound(),
               steps = op.getStep();
    SmallVector<Value> ivs = op.getInductionVars();
    ValueRange outerIvs = ValueRange(ivs).take_front(shared),
               innerIvs = ValueRange(ivs).drop_front(shared);
    SmallVector<Value> innerLb(lbs.drop_front(shared)),
        innerUb(ubs.drop_front(shared)), innerStep(steps.drop_front(shared));
    scf::ParallelOp::create(
        b, op.getLoc(), lbs.take_front(shared), ubs.take_front(shared),
        steps.take_front(shared),
        [&](OpBuilder &ob, Location loc, ValueRange outer) {
          markParallel(scf::buildLoopNest(
              ob, loc, innerLb, innerUb, innerStep,
              [&](OpBuilder &nb, Location, ValueRange inner) {
                IRMapping mapping;
                mapping.map(outerIvs, outer);
                mapping.map(innerIvs, inner);
                for (Operation &body : op.getBody()->without_terminator())
                  nb.clone(body, mapping);
              }));
        });
    op.erase();
  }

  /// Marks the innermost loop of `nest`, made of parallel dimensions, for
  /// kiln-simd-loops.
  static void markParallel(const scf::LoopNest &nest) {
    if (nest.loops.empty())
      return;
    Operation *innermost = nest.loops.back();
    innermost->setAttr("kiln.parallel", UnitAttr::get(innermost->getContext()));
  }
};

/// Replaces calls of tanh, erf, exp, log... by inline polynomial
/// approximations (accurate to a few ulp in f32), which LLVM vectorizes,
/// instead of scalar calls into libm.
struct ApproximateMathPass
    : PassWrapper<ApproximateMathPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(ApproximateMathPass)
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateMathPolynomialApproximationPatterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

/// Gives every zero-element memref argument the type memref<0xT>, which the
/// bare-pointer calling convention the entry points use can pass (MLIR finds
/// no strides for an identity layout with a zero dimension, and would give
/// the whole function memref descriptors instead). Nothing reads or writes a
/// zero-element buffer: its uses take a zero-element alloca.
struct ZeroElementArgumentsPass
    : PassWrapper<ZeroElementArgumentsPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(ZeroElementArgumentsPass)
  void runOnOperation() override {
    getOperation().walk([](func::FuncOp function) {
      if (function.isExternal())
        return;
      SmallVector<Type> inputs(function.getArgumentTypes());
      bool changed = false;
      for (auto [i, type] : llvm::enumerate(inputs)) {
        auto memref = dyn_cast<MemRefType>(type);
        if (!memref || !memref.hasStaticShape() ||
            memref.getNumElements() != 0 ||
            memref.getShape() == ArrayRef<int64_t>{0})
          continue;
        BlockArgument argument = function.getArgument(i);
        OpBuilder b = OpBuilder::atBlockBegin(&function.front());
        Value empty = memref::AllocaOp::create(
            b, function.getLoc(),
            MemRefType::get(memref.getShape(), memref.getElementType()));
        argument.replaceAllUsesWith(empty);
        type = MemRefType::get({0}, memref.getElementType());
        argument.setType(type);
        changed = true;
      }
      if (changed)
        function.setFunctionType(FunctionType::get(
            function.getContext(), inputs, function.getResultTypes()));
    });
  }
};

/// Drops LLVM's optimization-failure warnings; the rest print as usual.
struct IgnoreOptimizationFailures : llvm::DiagnosticHandler {
  bool handleDiagnostics(const llvm::DiagnosticInfo &info) override {
    return info.getKind() == llvm::DK_OptimizationFailure;
  }
};

/// memref IR -> LLVM dialect.
void buildLLVMLowering(PassManager &pm) {
  pm.addPass(kiln::createKilnOutlineKernels());
  pm.addPass(kiln::createKilnProfileMarks());
  pm.addPass(std::make_unique<CopyToLinalgPass>());
  pm.addPass(createConvertLinalgToParallelLoopsPass());
  pm.addPass(kiln::createKilnPromoteReductionAccumulators());
  pm.addPass(std::make_unique<ChooseParallelLoopsPass>());
  pm.addPass(kiln::createKilnSimdLoops());
  pm.addPass(createConvertSCFToOpenMPPass());
  // Inlines the memref.alloca_scope regions scf-to-openmp wraps loop bodies
  // in: they must be gone before loops become multi-block control flow.
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  // Integer powers left in the IR (math.ipowi, math.fpowi: kiln.pow's own
  // integer form is inline code) become calls of generated functions.
  pm.addPass(createConvertMathToFuncs());
  pm.addPass(math::createMathExtendToSupportedTypes());
  pm.addPass(std::make_unique<ApproximateMathPass>());
  pm.addPass(std::make_unique<ZeroElementArgumentsPass>());
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createConvertMathToLibmPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertIndexToLLVMPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  ConvertFuncToLLVMPassOptions funcOptions;
  funcOptions.useBarePtrCallConv = true;
  pm.addPass(createConvertFuncToLLVMPass(funcOptions));
  // After func-to-llvm: its patterns would otherwise convert the entry
  // functions without the bare-pointer calling convention.
  pm.addPass(createConvertOpenMPToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  pm.addPass(createCanonicalizerPass());
}

/// Adds `void kiln_<name>(void **buffers)` calling each entry function with
/// one pointer per argument, and hides the entry functions themselves.
std::vector<std::string> addPackedEntryPoints(ModuleOp module,
                                              ArrayRef<std::string> entries) {
  MLIRContext *context = module.getContext();
  OpBuilder b(context);
  auto ptr = LLVM::LLVMPointerType::get(context);
  std::vector<std::string> kernels;
  for (const std::string &name : entries) {
    auto function = module.lookupSymbol<LLVM::LLVMFuncOp>(name);
    if (!function)
      continue;
    function.setLinkage(LLVM::Linkage::Internal);
    b.setInsertionPointToEnd(module.getBody());
    std::string symbol = kiln::cpuKernelSymbol(name);
    auto wrapper = LLVM::LLVMFuncOp::create(
        b, function.getLoc(), symbol,
        LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(context), {ptr}));
    Block *entry = wrapper.addEntryBlock(b);
    b.setInsertionPointToStart(entry);
    SmallVector<Value> args;
    for (unsigned i = 0; i < function.getNumArguments(); ++i) {
      Value slot = LLVM::GEPOp::create(
          b, function.getLoc(), ptr, ptr, entry->getArgument(0),
          ArrayRef<LLVM::GEPArg>{static_cast<int32_t>(i)});
      args.push_back(LLVM::LoadOp::create(b, function.getLoc(), ptr, slot));
    }
    LLVM::CallOp::create(b, function.getLoc(), function, args);
    LLVM::ReturnOp::create(b, function.getLoc(), ValueRange{});
    kernels.push_back(symbol);
  }
  return kernels;
}

Expected<std::unique_ptr<llvm::TargetMachine>>
makeTargetMachine(const kiln::CPUTargetOptions &options, std::string &triple,
                  std::string &cpu) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  triple = llvm::sys::getDefaultTargetTriple();
  std::string error;
  llvm::Triple parsed(triple);
  const llvm::Target *target =
      llvm::TargetRegistry::lookupTarget(parsed, error);
  if (!target)
    return makeError("no LLVM target for " + triple + ": " + error);
  std::string features;
  if (options.cpu == "host") {
    cpu = llvm::sys::getHostCPUName().str();
    llvm::SubtargetFeatures featureSet;
    for (const auto &[feature, enabled] : llvm::sys::getHostCPUFeatures())
      featureSet.AddFeature(feature, enabled);
    features = featureSet.getString();
  } else {
    cpu = options.cpu;
  }
  llvm::TargetOptions targetOptions;
  std::unique_ptr<llvm::TargetMachine> machine(target->createTargetMachine(
      parsed, cpu, features, targetOptions, llvm::Reloc::PIC_));
  if (!machine)
    return makeError("cannot create a target machine for " + triple + " / " +
                     cpu);
  if (options.cpu != "host" &&
      !machine->getMCSubtargetInfo()->isCPUStringValid(cpu))
    return makeError("unknown CPU '" + cpu + "' for " + triple);
  return machine;
}

Expected<std::string> linkSharedObject(StringRef object) {
  std::string linker;
  for (const char *name : {"clang-22", "clang", "cc", "gcc"}) {
    if (auto found = llvm::sys::findProgramByName(name)) {
      linker = *found;
      break;
    }
  }
  if (linker.empty())
    return makeError("no C compiler driver (clang or cc) found to link the "
                     "CPU kernels");
  // LLVM calls runtime helpers for some conversions (f32 to bf16:
  // __truncsfbf2, which the CUDA target's rounded operands need under
  // --emulate-cuda) that libgcc before GCC 13 lacks; clang links them from
  // its own builtins library into the shared object.
  bool isClang = llvm::sys::path::filename(linker).starts_with("clang");
  return kiln::runToolOnBytes(
      object, "o", "so", linker,
      [&](StringRef objectPath, StringRef libraryPath) {
        std::vector<std::string> command{linker,
                                         "-shared",
                                         "-o",
                                         libraryPath.str(),
                                         objectPath.str(),
                                         "-lopenblas",
                                         "-L" KILN_OPENMP_LIBRARY_DIR,
                                         "-lomp",
                                         "-Wl,-rpath," KILN_OPENMP_LIBRARY_DIR,
                                         "-lm"};
        if (isClang)
          command.insert(command.begin() + 1, "--rtlib=compiler-rt");
        return command;
      },
      "linking the kernels");
}

} // namespace

Expected<kiln::CPUCode> kiln::compileForCPU(ModuleOp module,
                                            const CPUTargetOptions &options) {
  // Entry points are the public functions with a body; private ones are
  // the compiler's own helpers.
  std::vector<std::string> entries;
  for (auto function : module.getOps<func::FuncOp>())
    if (!function.isExternal() && function.isPublic())
      entries.push_back(function.getName().str());

  PassManager pm(module.getContext());
  buildLLVMLowering(pm);
  if (llvm::Error error = kiln::runPasses(pm, module, "lowering to LLVM"))
    return std::move(error);

  CPUCode code;
  code.kernels = addPackedEntryPoints(module, entries);
  auto machine = makeTargetMachine(options, code.triple, code.cpu);
  if (!machine)
    return machine.takeError();

  llvm::LLVMContext llvmContext;
  // LLVM reports a loop it was asked to vectorize (omp.simd,
  // kiln-simd-loops) and did not, for a short trip count, say, as a warning
  // on stderr: a missed speed-up, nothing the user can act on.
  llvmContext.setDiagnosticHandler(
      std::make_unique<IgnoreOptimizationFailures>());
  std::unique_ptr<llvm::Module> llvmModule =
      translateModuleToLLVMIR(module, llvmContext, "kiln");
  if (!llvmModule)
    return makeError("translating to LLVM IR failed");
  llvmModule->setTargetTriple((*machine)->getTargetTriple());
  llvmModule->setDataLayout((*machine)->createDataLayout());
  auto optimize = makeOptimizingTransformer(options.optLevel, /*sizeLevel=*/0,
                                            machine->get());
  if (llvm::Error error = optimize(llvmModule.get()))
    return std::move(error);

  SmallString<0> object;
  {
    llvm::raw_svector_ostream stream(object);
    llvm::legacy::PassManager codegen;
    if ((*machine)->addPassesToEmitFile(codegen, stream, nullptr,
                                        llvm::CodeGenFileType::ObjectFile))
      return makeError("the target cannot emit object files");
    codegen.run(*llvmModule);
  }
  auto library = linkSharedObject(object);
  if (!library)
    return library.takeError();
  code.sharedObject = std::move(*library);
  return code;
}
