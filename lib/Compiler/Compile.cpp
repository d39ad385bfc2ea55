//===- Compile.cpp - the compilation pipeline -----------------------------===//
//
// The compile pipeline of each target (lib/Compiler/Pipelines.cpp) on the
// imported module, the entry points' signatures and arguments read from
// it, then each target's code generator.
//
//===----------------------------------------------------------------------===//

#include "kiln/Compiler/Compile.h"
#include "kiln/Compiler/Pipelines.h"
#include "kiln/Target/Support.h"

#include "kiln/KilnOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassManager.h"

using namespace mlir;
using kiln::makeError;
using llvm::Expected;

namespace {

/// Records the signature of every entry function before bufferization
/// rewrites it.
std::vector<kiln::CompiledEntry> collectSignatures(ModuleOp module) {
  std::vector<kiln::CompiledEntry> entries;
  for (auto function : module.getOps<func::FuncOp>()) {
    if (function.isExternal())
      continue;
    kiln::CompiledEntry entry;
    entry.name = function.getName().str();
    entry.kernel = kiln::cpuKernelSymbol(entry.name);
    for (unsigned i = 0; i < function.getNumArguments(); ++i) {
      auto name = function.getArgAttrOfType<StringAttr>(i, "kiln.name");
      entry.inputs.push_back(
          {name ? name.str() : "input" + std::to_string(i),
           cast<RankedTensorType>(function.getArgumentTypes()[i])});
    }
    for (unsigned i = 0; i < function.getNumResults(); ++i) {
      auto name = function.getResultAttrOfType<StringAttr>(i, "kiln.name");
      auto updates = function.getResultAttrOfType<StringAttr>(i, "kiln.update");
      entry.outputs.push_back(
          {name ? name.str() : "output" + std::to_string(i),
           cast<RankedTensorType>(function.getResultTypes()[i]),
           updates ? updates.str() : ""});
    }
    entries.push_back(std::move(entry));
  }
  return entries;
}

/// Reads the call order of each bufferized entry function: its own inputs,
/// the parameters it reads, its outputs (out-params), the arena.
llvm::Error collectArguments(ModuleOp module,
                             std::vector<kiln::CompiledEntry> &entries,
                             const llvm::StringMap<unsigned> &paramIndex) {
  for (kiln::CompiledEntry &entry : entries) {
    auto function = module.lookupSymbol<func::FuncOp>(entry.name);
    if (!function)
      return makeError("entry function '" + entry.name + "' disappeared");
    unsigned inputs = 0, outputs = 0;
    for (unsigned i = 0; i < function.getNumArguments(); ++i) {
      kiln::EntryArgument argument;
      if (auto param = function.getArgAttrOfType<StringAttr>(i, "kiln.param")) {
        auto found = paramIndex.find(param.getValue());
        if (found == paramIndex.end())
          return makeError("unknown parameter '" + param.getValue() + "'");
        argument = {kiln::EntryArgument::Param, found->second};
      } else if (function.getArgAttr(i, "kiln.arena")) {
        argument = {kiln::EntryArgument::Arena, 0};
      } else if (inputs < entry.inputs.size()) {
        argument = {kiln::EntryArgument::Input, inputs++};
      } else {
        argument = {kiln::EntryArgument::Output, outputs++};
      }
      entry.arguments.push_back(argument);
    }
    if (inputs != entry.inputs.size() || outputs != entry.outputs.size())
      return makeError("entry function '" + entry.name +
                       "' has an unexpected signature after bufferization");
    if (auto bytes = function->getAttrOfType<IntegerAttr>("kiln.arena_bytes"))
      entry.arenaBytes = bytes.getInt();
    if (auto peak =
            function->getAttrOfType<DictionaryAttr>("kiln.arena_peak")) {
      auto read = [&](StringRef key) {
        auto value = peak.getAs<IntegerAttr>(key);
        return value ? value.getInt() : 0;
      };
      entry.arenaPeak = {read("live"), read("activations"), read("gradients"),
                         read("workspace")};
    }
  }
  return llvm::Error::success();
}

} // namespace

Expected<kiln::CompiledModel>
kiln::compileModel(ModuleOp module, const CompileOptions &options) {
  CompiledModel model;
  model.metadata = module->getAttr("kiln.metadata");
  llvm::StringMap<unsigned> paramIndex;
  // After kiln-autodiff (which marks the module kiln.differentiated), the
  // parameters that get a gradient are marked kiln.trained; the others
  // (buffers, frozen ones) are not trainable. Without it (inference, ONNX
  // training_info) every parameter but the optimizer state and the
  // exporter's buffers is.
  bool differentiated = module->hasAttr("kiln.differentiated");
  for (auto param : module.getOps<ParamOp>()) {
    auto value =
        dyn_cast_or_null<DenseElementsAttr>(param.getInitialValueAttr());
    if (!value)
      return makeError("parameter '" + param.getSymName() +
                       "' has no initial value");
    paramIndex[param.getSymName()] = model.params.size();
    auto shardRanks = param->getAttrOfType<IntegerAttr>("kiln.shard_ranks");
    model.params.push_back(
        {param.getSymName().str(), cast<RankedTensorType>(param.getType()),
         value,
         !param->hasAttr("kiln.optimizer_state") &&
             (differentiated ? param->hasAttr("kiln.trained")
                             : !param->hasAttr("kiln.buffer")),
         param->hasAttr("kiln.optimizer_state"),
         shardRanks ? shardRanks.getInt() : 0});
  }
  // Every entry point counts the indices out of range it is given, which
  // the runtime reports (kiln-check-indices); the counts are outputs, so
  // they come before the signatures are read.
  {
    PassManager checks(module.getContext());
    buildIndexChecks(checks);
    if (failed(checks.run(module)))
      return makeError("kiln-check-indices failed");
  }
  model.entries = collectSignatures(module);

  if (!options.cpuTarget && !options.cudaTarget)
    return makeError("no target to compile for");
  if (options.emulateCuda && (options.cudaTarget || !options.cpuTarget))
    return makeError("emulating the CUDA target makes a CPU bundle: it "
                     "cannot be combined with another target");
  if (options.printIRAfterAll)
    module.getContext()->disableMultithreading();
  auto makePassManager = [&] {
    auto pm = std::make_unique<PassManager>(module.getContext());
    if (options.printIRAfterAll)
      pm->enableIRPrinting();
    return pm;
  };
  llvm::StringMap<KernelCounts> counts;
  // The targets part before the tensor passes, which already differ in how
  // they compute attention; each then bufferizes and plans its own copy.
  bool cpu = options.cpuTarget, cuda = options.cudaTarget && !options.planOnly;
  OwningOpRef<ModuleOp> cudaModule;
  if (cpu && cuda)
    cudaModule = module.clone();
  {
    auto pm = makePassManager();
    buildTensorPipeline(*pm, options, /*forCuda=*/!cpu || options.emulateCuda,
                        &counts);
    if (llvm::Error error = kiln::runPasses(*pm, module, "compiling the model"))
      return std::move(error);
  }
  ModuleOp first = cpu ? module : (cudaModule ? *cudaModule : module);
  {
    auto pm = makePassManager();
    buildBufferPipeline(*pm, options, /*forCpu=*/cpu && !options.emulateCuda,
                        cpu && !options.emulateCuda ? Precision::F32
                                                    : options.cudaPrecision,
                        &counts);
    if (llvm::Error error = kiln::runPasses(*pm, first, "compiling the model"))
      return std::move(error);
  }
  for (CompiledEntry &entry : model.entries)
    entry.kernels = counts.lookup(entry.name);
  if (llvm::Error error = collectArguments(first, model.entries, paramIndex))
    return std::move(error);
  if (options.planOnly)
    return model;

  // Parameters the code of either target relies on the values of.
  auto collectFixed = [&](ModuleOp target) {
    for (auto param : target.getOps<ParamOp>())
      if (param->hasAttr("kiln.fixed")) {
        auto found = paramIndex.find(param.getSymName());
        if (found != paramIndex.end())
          model.params[found->second].fixed = true;
      }
  };
  if (cpu) {
    collectFixed(module);
    // Parameters live in the bundle, not in the code.
    for (auto param : llvm::make_early_inc_range(module.getOps<ParamOp>()))
      param.erase();
    auto code = compileForCPU(module, options.cpu);
    if (!code)
      return code.takeError();
    model.cpu = std::move(*code);
  }
  if (cuda) {
    ModuleOp target = cudaModule ? *cudaModule : module;
    if (cudaModule) {
      auto pm = makePassManager();
      llvm::StringMap<KernelCounts> cudaCounts;
      buildTensorPipeline(*pm, options, /*forCuda=*/true, &cudaCounts);
      buildBufferPipeline(*pm, options, /*forCpu=*/false,
                          options.cudaPrecision);
      if (llvm::Error error =
              kiln::runPasses(*pm, target, "compiling the model for CUDA"))
        return std::move(error);
      // Both targets' entry points take the same arguments in the same
      // order: the bundle describes them once.
      std::vector<CompiledEntry> entries = model.entries;
      for (CompiledEntry &entry : entries)
        entry.arguments.clear();
      if (llvm::Error error = collectArguments(target, entries, paramIndex))
        return std::move(error);
      for (auto [cpuEntry, cudaEntry] : llvm::zip(model.entries, entries))
        if (!llvm::equal(cpuEntry.arguments, cudaEntry.arguments,
                         [](const EntryArgument &x, const EntryArgument &y) {
                           return x.kind == y.kind && x.index == y.index;
                         }))
          return makeError("entry point '" + cpuEntry.name +
                           "' takes its arguments in another order on CUDA "
                           "than on the CPU");
    }
    collectFixed(target);
    for (auto param : llvm::make_early_inc_range(target.getOps<ParamOp>()))
      param.erase();
    auto code = compileForCUDA(target, options.cuda);
    if (!code)
      return code.takeError();
    model.cuda = std::move(*code);
  }
  return model;
}

int64_t kiln::inputBytes(const CompiledEntry &entry) {
  int64_t bytes = 0;
  for (const TensorInfo &input : entry.inputs)
    bytes += tensorBytes(input.type);
  return bytes;
}

int64_t kiln::outputBytes(const CompiledEntry &entry) {
  int64_t bytes = 0;
  for (const TensorInfo &output : entry.outputs)
    if (output.updates.empty())
      bytes += tensorBytes(output.type);
  return bytes;
}

int64_t kiln::sessionBytes(const CompiledModel &model) {
  int64_t params = 0, arena = 0, io = 0;
  for (const CompiledParam &param : model.params)
    params += tensorBytes(param.type);
  for (const CompiledEntry &entry : model.entries) {
    io = std::max(io, inputBytes(entry) + outputBytes(entry));
    arena = std::max(arena, entry.arenaBytes);
  }
  return params + arena + io;
}
