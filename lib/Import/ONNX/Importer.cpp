//===- Importer.cpp - ONNX ModelProto to the kiln dialect -----------------===//
//
// Parses the protobuf, binds symbolic dimensions, turns initializers into
// kiln.param symbols and graph inputs/outputs into the arguments/results of
// one func.func, then imports the nodes in order through the op importer
// tables. A TrainingInfoProto adds `train_step` (TrainingInfo.cpp). Every
// failure becomes one located message; nothing aborts.
//
//===----------------------------------------------------------------------===//

#include "kiln/Import/ONNX.h"

#include "GraphImporter.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/unknown_field_set.h>

#include <type_traits>
#include <utility>

using namespace mlir;
using namespace kiln;
using namespace kiln::onnx_import;
using llvm::Expected;

namespace {

constexpr int64_t kMinOpset = 7;
/// The newest default-domain opset whose semantics the importer knows.
constexpr int64_t kMaxOpset = 28;

const OpImporterTable &opImporters() {
  static const OpImporterTable table = [] {
    OpImporterTable t;
    registerElementwiseOps(t);
    registerShapeOps(t);
    registerNNOps(t);
    registerReductionOps(t);
    registerQuantizeOps(t);
    registerSignalOps(t);
    registerRecurrentOps(t);
    registerEinsumOp(t);
    registerAttentionOps(t);
    return t;
  }();
  return table;
}

/// The operators of the ai.onnx.preview.training domain.
const OpImporterTable &trainingOpImporters() {
  static const OpImporterTable table = [] {
    OpImporterTable t;
    registerTrainingOps(t);
    return t;
  }();
  return table;
}

bool isDefaultDomain(StringRef domain) {
  return domain.empty() || domain == "ai.onnx";
}

/// Whether a node of an opset older than kMinOpset means what the importer
/// reads it as: its op's definition in opsets 1 to 6 differs from the one
/// the importer implements only by `consumed_inputs` (which the node must not
/// use) and, for the arithmetic ops, by legacy broadcasting, which the node
/// may only use in its numpy-compatible form (`broadcast` without `axis`).
bool isLegacySafe(const onnx::NodeProto &node, int64_t opset) {
  static const llvm::StringSet<> unchanged = {"Abs",
                                              "Add",
                                              "ArgMax",
                                              "ArgMin",
                                              "AveragePool",
                                              "BatchNormalization",
                                              "Constant",
                                              "Pad",
                                              "PRelu",
                                              "Ceil",
                                              "Clip",
                                              "Concat",
                                              "Conv",
                                              "ConvTranspose",
                                              "Div",
                                              "Dropout",
                                              "Elu",
                                              "Exp",
                                              "Flatten",
                                              "Floor",
                                              "Gather",
                                              "Gemm",
                                              "GlobalAveragePool",
                                              "GlobalMaxPool",
                                              "HardSigmoid",
                                              "Identity",
                                              "InstanceNormalization",
                                              "LeakyRelu",
                                              "Log",
                                              "LogSoftmax",
                                              "MatMul",
                                              "Max",
                                              "MaxPool",
                                              "Mean",
                                              "Min",
                                              "Mul",
                                              "Neg",
                                              "Not",
                                              "Reciprocal",
                                              "ReduceL1",
                                              "ReduceL2",
                                              "ReduceLogSum",
                                              "ReduceLogSumExp",
                                              "ReduceMax",
                                              "ReduceMean",
                                              "ReduceMin",
                                              "ReduceProd",
                                              "ReduceSum",
                                              "ReduceSumSquare",
                                              "Relu",
                                              "Reshape",
                                              "Selu",
                                              "Sigmoid",
                                              "Slice",
                                              "Softmax",
                                              "Softplus",
                                              "Softsign",
                                              "Split",
                                              "Sqrt",
                                              "Squeeze",
                                              "Sub",
                                              "Sum",
                                              "Tanh",
                                              "Transpose",
                                              "Unsqueeze"};
  if (!unchanged.contains(node.op_type()))
    return false;
  // Cast took its target type as a string before opset 6; Pad named its
  // attribute `paddings` before opset 2.
  if ((node.op_type() == "Cast" && opset < 6) ||
      (node.op_type() == "Pad" && opset < 2))
    return false;
  bool legacyBroadcast = false, legacyAxis = false;
  for (const onnx::AttributeProto &attribute : node.attribute()) {
    if (attribute.name() == "consumed_inputs")
      return false;
    legacyBroadcast |= attribute.name() == "broadcast" && attribute.i() != 0;
    legacyAxis |= attribute.name() == "axis";
  }
  static const llvm::StringSet<> broadcasting = {"Add", "Sub", "Mul", "Div",
                                                 "Gemm"};
  if (legacyBroadcast && legacyAxis && broadcasting.contains(node.op_type()))
    return false;
  return true;
}

} // namespace

Value GraphImporter::readParam(ParamOp param) {
  OpBuilder::InsertionGuard guard(builder);
  if (lastParamRead)
    builder.setInsertionPointAfter(lastParamRead);
  else
    builder.setInsertionPointToStart(entryBlock);
  auto read = GetParamOp::create(builder, param.getLoc(), param.getType(),
                                 param.getSymName());
  lastParamRead = read;
  return read;
}

Value GraphImporter::lookupValue(StringRef name) {
  auto value = values.find(name);
  if (value != values.end())
    return value->second;
  auto param = params.find(name);
  if (param == params.end())
    return nullptr;
  Value read = readParam(param->second);
  values[name] = read;
  return read;
}

/// Whether `shape` fits the declared ONNX shape (symbolic dims match all).
static bool fitsDeclared(const onnx::TypeProto_Tensor &declared,
                         ArrayRef<int64_t> shape) {
  if (!declared.has_shape())
    return true;
  if (declared.shape().dim_size() != static_cast<int>(shape.size()))
    return false;
  for (auto [i, dim] : llvm::enumerate(declared.shape().dim()))
    if (dim.has_dim_value() && dim.dim_value() != shape[i])
      return false;
  return true;
}

static std::string shapeString(ArrayRef<int64_t> shape) {
  std::string text = "[";
  for (auto [i, d] : llvm::enumerate(shape))
    text += (i ? "," : "") + std::to_string(d);
  return text + "]";
}

llvm::Error GraphImporter::checkBinding(StringRef name,
                                        DenseElementsAttr value) {
  for (const onnx::ValueInfoProto &info : model.graph().input()) {
    if (info.name() != name || !info.type().has_tensor_type())
      continue;
    const onnx::TypeProto_Tensor &tensor = info.type().tensor_type();
    Type declared = elementTypeOf(tensor.elem_type(), &context);
    if ((declared && declared != value.getElementType()) ||
        !fitsDeclared(tensor, value.getType().getShape()))
      return makeError("--bind-input " + name + ": the file's tensor (shape " +
                       shapeString(value.getType().getShape()) +
                       ") does not match the declared type of the input");
  }
  return llvm::Error::success();
}

llvm::Error GraphImporter::checkOutput(const onnx::ValueInfoProto &info,
                                       Value value, StringRef graphKind) {
  if (!info.type().has_tensor_type())
    return llvm::Error::success();
  auto type = cast<RankedTensorType>(value.getType());
  const onnx::TypeProto_Tensor &tensor = info.type().tensor_type();
  Type declared = elementTypeOf(tensor.elem_type(), &context);
  if (tensor.elem_type() != onnx::TensorProto::UNDEFINED &&
      declared != type.getElementType())
    return makeError(graphKind + " output '" + info.name() +
                     "' is declared as " + onnxTypeName(tensor.elem_type()) +
                     " but the " + graphKind +
                     " computes another element type");
  if (!fitsDeclared(tensor, type.getShape()))
    return makeError(graphKind + " output '" + info.name() +
                     "' does not have its declared shape; the " + graphKind +
                     " computes " + shapeString(type.getShape()));
  return llvm::Error::success();
}

/// Folding during import leaves constants nobody reads; drop them.
void GraphImporter::eraseDeadOps() {
  for (Operation &op :
       llvm::make_early_inc_range(llvm::reverse(entryBlock->getOperations())))
    if (isOpTriviallyDead(&op))
      op.erase();
}

llvm::Error GraphImporter::checkModel() {
  if (!model.has_graph())
    return makeError("not an ONNX model: it has no graph");
  if (model.ir_version() <= 0)
    return makeError("not an ONNX model: ir_version is missing");
  for (const onnx::OperatorSetIdProto &set : model.opset_import()) {
    if (set.domain() == kTrainingDomain)
      trainingOpset = set.version();
    if (!isDefaultDomain(set.domain()))
      continue;
    haveDefaultOpset = true;
    opset = set.version();
  }
  // Before IR version 3 there was no opset_import: opset 1 was implied.
  if (!haveDefaultOpset && model.ir_version() < 3) {
    haveDefaultOpset = true;
    opset = 1;
  }
  if (haveDefaultOpset && opset < 1)
    return makeError("default-domain opset " + Twine(opset) + " is invalid");
  if (opset > kMaxOpset)
    return makeError("default-domain opset " + Twine(opset) +
                     " is newer than the newest Kiln knows (" +
                     Twine(kMaxOpset) + ")");
  return llvm::Error::success();
}

Expected<RankedTensorType>
GraphImporter::graphValueType(const onnx::ValueInfoProto &info, bool isInput) {
  const std::string &name = info.name();
  if (!info.type().has_tensor_type())
    return makeError("graph " + Twine(isInput ? "input" : "output") + " '" +
                     name +
                     "' is not a tensor (sequences, maps and optionals "
                     "are not supported)");
  const onnx::TypeProto_Tensor &tensor = info.type().tensor_type();
  Type element = elementTypeOf(tensor.elem_type(), &context);
  if (!element)
    return makeError("graph input '" + name + "' has element type " +
                     onnxTypeName(tensor.elem_type()) +
                     ", which Kiln does not support");
  if (!tensor.has_shape())
    return makeError("graph input '" + name +
                     "' has no shape; Kiln needs ranked inputs");
  SmallVector<int64_t> shape;
  for (auto [index, dim] : llvm::enumerate(tensor.shape().dim())) {
    if (dim.has_dim_value() && dim.dim_value() > 0) {
      shape.push_back(dim.dim_value());
      continue;
    }
    if (dim.has_dim_value() && dim.dim_value() == 0) {
      shape.push_back(0);
      continue;
    }
    if (dim.has_dim_value())
      return makeError("graph input '" + name + "' dimension " + Twine(index) +
                       " has the invalid size " + Twine(dim.dim_value()));
    if (dim.has_dim_param()) {
      auto bound = options.dims.find(dim.dim_param());
      if (bound != options.dims.end()) {
        shape.push_back(bound->second);
        continue;
      }
    }
    if (index == 0 && options.batchSize) {
      shape.push_back(*options.batchSize);
      continue;
    }
    std::string symbol =
        dim.has_dim_param() ? "'" + dim.dim_param() + "'" : "unnamed";
    std::string hint = dim.has_dim_param() ? "--dim " + dim.dim_param() + "=N"
                                           : std::string("--batch-size=N");
    return makeError(
        "graph input '" + name + "' dimension " + Twine(index) +
        " is symbolic (" + symbol + ") and unbound; bind it with " + hint +
        (index == 0 && dim.has_dim_param() ? " or --batch-size=N" : ""));
  }
  return RankedTensorType::get(shape, element);
}

namespace {

/// The key under which PyTorch's dynamo exporter records, for each
/// initializer, its role in the exported program: PARAMETER, BUFFER or
/// CONSTANT_TENSOR.
constexpr const char *kTorchInputKind =
    "pkg.torch.export.graph_signature.InputSpec.kind";
/// What onnxscript's optimizer (torch.onnx.export's optimize=True) records
/// of an initializer it computed: the tensors it folded, as a Python list.
constexpr const char *kOnnxscriptFoldedFrom =
    "pkg.onnxscript.optimizer.folded_from";

/// Whether the ONNX library's ValueInfoProto knows `metadata_props`.
template <typename Info, typename = void>
struct KnowsMetadata : std::false_type {};
template <typename Info>
struct KnowsMetadata<
    Info, std::void_t<decltype(std::declval<const Info &>().metadata_props())>>
    : std::true_type {};

/// Adds the metadata_props of `info` to `props` where the library knows the
/// field (a template, so that the call compiles where it does not).
template <typename Info>
void readKnownMetadata(const Info &info, llvm::StringMap<std::string> &props) {
  if constexpr (KnowsMetadata<Info>::value) {
    for (const auto &entry : info.metadata_props())
      props[entry.key()] = entry.value();
  }
}

/// The `metadata_props` of a ValueInfoProto (field 4, ONNX 1.16 and IR
/// version 10). The ONNX library Kiln builds against may predate the field,
/// so it is read from the message's unknown fields when the library does
/// not know it: the wire format is the same.
llvm::StringMap<std::string> valueMetadata(const onnx::ValueInfoProto &info) {
  llvm::StringMap<std::string> props;
  readKnownMetadata(info, props);
  const google::protobuf::UnknownFieldSet &unknown = info.unknown_fields();
  for (int i = 0; i < unknown.field_count(); ++i) {
    const google::protobuf::UnknownField &field = unknown.field(i);
    if (field.number() != 4 ||
        field.type() != google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED)
      continue;
    onnx::StringStringEntryProto entry;
    if (entry.ParseFromString(field.length_delimited()))
      props[entry.key()] = entry.value();
  }
  return props;
}

} // namespace

void GraphImporter::readInitializerRoles(const onnx::GraphProto &graph) {
  auto read = [&](const onnx::ValueInfoProto &info) {
    llvm::StringMap<std::string> props = valueMetadata(info);
    auto kind = props.find(kTorchInputKind);
    if (kind != props.end())
      initializerRoles[info.name()] = kind->getValue();
    auto folded = props.find(kOnnxscriptFoldedFrom);
    if (folded != props.end())
      foldedFrom[info.name()] = folded->getValue();
  };
  for (const onnx::ValueInfoProto &info : graph.value_info())
    read(info);
  // keep_initializers_as_inputs=True lists them, tags and all, as inputs.
  for (const onnx::ValueInfoProto &info : graph.input())
    read(info);
  // kilnc tells a model that records the roles from one that does not,
  // whose every float initializer on a path to the loss trains.
  if (!initializerRoles.empty())
    module->setAttr("kiln.initializer_roles", UnitAttr::get(&context));
}

llvm::Error GraphImporter::importInitializers(GraphScope &scope,
                                              bool asConstants) {
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToEnd(module.getBody());
  Location loc = FileLineColLoc::get(&context, displayName, 0, 0);
  llvm::StringSet<> seen;
  for (const onnx::TensorProto &tensor : scope.graph->initializer()) {
    bool inMain = !asConstants && &scope != &mainScope &&
                  (mainScope.params.count(tensor.name()) ||
                   llvm::any_of(mainScope.constants, [&](const auto &entry) {
                     return entry.first == tensor.name();
                   }));
    if (!seen.insert(tensor.name()).second || inMain)
      return makeError("initializer '" + tensor.name() + "' is defined twice");
    std::string error;
    FailureOr<DenseElementsAttr> value =
        convertTensor(tensor, &context, baseDir, error);
    if (failed(value))
      return makeError("initializer '" + tensor.name() + "': " + error);
    // Integer and boolean initializers are shapes, indices and masks: they
    // are constants, unless training updates them (a step count). Float
    // initializers are the model's parameters.
    if (asConstants || (!isa<FloatType>(value->getElementType()) &&
                        !mutableNames.contains(tensor.name()))) {
      scope.constants.emplace_back(tensor.name(), *value);
      continue;
    }
    auto param = ParamOp::create(
        builder, loc, builder.getStringAttr(tensor.name()),
        TypeAttr::get(value->getType()), mlir::cast<ElementsAttr>(*value));
    // A tensor the exporter records as anything but a module parameter (a
    // buffer: a mask, RoPE tables, running statistics; or a constant) is
    // one that PyTorch never trains.
    auto role = initializerRoles.find(tensor.name());
    if (role != initializerRoles.end() && role->getValue() != "PARAMETER")
      param->setAttr("kiln.buffer", builder.getStringAttr(role->getValue()));
    // A tensor the exporter's optimizer computed from others (optimize=True
    // folds a weight's transpose, or a slice of a buffer, into a new
    // initializer): kilnc warns when one trains.
    auto folded = foldedFrom.find(tensor.name());
    if (folded != foldedFrom.end())
      param->setAttr("kiln.folded_from",
                     builder.getStringAttr(folded->getValue()));
    scope.params[tensor.name()] = param;
  }
  return llvm::Error::success();
}

llvm::Error GraphImporter::readBindings() {
  for (const auto &binding : options.boundInputs) {
    StringRef name = binding.getKey();
    bool isInput = llvm::any_of(model.graph().input(), [&](const auto &info) {
      return info.name() == name;
    });
    bool isInitializer =
        mainScope.params.count(name) ||
        llvm::any_of(mainScope.constants,
                     [&](const auto &entry) { return entry.first == name; });
    if (!isInput || isInitializer)
      return makeError("--bind-input names '" + name +
                       "', which is not a graph input");
    std::string error;
    StringRef file = binding.getValue();
    FailureOr<DenseElementsAttr> value = failure();
    if (file.ends_with(".npy")) {
      value = readNpyFile(file, &context, error);
    } else {
      auto buffer = llvm::MemoryBuffer::getFile(file, /*IsText=*/false);
      onnx::TensorProto tensor;
      if (!buffer) {
        error =
            "cannot read '" + file.str() + "': " + buffer.getError().message();
      } else if (!tensor.ParseFromArray((*buffer)->getBufferStart(),
                                        (*buffer)->getBufferSize()) ||
                 tensor.data_type() == onnx::TensorProto::UNDEFINED ||
                 !onnx::TensorProto::DataType_IsValid(tensor.data_type())) {
        error = "'" + file.str() + "' is not an ONNX TensorProto";
      } else {
        value = convertTensor(tensor, &context, "", error);
      }
    }
    if (failed(value))
      return makeError("--bind-input " + name + ": " + error);
    if (llvm::Error mismatch = checkBinding(name, *value))
      return mismatch;
    boundValues[name] = *value;
  }
  return llvm::Error::success();
}

std::string GraphImporter::nodeLabel(const onnx::NodeProto &node,
                                     unsigned index) const {
  if (!node.name().empty())
    return node.name();
  if (node.output_size() > 0 && !node.output(0).empty())
    return node.output(0);
  return "#" + std::to_string(index);
}

Location GraphImporter::nodeLocation(const onnx::NodeProto &node,
                                     unsigned index) {
  return NameLoc::get(StringAttr::get(&context, nodeLabel(node, index)),
                      FileLineColLoc::get(&context, displayName, index, 0));
}

llvm::Error
GraphImporter::nodeInputs(const onnx::NodeProto &node, int first,
                          SmallVectorImpl<Value> &inputs,
                          function_ref<llvm::Error(const Twine &)> nodeError) {
  for (int i = first; i < node.input_size(); ++i) {
    const std::string &name = node.input(i);
    if (name.empty()) {
      inputs.push_back(nullptr);
      continue;
    }
    Value value = lookupValue(name);
    if (!value && sequences.count(name))
      return nodeError("input '" + name +
                       "' is a sequence; Kiln takes "
                       "sequences only in SequenceAt, SequenceLength and "
                       "ConcatFromSequence");
    if (!value)
      return nodeError("input '" + name + "' is not defined before use");
    inputs.push_back(value);
  }
  return llvm::Error::success();
}

llvm::Error GraphImporter::runNodeImporter(
    const onnx::NodeProto &node, unsigned index, int64_t nodeOpset,
    SmallVectorImpl<Value> &inputs, SmallVectorImpl<Value> &outputs,
    function_ref<LogicalResult(NodeContext &)> body,
    function_ref<llvm::Error(const Twine &)> nodeError) {
  std::string error;
  NodeContext ctx(node, nodeOpset, builder, nodeLocation(node, index), inputs,
                  outputs, error, baseDir, module);
  auto lookup = [this](StringRef name) { return lookupValue(name); };
  ctx.lookupValue = lookup;
  LogicalResult result = failure();
  {
    // Diagnostics of op inference and verification become the node's error.
    ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
      if (diag.getSeverity() == DiagnosticSeverity::Error && error.empty())
        error = diag.str();
      return success();
    });
    result = body(ctx);
  }
  if (failed(result))
    return nodeError(error.empty() ? "cannot be imported" : error);
  return llvm::Error::success();
}

llvm::Error GraphImporter::importNode(const onnx::NodeProto &node,
                                      unsigned index) {
  auto nodeError = [&](const Twine &reason) {
    std::string version = isDefaultDomain(node.domain())
                              ? "opset " + std::to_string(opset)
                              : "domain '" + node.domain() + "'";
    return makeError("node '" + nodeLabel(node, index) + "' (" +
                     node.op_type() + ", " + version + "): " + reason);
  };
  const OpImporterTable *table = &opImporters();
  int64_t nodeOpset = opset;
  if (node.domain() == kTrainingDomain) {
    if (trainingOpset == 0)
      return nodeError("the model does not import the domain '" +
                       kTrainingDomain + "' in its opset_import");
    if (trainingOpset != 1)
      return nodeError("version " + Twine(trainingOpset) + " of domain '" +
                       kTrainingDomain + "' is not supported (Kiln knows 1)");
    table = &trainingOpImporters();
    nodeOpset = trainingOpset;
  } else if (!isDefaultDomain(node.domain())) {
    return nodeError("operators of domain '" + node.domain() +
                     "' are not supported");
  } else if (!haveDefaultOpset) {
    return nodeError("the model imports no default-domain opset");
  } else if (opset < kMinOpset && !isLegacySafe(node, opset)) {
    return nodeError("this operator is supported from opset " +
                     Twine(kMinOpset) + "; opset " + Twine(opset) +
                     " semantics differ");
  }
  static const llvm::StringSet<> sequenceOps = {
      "SplitToSequence", "SequenceConstruct", "SequenceAt", "SequenceLength",
      "ConcatFromSequence"};
  if (table == &opImporters() && sequenceOps.contains(node.op_type()))
    return importSequenceNode(node, index, nodeError);
  auto found = table->find(node.op_type());
  if (found == table->end()) {
    for (const onnx::FunctionProto &function : model.functions())
      if (function.name() == node.op_type())
        return nodeError("model-local functions are not supported yet");
    return nodeError("operator '" + node.op_type() + "' is not supported");
  }

  SmallVector<Value> inputs;
  if (llvm::Error error = nodeInputs(node, 0, inputs, nodeError))
    return error;
  SmallVector<Value> outputs(node.output_size(), nullptr);
  if (llvm::Error error = runNodeImporter(node, index, nodeOpset, inputs,
                                          outputs, found->second, nodeError))
    return error;
  for (auto [i, name] : llvm::enumerate(node.output())) {
    if (name.empty())
      continue;
    if (values.count(name) || params.count(name) || sequences.count(name))
      return nodeError("output '" + name +
                       "' is already defined (ONNX graphs are in SSA form)");
    if (!outputs[i])
      return nodeError("output " + Twine(i) + " ('" + name +
                       "') is not supported");
    values[name] = outputs[i];
  }
  return llvm::Error::success();
}

llvm::Error GraphImporter::importSequenceNode(
    const onnx::NodeProto &node, unsigned index,
    function_ref<llvm::Error(const Twine &)> nodeError) {
  StringRef op = node.op_type();
  if (node.output_size() != 1 || node.output(0).empty())
    return nodeError("expected one output");
  const std::string &outputName = node.output(0);
  if (values.count(outputName) || params.count(outputName) ||
      sequences.count(outputName))
    return nodeError("output '" + outputName +
                     "' is already defined (ONNX graphs are in SSA form)");
  // SplitToSequence and SequenceConstruct take tensors; SequenceAt,
  // SequenceLength and ConcatFromSequence a sequence first (SequenceAt a
  // position after it).
  bool makesSequence = op == "SplitToSequence" || op == "SequenceConstruct";
  ArrayRef<Value> sequence;
  if (!makesSequence) {
    if (node.input_size() < 1 || !sequences.count(node.input(0)))
      return nodeError("input 0 must be a sequence made by SplitToSequence "
                       "or SequenceConstruct");
    sequence = sequences[node.input(0)];
  }
  SmallVector<Value> inputs;
  int first = makesSequence ? 0 : op == "SequenceAt" ? 1 : node.input_size();
  if (llvm::Error error = nodeInputs(node, first, inputs, nodeError))
    return error;
  SmallVector<Value> outputs(1, nullptr);
  auto body = [&](NodeContext &ctx) -> LogicalResult {
    if (op == "SplitToSequence") {
      FailureOr<SmallVector<Value>> pieces = splitToSequence(ctx);
      if (mlir::failed(pieces))
        return mlir::failure();
      sequences[outputName] = std::move(*pieces);
      return mlir::success();
    }
    if (op == "SequenceConstruct") {
      if (inputs.empty() || llvm::is_contained(inputs, Value()))
        return ctx.fail("SequenceConstruct needs one or more tensors");
      sequences[outputName].assign(inputs.begin(), inputs.end());
      return mlir::success();
    }
    int64_t length = sequence.size();
    if (op == "SequenceLength") {
      values[outputName] = ctx.constant(DenseElementsAttr::get(
          RankedTensorType::get({}, builder.getI64Type()), length));
      return mlir::success();
    }
    if (op == "SequenceAt") {
      if (inputs.size() != 1 || !inputs[0])
        return ctx.fail("SequenceAt needs a position");
      FailureOr<SmallVector<int64_t>> position = ctx.constInts(0, "position");
      if (mlir::failed(position))
        return mlir::failure();
      if (position->size() != 1)
        return ctx.fail("position must be a scalar");
      int64_t at = position->front() < 0 ? position->front() + length
                                         : position->front();
      if (at < 0 || at >= length)
        return ctx.fail("position " + Twine(position->front()) +
                        " is out of range for a sequence of " + Twine(length));
      values[outputName] = sequence[at];
      return mlir::success();
    }
    // ConcatFromSequence: a Concat, or with new_axis a stack.
    auto firstType = cast<RankedTensorType>(sequence.front().getType());
    bool newAxis = ctx.getInt("new_axis", 0) != 0;
    int64_t rank = firstType.getRank() + (newAxis ? 1 : 0);
    FailureOr<int64_t> axis = ctx.normalizeAxis(ctx.getInt("axis", 0), rank);
    if (mlir::failed(axis))
      return mlir::failure();
    SmallVector<Value> parts;
    for (Value part : sequence) {
      if (newAxis) {
        SmallVector<int64_t> shape(
            cast<RankedTensorType>(part.getType()).getShape());
        shape.insert(shape.begin() + *axis, 1);
        FailureOr<Value> stacked = ctx.reshape(part, shape);
        if (mlir::failed(stacked))
          return mlir::failure();
        part = *stacked;
      }
      parts.push_back(part);
    }
    FailureOr<Value> joined =
        ctx.create<ConcatOp>(parts, {ctx.i64("axis", *axis)});
    if (mlir::failed(joined))
      return mlir::failure();
    values[outputName] = *joined;
    return mlir::success();
  };
  return runNodeImporter(node, index, opset, inputs, outputs, body, nodeError);
}

Expected<func::FuncOp>
GraphImporter::importFunction(StringRef name, ArrayRef<GraphScope *> scopes,
                              ArrayRef<const onnx::ValueInfoProto *> outputs,
                              StringRef graphKind) {
  Location loc = FileLineColLoc::get(&context, displayName, 0, 0);
  // The entry block is made first so that constants have a home; the
  // function around it is built once the signature is known.
  auto scratch = std::make_unique<Block>();
  entryBlock = scratch.get();
  lastParamRead = nullptr;
  values.clear();
  params.clear();
  builder.setInsertionPointToEnd(entryBlock);
  for (GraphScope *scope : scopes) {
    for (const auto &param : scope->params)
      params[param.getKey()] = param.getValue();
    for (const auto &[constantName, value] : scope->constants)
      values[constantName] = ConstantOp::create(builder, loc, value);
  }

  // With several graphs, the inputs of the first (the inference graph) are
  // arguments only where the others use them.
  SmallVector<std::string> argNames;
  SmallVector<bool> droppable;
  SmallVector<std::string> bound;
  for (auto [i, scope] : llvm::enumerate(scopes)) {
    for (const onnx::ValueInfoProto &info : scope->graph->input()) {
      // Before IR version 4, initializers are also listed as inputs.
      if (params.count(info.name()) || values.count(info.name()) ||
          llvm::is_contained(bound, info.name()))
        continue;
      if (boundValues.count(info.name())) {
        bound.push_back(info.name());
        continue;
      }
      Expected<RankedTensorType> type = graphValueType(info, /*isInput=*/true);
      if (!type)
        return type.takeError();
      values[info.name()] = entryBlock->addArgument(*type, loc);
      argNames.push_back(info.name());
      droppable.push_back(scopes.size() > 1 && i == 0);
    }
  }
  for (const auto &binding : boundValues)
    if (llvm::is_contained(bound, binding.getKey()))
      values[binding.getKey()] =
          ConstantOp::create(builder, loc, binding.getValue());

  for (GraphScope *scope : scopes)
    for (auto [index, node] : llvm::enumerate(scope->graph->node()))
      if (llvm::Error error = importNode(node, index))
        return std::move(error);

  SmallVector<Value> results;
  SmallVector<std::string> resultNames;
  for (const onnx::ValueInfoProto *output : outputs) {
    Value result = lookupValue(output->name());
    if (!result)
      return makeError(graphKind + " output '" + output->name() +
                       "' is not produced by any node");
    if (llvm::Error error = checkOutput(*output, result, graphKind))
      return std::move(error);
    results.push_back(result);
    resultNames.push_back(output->name());
  }
  if (results.empty())
    return makeError("the " + graphKind + " has no outputs");
  func::ReturnOp::create(builder, loc, results);
  eraseDeadOps();
  for (unsigned i = argNames.size(); i-- > 0;) {
    if (!droppable[i] || !entryBlock->getArgument(i).use_empty())
      continue;
    entryBlock->eraseArgument(i);
    argNames.erase(argNames.begin() + i);
  }

  builder.setInsertionPointToEnd(module.getBody());
  auto function = func::FuncOp::create(
      builder, loc, name,
      builder.getFunctionType(entryBlock->getArgumentTypes(),
                              TypeRange(ValueRange(results))));
  function.getBody().push_back(scratch.release());
  for (auto [i, argName] : llvm::enumerate(argNames))
    function.setArgAttr(i, "kiln.name", builder.getStringAttr(argName));
  for (auto [i, resultName] : llvm::enumerate(resultNames))
    function.setResultAttr(i, "kiln.name", builder.getStringAttr(resultName));
  return function;
}

Expected<OwningOpRef<ModuleOp>> GraphImporter::run() {
  if (llvm::Error error = checkModel())
    return std::move(error);
  context.loadDialect<KilnDialect, func::FuncDialect>();
  Location moduleLoc = FileLineColLoc::get(&context, displayName, 0, 0);
  OwningOpRef<ModuleOp> owned = ModuleOp::create(moduleLoc);
  module = *owned;

  mainScope.graph = &model.graph();
  if (llvm::Error error = checkTrainingInfo())
    return std::move(error);
  readInitializerRoles(model.graph());
  if (llvm::Error error = importInitializers(mainScope, /*asConstants=*/false))
    return std::move(error);
  if (algorithmScope.graph)
    if (llvm::Error error =
            importInitializers(algorithmScope, /*asConstants=*/false))
      return std::move(error);
  if (llvm::Error error = readBindings())
    return std::move(error);
  if (llvm::Error error = importInitialization())
    return std::move(error);

  SmallVector<const onnx::ValueInfoProto *> outputs;
  for (const onnx::ValueInfoProto &output : model.graph().output())
    outputs.push_back(&output);
  Expected<func::FuncOp> forward =
      importFunction(options.entryName, {&mainScope}, outputs, "graph");
  if (!forward)
    return forward.takeError();
  if (llvm::Error error = importTrainStep())
    return std::move(error);

  std::string diagnostics;
  {
    ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
      if (diagnostics.empty())
        diagnostics = diag.str();
      return success();
    });
    if (failed(verify(module)))
      return makeError("internal error: the imported IR does not verify: " +
                       diagnostics);
  }
  return std::move(owned);
}

Expected<OwningOpRef<ModuleOp>>
kiln::importONNXBuffer(MLIRContext &context, StringRef bytes,
                       StringRef displayName, StringRef baseDir,
                       const ImportOptions &options) {
  onnx::ModelProto model;
  google::protobuf::io::CodedInputStream stream(
      reinterpret_cast<const uint8_t *>(bytes.data()),
      static_cast<int>(std::min<size_t>(bytes.size(), INT32_MAX)));
  stream.SetRecursionLimit(100);
  if (bytes.size() > INT32_MAX)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        displayName + ": the file is larger than 2 GiB; store the weights as "
                      "ONNX external data");
  if (!model.ParseFromCodedStream(&stream) || !stream.ConsumedEntireMessage())
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        displayName + ": not an ONNX model, or a truncated or corrupt one "
                      "(protobuf parsing failed)");
  GraphImporter importer(context, model, displayName, baseDir, options);
  return importer.run();
}

Expected<OwningOpRef<ModuleOp>>
kiln::importONNXFile(MLIRContext &context, StringRef path,
                     const ImportOptions &options) {
  auto buffer =
      llvm::MemoryBuffer::getFileOrSTDIN(path, /*IsText=*/false,
                                         /*RequiresNullTerminator=*/false);
  if (!buffer)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        path + ": cannot read: " + buffer.getError().message());
  SmallString<256> baseDir(path);
  llvm::sys::path::remove_filename(baseDir);
  if (baseDir.empty())
    baseDir = ".";
  return importONNXBuffer(context, (*buffer)->getBuffer(), path, baseDir,
                          options);
}

Expected<std::pair<std::string, int64_t>>
kiln::parseDimBinding(StringRef text) {
  auto [name, number] = text.split('=');
  int64_t value;
  if (name.empty() || number.empty() || number.getAsInteger(10, value) ||
      value <= 0)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "expected NAME=N with N a positive "
                                   "integer, got '" +
                                       text + "'");
  return std::make_pair(name.str(), value);
}
