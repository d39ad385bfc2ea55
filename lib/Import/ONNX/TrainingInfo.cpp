//===- TrainingInfo.cpp - ONNX TrainingInfoProto to `train_step` ----------===//
//
// A TrainingInfoProto's algorithm graph, run after the inference graph it may
// read from, becomes the function `train_step`; each update_binding marks the
// result it names as the new value of an initializer (`kiln.update`), which
// the compiled bundle writes in place, as kiln-train-step's results are. The
// initialization graph, when it computes constants, sets initial values.
//
//===----------------------------------------------------------------------===//

#include "GraphImporter.h"

#include "mlir/IR/Matchers.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::onnx_import;

static std::string typeString(Type type) {
  std::string text;
  llvm::raw_string_ostream os(text);
  type.print(os);
  return text;
}

llvm::Error GraphImporter::checkTrainingInfo() {
  if (model.training_info_size() == 0)
    return llvm::Error::success();
  if (model.training_info_size() > 1)
    return makeError("the model has " + Twine(model.training_info_size()) +
                     " training_info entries (TrainingInfoProto); importing "
                     "more than one training step is not supported yet");
  const onnx::TrainingInfoProto &info = model.training_info(0);
  const onnx::GraphProto &algorithm = info.algorithm();
  if (algorithm.node_size() == 0 && algorithm.output_size() == 0)
    return makeError("training_info has an empty algorithm graph: there is "
                     "no training step to import");
  algorithmScope.graph = &algorithm;
  llvm::StringSet<> initializers;
  for (const onnx::TensorProto &tensor : model.graph().initializer())
    initializers.insert(tensor.name());
  for (const onnx::TensorProto &tensor : algorithm.initializer())
    initializers.insert(tensor.name());
  for (const onnx::StringStringEntryProto &binding : info.update_binding()) {
    if (!initializers.contains(binding.key()))
      return makeError("training_info update_binding assigns '" +
                       binding.key() +
                       "', which is not an initializer of the graph or of "
                       "the training algorithm");
    if (!mutableNames.insert(binding.key()).second)
      return makeError("training_info update_binding assigns '" +
                       binding.key() + "' twice");
  }
  return llvm::Error::success();
}

llvm::Error GraphImporter::importInitialization() {
  if (!algorithmScope.graph)
    return llvm::Error::success();
  const onnx::TrainingInfoProto &info = model.training_info(0);
  const onnx::GraphProto &graph = info.initialization();
  if (info.initialization_binding_size() == 0)
    return llvm::Error::success();
  if (graph.input_size() > 0)
    return makeError("training_info initialization graph has inputs; it must "
                     "compute initial values from nothing");
  GraphScope scope;
  scope.graph = &graph;
  if (llvm::Error error = importInitializers(scope, /*asConstants=*/true))
    return error;
  SmallVector<const onnx::ValueInfoProto *> outputs;
  for (const onnx::StringStringEntryProto &binding :
       info.initialization_binding()) {
    auto output =
        llvm::find_if(graph.output(), [&](const onnx::ValueInfoProto &o) {
          return o.name() == binding.value();
        });
    if (output == graph.output().end())
      return makeError("training_info initialization_binding: '" +
                       binding.value() + "' (assigned to '" + binding.key() +
                       "') is not an output of the initialization graph");
    outputs.push_back(&*output);
  }
  llvm::Expected<func::FuncOp> function =
      importFunction("kiln.initialization", {&scope}, outputs,
                     "training_info initialization graph");
  if (!function)
    return function.takeError();
  auto ret = cast<func::ReturnOp>(function->getBody().front().getTerminator());
  auto apply = [&]() -> llvm::Error {
    for (auto [binding, value] :
         llvm::zip(info.initialization_binding(), ret.getOperands()))
      if (llvm::Error error =
              setInitialValue(binding.key(), binding.value(), value))
        return error;
    return llvm::Error::success();
  };
  llvm::Error result = apply();
  function->erase();
  return result;
}

llvm::Error GraphImporter::setInitialValue(StringRef key, StringRef source,
                                           Value value) {
  DenseElementsAttr initial;
  if (!matchPattern(value, m_Constant(&initial)))
    return makeError("training_info initialization: '" + source +
                     "' (assigned to '" + key +
                     "') is not a constant; only initialization graphs that "
                     "compute constants are supported yet");
  auto mismatch = [&](Type expected) {
    return makeError("training_info initialization: '" + source +
                     "' has the type " + typeString(initial.getType()) +
                     ", but the initializer '" + key + "' has " +
                     typeString(expected));
  };
  ParamOp param = mainScope.params.lookup(key);
  if (!param)
    param = algorithmScope.params.lookup(key);
  if (param) {
    if (param.getType() != initial.getType())
      return mismatch(param.getType());
    param.setInitialValueAttr(cast<ElementsAttr>(initial));
    return llvm::Error::success();
  }
  for (GraphScope *owner : {&mainScope, &algorithmScope}) {
    for (auto &[name, constant] : owner->constants) {
      if (name != key)
        continue;
      if (constant.getType() != initial.getType())
        return mismatch(constant.getType());
      constant = initial;
      return llvm::Error::success();
    }
  }
  return makeError("training_info initialization_binding assigns '" + key +
                   "', which is not an initializer of the graph or of the "
                   "training algorithm");
}

llvm::Error GraphImporter::importTrainStep() {
  if (!algorithmScope.graph)
    return llvm::Error::success();
  constexpr StringLiteral name = "train_step";
  if (module.lookupSymbol(name))
    return makeError("the entry function is named '" + name +
                     "', which the training step of training_info needs");
  const onnx::TrainingInfoProto &info = model.training_info(0);
  const onnx::GraphProto &algorithm = info.algorithm();

  // The results: the algorithm's outputs, then the graph outputs that
  // update_binding assigns and the algorithm does not return. A value bound
  // to several initializers is returned once for each.
  SmallVector<const onnx::ValueInfoProto *> outputs;
  for (const onnx::ValueInfoProto &output : algorithm.output())
    outputs.push_back(&output);
  SmallVector<bool> updates(outputs.size(), false);
  SmallVector<unsigned> bindingResults;
  for (const onnx::StringStringEntryProto &binding : info.update_binding()) {
    auto named = [&](const onnx::ValueInfoProto *output) {
      return output->name() == binding.value();
    };
    const auto *result = llvm::find_if(outputs, named);
    if (result == outputs.end() || updates[result - outputs.begin()]) {
      const onnx::ValueInfoProto *source =
          result != outputs.end() ? *result : nullptr;
      for (const onnx::ValueInfoProto &output : model.graph().output())
        if (!source && output.name() == binding.value())
          source = &output;
      if (!source)
        return makeError("training_info update_binding: '" + binding.value() +
                         "' (assigned to '" + binding.key() +
                         "') is not an output of the training algorithm or "
                         "of the graph");
      outputs.push_back(source);
      updates.push_back(false);
      result = outputs.end() - 1;
    }
    updates[result - outputs.begin()] = true;
    bindingResults.push_back(result - outputs.begin());
  }

  llvm::Expected<func::FuncOp> step = importFunction(
      name, {&mainScope, &algorithmScope}, outputs, "training algorithm");
  if (!step)
    return step.takeError();
  for (auto [binding, index] :
       llvm::zip(info.update_binding(), bindingResults)) {
    const std::string &key = binding.key();
    ParamOp param = mainScope.params.lookup(key);
    if (!param)
      param = algorithmScope.params.lookup(key);
    assert(param && "update_binding keys are parameters");
    Type type = step->getResultTypes()[index];
    if (type != param.getType())
      return makeError("training_info update_binding: '" + binding.value() +
                       "' has the type " + typeString(type) +
                       ", but the initializer '" + key + "' it updates has " +
                       typeString(param.getType()));
    step->setResultAttrs(
        index,
        builder.getDictionaryAttr(
            {builder.getNamedAttr("kiln.name",
                                  builder.getStringAttr(key + ".next")),
             builder.getNamedAttr("kiln.update", builder.getStringAttr(key))}));
  }
  // The algorithm's own initializers are optimizer state (momenta, the
  // update count), not model parameters.
  for (const auto &entry : algorithmScope.params)
    entry.getValue()->setAttr("kiln.optimizer_state", builder.getUnitAttr());
  return llvm::Error::success();
}
