//===- Training.cpp - kilnc's training-spec options -----------------------===//

#include "Training.h"

#include "kiln/KilnOps.h"

#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/WithColor.h"

#include <cmath>

using namespace llvm;

namespace {

cl::OptionCategory &category() {
  static cl::OptionCategory c("kilnc training options");
  return c;
}

cl::opt<std::string> trainConfig(
    "train-config",
    cl::desc("Read the training options from this JSON object (keys are the "
             "flag names, e.g. {\"optimizer\": \"adamw\", \"lr\": 3e-4}); "
             "flags given on the command line win"),
    cl::value_desc("file.json"), cl::init(""), cl::cat(category()));

cl::opt<std::string> lossOutput(
    "loss-output",
    cl::desc("The graph output that is the scalar loss (default: 'loss')"),
    cl::value_desc("name"), cl::init("loss"), cl::cat(category()));
cl::opt<std::string>
    loss("loss",
         cl::desc("Build the loss: cross_entropy, mse or bce_with_logits of "
                  "--loss-on against a new input --labels"),
         cl::value_desc("kind"), cl::init(""), cl::cat(category()));
cl::opt<std::string> lossOn(
    "loss-on",
    cl::desc("The graph output --loss is computed from (default: the only "
             "output)"),
    cl::value_desc("output"), cl::init(""), cl::cat(category()));
cl::opt<std::string> labels("labels",
                            cl::desc("The name of the labels input --loss adds "
                                     "(default: 'labels')"),
                            cl::value_desc("name"), cl::init("labels"),
                            cl::cat(category()));
cl::opt<int64_t> lossClassAxis(
    "loss-class-axis",
    cl::desc("cross_entropy: the axis of the classes (default 1, as PyTorch; "
             "-1 for [batch, sequence, vocabulary] logits)"),
    cl::init(1), cl::cat(category()));
cl::opt<int64_t> ignoreIndex(
    "ignore-index",
    cl::desc("cross_entropy: labels with this value count for nothing "
             "(default -100)"),
    cl::init(-100), cl::cat(category()));
cl::opt<double>
    labelSmoothing("label-smoothing",
                   cl::desc("cross_entropy: label smoothing (default 0)"),
                   cl::init(0.0), cl::cat(category()));
cl::opt<std::string> freeze(
    "freeze",
    cl::desc("Parameters whose name matches this regular expression get no "
             "gradient"),
    cl::value_desc("regex"), cl::init(""), cl::cat(category()));

cl::opt<std::string> trainable(
    "trainable",
    cl::desc("Train only these initializers: names separated by commas, or "
             "@FILE for a file of names, one per line (model.named_parameters()"
             "'s names); every other one stays as it is, as a buffer"),
    cl::value_desc("names|@file"), cl::init(""), cl::cat(category()));

cl::opt<std::string> optimizer(
    "optimizer",
    cl::desc("Compile the training step 'train_step' with this optimizer: "
             "sgd, adam, adamw or adagrad (torch.optim's rules)"),
    cl::value_desc("name"), cl::init(""), cl::cat(category()));
cl::opt<double> learningRate("lr", cl::desc("Learning rate (default 0.01)"),
                             cl::init(0.01), cl::cat(category()));
cl::opt<double> momentum("momentum", cl::desc("SGD momentum (default 0)"),
                         cl::init(0.0), cl::cat(category()));
cl::opt<bool> nesterov("nesterov", cl::desc("SGD: Nesterov momentum"),
                       cl::init(false), cl::cat(category()));
cl::opt<double>
    weightDecay("weight-decay",
                cl::desc("Weight decay: decoupled for AdamW, L2 for the others "
                         "(default 0)"),
                cl::init(0.0), cl::cat(category()));
cl::opt<double> beta1("beta1", cl::desc("Adam/AdamW beta1 (default 0.9)"),
                      cl::init(0.9), cl::cat(category()));
cl::opt<double> beta2("beta2", cl::desc("Adam/AdamW beta2 (default 0.999)"),
                      cl::init(0.999), cl::cat(category()));
cl::opt<double> epsilon(
    "eps", cl::desc("Epsilon (default 1e-8 for Adam/AdamW, 1e-10 for Adagrad)"),
    cl::init(-1.0), cl::cat(category()));
cl::opt<double> lrDecay("lr-decay",
                        cl::desc("Adagrad learning-rate decay (default 0)"),
                        cl::init(0.0), cl::cat(category()));
cl::opt<double> initialAccumulator(
    "initial-accumulator",
    cl::desc("Adagrad: initial squared-gradient sum (default 0)"),
    cl::init(0.0), cl::cat(category()));
cl::opt<std::string> schedule(
    "schedule",
    cl::desc("Learning-rate schedule: constant, linear or cosine (default "
             "constant), with --warmup-steps and --total-steps"),
    cl::value_desc("name"), cl::init("constant"), cl::cat(category()));
cl::opt<int64_t> warmupSteps(
    "warmup-steps",
    cl::desc("Updates over which the learning rate ramps up from 0"),
    cl::init(0), cl::cat(category()));
cl::opt<int64_t> totalSteps(
    "total-steps",
    cl::desc("linear, cosine: the update at which the learning rate is 0"),
    cl::init(0), cl::cat(category()));
cl::opt<double> gradClip(
    "grad-clip",
    cl::desc("Clip the global gradient norm to this (default: no clipping)"),
    cl::value_desc("max-norm"), cl::init(0.0), cl::cat(category()));
cl::opt<int64_t>
    gradAccum("grad-accum",
              cl::desc("Micro-batches (of --batch-size) per optimizer update "
                       "(default 1)"),
              cl::value_desc("K"), cl::init(1), cl::cat(category()));

cl::opt<bool> dataParallel(
    "data-parallel",
    cl::desc("Average the gradients and the loss over all ranks of a "
             "multi-rank run (mpirun/srun), bucket by bucket as the backward "
             "pass finishes them; the bundle then runs at any world size"),
    cl::init(false), cl::cat(category()));
cl::opt<int64_t> bucketBytes(
    "bucket-bytes",
    cl::desc("--data-parallel: the most gradient bytes one all-reduce "
             "carries (default 25 MiB)"),
    cl::value_desc("N"), cl::init(25 << 20), cl::cat(category()));
cl::opt<int64_t> shardOptimizer(
    "shard-optimizer",
    cl::desc("--data-parallel: shard the optimizer state over N ranks "
             "(ZeRO-1: each bucket's gradients reduce-scattered, each rank "
             "updating its shard, the parameters all-gathered); the bundle "
             "then runs with exactly N ranks"),
    cl::value_desc("N"), cl::init(0), cl::cat(category()));

cl::opt<double> lossScaleInit(
    "loss-scale",
    cl::desc("--amp=fp16: the initial dynamic loss scale (default 65536, "
             "as PyTorch's GradScaler)"),
    cl::value_desc("S"), cl::init(65536.0), cl::cat(category()));
cl::opt<int64_t> lossScaleGrowthInterval(
    "loss-scale-growth-interval",
    cl::desc("--amp=fp16: updates in a row without an infinite or NaN "
             "gradient after which the loss scale doubles (default 2000)"),
    cl::value_desc("N"), cl::init(2000), cl::cat(category()));

Error configError(const Twine &message) {
  return createStringError(inconvertibleErrorCode(),
                           "--train-config=" + trainConfig + ": " + message);
}

/// The command-line spelling of a JSON scalar.
std::optional<std::string> flagValue(const json::Value &value) {
  if (auto s = value.getAsString())
    return s->str();
  if (auto b = value.getAsBoolean())
    return *b ? "true" : "false";
  if (auto i = value.getAsInteger())
    return std::to_string(*i);
  if (auto d = value.getAsNumber()) {
    std::string text;
    raw_string_ostream(text) << format("%.17g", *d);
    return text;
  }
  return std::nullopt;
}

} // namespace

cl::OptionCategory &kilnc::trainingCategory() { return category(); }

Error kilnc::applyTrainConfig() {
  if (trainConfig.empty())
    return Error::success();
  auto file = MemoryBuffer::getFile(trainConfig);
  if (!file)
    return configError(file.getError().message());
  Expected<json::Value> parsed = json::parse((*file)->getBuffer());
  if (!parsed)
    return configError(toString(parsed.takeError()));
  const json::Object *object = parsed->getAsObject();
  if (!object)
    return configError("expected a JSON object of training options");
  auto &registered = cl::getRegisteredOptions();
  // Deterministic order, so the first error is the same every run.
  std::vector<std::string> keys;
  for (const auto &entry : *object)
    keys.push_back(entry.first.str());
  llvm::sort(keys);
  for (const std::string &key : keys) {
    cl::Option *option = registered.lookup(key);
    if (!option || key == "train-config" ||
        !llvm::is_contained(option->Categories, &category()))
      return configError("'" + key + "' is not a training option");
    if (option->getNumOccurrences())
      continue;
    std::optional<std::string> value = flagValue(*object->get(key));
    if (!value)
      return configError("'" + key + "' must be a string, number or boolean");
    // addOccurrence reports a bad value on errs(); it returns true then.
    if (option->addOccurrence(0, key, *value))
      return configError("bad value for '" + key + "'");
  }
  return Error::success();
}

bool kilnc::trainingRequested() { return !optimizer.empty(); }

bool kilnc::lossRequested() { return !loss.empty(); }

bool kilnc::shardedOptimizer() { return shardOptimizer > 0; }

Error kilnc::checkTrainingFlags(bool gradients, bool lossScaling) {
  auto error = [](const Twine &message) {
    return createStringError(inconvertibleErrorCode(), message);
  };
  if ((lossScaleInit.getNumOccurrences() ||
       lossScaleGrowthInterval.getNumOccurrences()) &&
      (!lossScaling || optimizer.empty()))
    return error("--loss-scale and --loss-scale-growth-interval apply to a "
                 "training step with --amp=fp16");
  if (!(lossScaleInit > 0) || !std::isfinite(lossScaleInit))
    return error("--loss-scale must be a positive number, not " +
                 formatv("{0}", static_cast<double>(lossScaleInit)));
  if (lossScaleGrowthInterval < 1 || lossScaleGrowthInterval > (1 << 24))
    return error("--loss-scale-growth-interval must lie in [1, 16777216], "
                 "not " +
                 Twine(lossScaleGrowthInterval));
  if (dataParallel && optimizer.empty())
    return error("--data-parallel needs a training step (--optimizer)");
  if (bucketBytes.getNumOccurrences() && !dataParallel)
    return error("--bucket-bytes applies to --data-parallel");
  if (bucketBytes < 1)
    return error("--bucket-bytes must be at least 1, not " +
                 Twine(bucketBytes));
  if (shardOptimizer.getNumOccurrences() && !dataParallel)
    return error("--shard-optimizer applies to --data-parallel");
  if (shardOptimizer.getNumOccurrences() &&
      (shardOptimizer < 1 || shardOptimizer > 65536))
    return error("--shard-optimizer must be a number of ranks in [1, 65536], "
                 "not " +
                 Twine(shardOptimizer));
  if (shardOptimizer.getNumOccurrences() && optimizer == "sgd" && momentum == 0)
    return error("--shard-optimizer: SGD without --momentum keeps no "
                 "optimizer state to shard");
  if (!optimizer.empty() &&
      !llvm::is_contained({"sgd", "adam", "adamw", "adagrad"}, optimizer))
    return error("--optimizer must be sgd, adam, adamw or adagrad, not '" +
                 optimizer + "'");
  if (!loss.empty() &&
      !llvm::is_contained({"cross_entropy", "mse", "bce_with_logits"}, loss))
    return error("--loss must be cross_entropy, mse or bce_with_logits, not '" +
                 loss + "'");
  if (!loss.empty() && lossOutput.getNumOccurrences())
    return error("--loss builds the loss; --loss-output names one the model "
                 "already computes: give one of them");
  if (!llvm::is_contained({"constant", "linear", "cosine"}, schedule))
    return error("--schedule must be constant, linear or cosine, not '" +
                 schedule + "'");
  if (optimizer.empty()) {
    for (cl::Option *option : cl::getRegisteredOptions().values())
      if (option->getNumOccurrences() &&
          llvm::is_contained(option->Categories, &category()) &&
          !llvm::is_contained({"loss-output", "loss", "loss-on", "labels",
                               "loss-class-axis", "ignore-index",
                               "label-smoothing", "freeze", "trainable",
                               "train-config"},
                              option->ArgStr))
        return error("--" + option->ArgStr +
                     " sets up a training step: it needs --optimizer");
    if (!gradients && (!loss.empty() || freeze.getNumOccurrences() ||
                       trainable.getNumOccurrences()))
      return error(
          "--loss, --freeze and --trainable need --optimizer or --gradients");
  }
  return Error::success();
}

Expected<std::vector<std::string>> kilnc::trainableNames() {
  std::vector<std::string> names;
  if (trainable.empty())
    return names;
  std::string text = trainable;
  StringRef source = "--trainable";
  std::unique_ptr<MemoryBuffer> file;
  char separator = ',';
  if (StringRef(text).starts_with("@")) {
    auto buffer = MemoryBuffer::getFile(text.substr(1));
    if (!buffer)
      return createStringError(inconvertibleErrorCode(),
                               "--trainable=" + text + ": " +
                                   buffer.getError().message());
    file = std::move(*buffer);
    text = file->getBuffer().str();
    separator = '\n';
  }
  SmallVector<StringRef> parts;
  StringRef(text).split(parts, separator);
  for (StringRef part : parts) {
    part = part.trim();
    if (part.empty() || part.starts_with("#"))
      continue;
    names.push_back(part.str());
  }
  if (names.empty())
    return createStringError(inconvertibleErrorCode(),
                             source + "=" + trainable + " names no tensor");
  return names;
}

Error kilnc::markTrainable(mlir::ModuleOp module, ArrayRef<std::string> names) {
  if (names.empty())
    return Error::success();
  llvm::StringSet<> listed;
  for (const std::string &name : names) {
    auto param = module.lookupSymbol<kiln::ParamOp>(name);
    if (!param || !isa<mlir::FloatType>(
                      cast<mlir::ShapedType>(param.getType()).getElementType()))
      return createStringError(inconvertibleErrorCode(),
                               "--trainable names '" + name +
                                   "', which is not a float initializer of "
                                   "the model");
    listed.insert(name);
  }
  // The user's list decides, over what the exporter recorded.
  for (auto param : module.getOps<kiln::ParamOp>()) {
    if (listed.contains(param.getSymName()))
      param->removeAttr("kiln.buffer");
    else
      param->setAttr(
          "kiln.buffer",
          mlir::StringAttr::get(module.getContext(), "not in --trainable"));
  }
  return Error::success();
}

kiln::TrainingOptions kilnc::trainingOptions(bool lossScaling, bool gradients) {
  kiln::TrainingOptions options;
  options.loss = loss;
  options.lossOn = lossOn;
  options.labels = labels;
  options.lossOutput = lossOutput;
  options.lossClassAxis = lossClassAxis;
  options.ignoreIndex = ignoreIndex;
  options.labelSmoothing = labelSmoothing;
  options.freeze = freeze;
  options.optimizer = optimizer;
  options.keepGradients = gradients && !optimizer.empty();
  options.lr = learningRate;
  options.momentum = momentum;
  options.nesterov = nesterov;
  options.weightDecay = weightDecay;
  options.beta1 = beta1;
  options.beta2 = beta2;
  options.eps = epsilon;
  options.lrDecay = lrDecay;
  options.initialAccumulator = initialAccumulator;
  options.schedule = schedule;
  options.warmupSteps = warmupSteps;
  options.totalSteps = totalSteps;
  options.gradClip = gradClip;
  options.gradAccum = gradAccum;
  options.dataParallel = dataParallel;
  options.bucketBytes = bucketBytes;
  options.shardOptimizer = shardOptimizer;
  if (lossScaling) {
    options.lossScale = lossScaleInit;
    options.lossScaleGrowthInterval = lossScaleGrowthInterval;
  }
  return options;
}

void kilnc::noteTrainedParameters(mlir::ModuleOp module, StringRef inputFile,
                                  bool trainableGiven) {
  int64_t trainedCount = 0, trainedValues = 0;
  std::vector<std::string> fixed, folded;
  for (auto param : module.getOps<kiln::ParamOp>()) {
    auto type = cast<mlir::ShapedType>(param.getType());
    if (!isa<mlir::FloatType>(type.getElementType()) ||
        param->hasAttr("kiln.optimizer_state"))
      continue;
    if (param->hasAttr("kiln.trained")) {
      if (auto from =
              param->getAttrOfType<mlir::StringAttr>("kiln.folded_from"))
        folded.push_back(param.getSymName().str() + " from " +
                         from.getValue().str());
      ++trainedCount;
      trainedValues += type.getNumElements();
      continue;
    }
    std::string why = "no gradient reaches it";
    if (auto role = param->getAttrOfType<mlir::StringAttr>("kiln.buffer"))
      why = trainableGiven ? role.getValue().str()
                           : "recorded as " + role.getValue().lower();
    fixed.push_back(param.getSymName().str() + " (" + why + ")");
  }
  std::string text;
  raw_string_ostream os(text);
  os << inputFile << ": training " << trainedCount << " tensor"
     << (trainedCount == 1 ? "" : "s") << " (" << trainedValues << " values)";
  if (!fixed.empty()) {
    constexpr size_t kListed = 8;
    os << "; " << fixed.size() << " float initializer"
       << (fixed.size() == 1 ? " stays" : "s stay") << " as given: ";
    for (size_t i = 0; i < fixed.size() && i < kListed; ++i)
      os << (i ? ", " : "") << fixed[i];
    if (fixed.size() > kListed)
      os << " and " << fixed.size() - kListed << " more (kiln-run --info "
         << "lists them)";
  }
  if (!trainableGiven && !module->hasAttr("kiln.initializer_roles"))
    os << "; the model does not record which initializers are buffers "
          "(PyTorch's dynamo exporter records them at opset 18 and up, and "
          "converting to an older opset drops the record), so every float "
          "initializer the loss depends on trains: keep buffers as they are "
          "with --trainable=@FILE of model.named_parameters()'s names, or "
          "--freeze (docs/kilnc.md, \"What trains\")";
  WithColor::note(errs(), "kilnc") << os.str() << "\n";
  if (!folded.empty()) {
    std::string warning;
    raw_string_ostream ws(warning);
    ws << inputFile << ": " << folded.size() << " trained initializer"
       << (folded.size() == 1 ? " was" : "s were")
       << " computed by the exporter's optimizer from other tensors (";
    for (size_t i = 0; i < folded.size() && i < 4; ++i)
      ws << (i ? "; " : "") << folded[i];
    if (folded.size() > 4)
      ws << "; and " << folded.size() - 4 << " more";
    ws << "): Kiln trains the folded copies, which lose the parameters' "
          "names, come apart where a weight is used twice (tied weights), "
          "and train buffers folded so; export for training with "
          "torch.onnx.export(..., optimize=False) (docs/kilnc.md, \"What "
          "trains\")";
    WithColor::warning(errs(), "kilnc") << ws.str() << "\n";
  }
  if (auto norms = module->getAttrOfType<mlir::ArrayAttr>(
          "kiln.training_batch_norms_as_inference")) {
    std::string warning;
    raw_string_ostream ws(warning);
    ws << inputFile << ": " << norms.size() << " BatchNormalization node"
       << (norms.size() == 1 ? " is a" : "s are")
       << " PyTorch training-mode batch norm" << (norms.size() == 1 ? "" : "s")
       << " that the dynamo exporter "
       << "wrote in inference form (";
    for (size_t i = 0; i < norms.size() && i < 3; ++i)
      ws << (i ? ", " : "") << cast<mlir::StringAttr>(norms[i]).getValue();
    if (norms.size() > 3)
      ws << " and " << norms.size() - 3 << " more";
    ws << "): Kiln normalizes with the running statistics, not the batch's, "
          "and never updates them, so training differs from PyTorch's; "
          "export with torch.onnx.export(..., dynamo=False, "
          "training=torch.onnx.TrainingMode.TRAINING) (docs/kilnc.md, "
          "\"What trains\")";
    WithColor::warning(errs(), "kilnc") << ws.str() << "\n";
  }
}
