//===- Importer.cpp - ONNX ModelProto to the kiln dialect -----------------===//
//
// Parses the protobuf, binds symbolic dimensions, turns initializers into
// kiln.param symbols and graph inputs/outputs into the arguments/results of
// one func.func, then imports the nodes in order through the op importer
// table. Every failure becomes one located message; nothing aborts.
//
//===----------------------------------------------------------------------===//

#include "kiln/Import/ONNX.h"

#include "NodeContext.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <google/protobuf/io/coded_stream.h>

using namespace mlir;
using namespace kiln;
using namespace kiln::onnx_import;
using llvm::Expected;

namespace {

constexpr int64_t kMinOpset = 7;
/// The newest default-domain opset whose semantics the importer knows.
constexpr int64_t kMaxOpset = 17;

const OpImporterTable &opImporters() {
  static const OpImporterTable table = [] {
    OpImporterTable t;
    registerElementwiseOps(t);
    registerShapeOps(t);
    registerNNOps(t);
    registerReductionOps(t);
    registerEinsumOp(t);
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
  static const llvm::StringSet<> unchanged = {
      "Abs", "Add", "ArgMax", "ArgMin", "AveragePool", "BatchNormalization",
      "Constant", "Pad", "PRelu",
      "Ceil", "Clip", "Concat", "Conv", "ConvTranspose", "Div", "Dropout",
      "Elu", "Exp", "Flatten", "Floor", "Gather", "Gemm", "GlobalAveragePool",
      "GlobalMaxPool", "HardSigmoid", "Identity", "InstanceNormalization",
      "LeakyRelu", "Log", "LogSoftmax", "MatMul", "Max", "MaxPool", "Mean",
      "Min", "Mul", "Neg", "Not", "Reciprocal", "ReduceL1", "ReduceL2",
      "ReduceLogSum", "ReduceLogSumExp", "ReduceMax", "ReduceMean",
      "ReduceMin", "ReduceProd", "ReduceSum", "ReduceSumSquare", "Relu",
      "Reshape", "Selu", "Sigmoid", "Slice", "Softmax", "Softplus",
      "Softsign", "Split", "Sqrt", "Squeeze", "Sub", "Sum", "Tanh",
      "Transpose", "Unsqueeze"};
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

class GraphImporter {
public:
  GraphImporter(MLIRContext &context, const onnx::ModelProto &model,
                StringRef displayName, StringRef baseDir,
                const ImportOptions &options)
      : context(context), model(model), displayName(displayName),
        baseDir(baseDir), options(options), builder(&context) {}

  Expected<OwningOpRef<ModuleOp>> run();

private:
  llvm::Error makeError(const Twine &message) const {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   displayName + ": " + message);
  }
  llvm::Error checkModel();
  Expected<RankedTensorType> graphValueType(const onnx::ValueInfoProto &info,
                                            bool isInput);
  llvm::Error importInitializers();
  llvm::Error importInputs(SmallVectorImpl<Type> &argTypes,
                           SmallVectorImpl<std::string> &argNames);
  llvm::Error importNode(const onnx::NodeProto &node, unsigned index);
  Location nodeLocation(const onnx::NodeProto &node, unsigned index);
  /// Reads a parameter at the top of the entry block, in first-use order.
  Value readParam(ParamOp param);
  /// Checks a --bind-input value against the input's declared type.
  llvm::Error checkBinding(StringRef name, DenseElementsAttr value);
  /// Checks computed graph outputs against their declared types.
  llvm::Error checkOutput(const onnx::ValueInfoProto &info, Value value);
  void eraseDeadOps();
  std::string nodeLabel(const onnx::NodeProto &node, unsigned index) const;

  MLIRContext &context;
  const onnx::ModelProto &model;
  std::string displayName;
  std::string baseDir;
  const ImportOptions &options;
  OpBuilder builder;
  int64_t opset = 0;
  bool haveDefaultOpset = false;
  ModuleOp module;
  /// ONNX value name -> kiln value.
  llvm::StringMap<Value> values;
  /// Float initializers: materialised as kiln.get_param on first use.
  llvm::StringMap<ParamOp> params;
  llvm::StringSet<> usedBindings;
  Block *entryBlock = nullptr;
  Operation *lastParamRead = nullptr;
};

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
                                       Value value) {
  if (!info.type().has_tensor_type())
    return llvm::Error::success();
  auto type = cast<RankedTensorType>(value.getType());
  const onnx::TypeProto_Tensor &tensor = info.type().tensor_type();
  Type declared = elementTypeOf(tensor.elem_type(), &context);
  if (tensor.elem_type() != onnx::TensorProto::UNDEFINED &&
      declared != type.getElementType())
    return makeError("graph output '" + info.name() + "' is declared as " +
                     onnxTypeName(tensor.elem_type()) +
                     " but the graph computes another element type");
  if (!fitsDeclared(tensor, type.getShape()))
    return makeError("graph output '" + info.name() +
                     "' does not have its declared shape; the graph computes " +
                     shapeString(type.getShape()));
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
  if (model.training_info_size() > 0)
    return makeError(
        "the model has training_info (TrainingInfoProto), which is not "
        "supported yet; import its inference graph by removing training_info, "
        "or wait for training import");
  for (const onnx::OperatorSetIdProto &set : model.opset_import()) {
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
                     name + "' is not a tensor (sequences, maps and optionals "
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
    std::string hint = dim.has_dim_param()
                           ? "--dim " + dim.dim_param() + "=N"
                           : std::string("--batch-size=N");
    return makeError("graph input '" + name + "' dimension " + Twine(index) +
                     " is symbolic (" + symbol + ") and unbound; bind it with " +
                     hint + (index == 0 && dim.has_dim_param()
                                 ? " or --batch-size=N"
                                 : ""));
  }
  return RankedTensorType::get(shape, element);
}

llvm::Error GraphImporter::importInitializers() {
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToEnd(module.getBody());
  Location loc = FileLineColLoc::get(&context, displayName, 0, 0);
  llvm::StringSet<> seen;
  for (const onnx::TensorProto &tensor : model.graph().initializer()) {
    if (!seen.insert(tensor.name()).second)
      return makeError("initializer '" + tensor.name() + "' is defined twice");
    std::string error;
    FailureOr<DenseElementsAttr> value =
        convertTensor(tensor, &context, baseDir, error);
    if (failed(value))
      return makeError("initializer '" + tensor.name() + "': " + error);
    // Integer and boolean initializers are shapes, indices and masks: they
    // are constants. Float initializers are the model's parameters.
    if (!isa<FloatType>(value->getElementType())) {
      OpBuilder::InsertionGuard inner(builder);
      builder.setInsertionPointToEnd(entryBlock);
      values[tensor.name()] = ConstantOp::create(builder, loc, *value);
      continue;
    }
    auto param = ParamOp::create(builder, loc,
                                 builder.getStringAttr(tensor.name()),
                                 TypeAttr::get(value->getType()),
                                 mlir::cast<ElementsAttr>(*value));
    params[tensor.name()] = param;
  }
  return llvm::Error::success();
}

llvm::Error GraphImporter::importInputs(SmallVectorImpl<Type> &argTypes,
                                        SmallVectorImpl<std::string> &argNames) {
  for (const onnx::ValueInfoProto &info : model.graph().input()) {
    // Before IR version 4, initializers are also listed as inputs.
    if (params.count(info.name()) || values.count(info.name()))
      continue;
    auto binding = options.boundInputs.find(info.name());
    if (binding != options.boundInputs.end()) {
      usedBindings.insert(info.name());
      continue;
    }
    Expected<RankedTensorType> type = graphValueType(info, /*isInput=*/true);
    if (!type)
      return type.takeError();
    argTypes.push_back(*type);
    argNames.push_back(info.name());
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

llvm::Error GraphImporter::importNode(const onnx::NodeProto &node,
                                      unsigned index) {
  auto nodeError = [&](const Twine &reason) {
    std::string version =
        isDefaultDomain(node.domain())
            ? "opset " + std::to_string(opset)
            : "domain '" + node.domain() + "'";
    return makeError("node '" + nodeLabel(node, index) + "' (" +
                     node.op_type() + ", " + version + "): " + reason);
  };
  if (node.domain() == "ai.onnx.preview.training")
    return nodeError("training operators are not supported yet");
  if (!isDefaultDomain(node.domain()))
    return nodeError("operators of domain '" + node.domain() +
                     "' are not supported");
  if (!haveDefaultOpset)
    return nodeError("the model imports no default-domain opset");
  if (opset < kMinOpset && !isLegacySafe(node, opset))
    return nodeError("this operator is supported from opset " +
                     Twine(kMinOpset) + "; opset " + Twine(opset) +
                     " semantics differ");
  const OpImporterTable &table = opImporters();
  auto found = table.find(node.op_type());
  if (found == table.end()) {
    for (const onnx::FunctionProto &function : model.functions())
      if (function.name() == node.op_type())
        return nodeError("model-local functions are not supported yet");
    return nodeError("operator '" + node.op_type() + "' is not supported");
  }

  SmallVector<Value> inputs;
  for (const std::string &name : node.input()) {
    if (name.empty()) {
      inputs.push_back(nullptr);
      continue;
    }
    auto value = values.find(name);
    if (value != values.end()) {
      inputs.push_back(value->second);
      continue;
    }
    auto param = params.find(name);
    if (param == params.end())
      return nodeError("input '" + name + "' is not defined before use");
    Value read = readParam(param->second);
    values[name] = read;
    inputs.push_back(read);
  }

  SmallVector<Value> outputs(node.output_size(), nullptr);
  std::string error;
  NodeContext ctx(node, opset, builder, nodeLocation(node, index), inputs,
                  outputs, error, baseDir, module);
  LogicalResult result = failure();
  {
    // Diagnostics of op inference and verification become the node's error.
    ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
      if (diag.getSeverity() == DiagnosticSeverity::Error && error.empty())
        error = diag.str();
      return success();
    });
    result = found->second(ctx);
  }
  if (failed(result))
    return nodeError(error.empty() ? "cannot be imported" : error);
  for (auto [i, name] : llvm::enumerate(node.output())) {
    if (name.empty())
      continue;
    if (values.count(name) || params.count(name))
      return nodeError("output '" + name +
                       "' is already defined (ONNX graphs are in SSA form)");
    if (!outputs[i])
      return nodeError("output " + Twine(i) + " ('" + name +
                       "') is not supported");
    values[name] = outputs[i];
  }
  return llvm::Error::success();
}

Expected<OwningOpRef<ModuleOp>> GraphImporter::run() {
  if (llvm::Error error = checkModel())
    return std::move(error);
  context.loadDialect<KilnDialect, func::FuncDialect>();
  Location moduleLoc = FileLineColLoc::get(&context, displayName, 0, 0);
  OwningOpRef<ModuleOp> owned = ModuleOp::create(moduleLoc);
  module = *owned;
  // The entry block is made first so that constants have a home; the
  // function around it is built once the signature is known.
  auto scratch = std::make_unique<Block>();
  entryBlock = scratch.get();

  if (llvm::Error error = importInitializers())
    return std::move(error);
  SmallVector<Type> argTypes;
  SmallVector<std::string> argNames;
  if (llvm::Error error = importInputs(argTypes, argNames))
    return std::move(error);
  for (auto [type, name] : llvm::zip(argTypes, argNames))
    values[name] = entryBlock->addArgument(type, moduleLoc);

  for (const auto &binding : options.boundInputs) {
    if (!usedBindings.contains(binding.getKey()))
      return makeError("--bind-input names '" + binding.getKey() +
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
        error = "cannot read '" + file.str() + "': " +
                buffer.getError().message();
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
      return makeError("--bind-input " + binding.getKey() + ": " + error);
    if (llvm::Error mismatch = checkBinding(binding.getKey(), *value))
      return std::move(mismatch);
    OpBuilder::InsertionGuard guard(builder);
    builder.setInsertionPointToEnd(entryBlock);
    values[binding.getKey()] = ConstantOp::create(builder, moduleLoc, *value);
  }

  builder.setInsertionPointToEnd(entryBlock);
  for (auto [index, node] : llvm::enumerate(model.graph().node()))
    if (llvm::Error error = importNode(node, index))
      return std::move(error);

  SmallVector<Value> results;
  SmallVector<std::string> resultNames;
  for (const onnx::ValueInfoProto &output : model.graph().output()) {
    auto value = values.find(output.name());
    Value result = value != values.end() ? value->second : nullptr;
    if (!result) {
      auto param = params.find(output.name());
      if (param == params.end())
        return makeError("graph output '" + output.name() +
                         "' is not produced by any node");
      result = readParam(param->second);
    }
    if (llvm::Error error = checkOutput(output, result))
      return std::move(error);
    results.push_back(result);
    resultNames.push_back(output.name());
  }
  if (results.empty())
    return makeError("the graph has no outputs");
  func::ReturnOp::create(builder, moduleLoc, results);
  eraseDeadOps();

  builder.setInsertionPointToEnd(module.getBody());
  auto function = func::FuncOp::create(
      builder, moduleLoc, options.entryName,
      builder.getFunctionType(argTypes, TypeRange(ValueRange(results))));
  function.getBody().push_back(scratch.release());
  for (auto [i, name] : llvm::enumerate(argNames))
    function.setArgAttr(i, "kiln.name", builder.getStringAttr(name));
  for (auto [i, name] : llvm::enumerate(resultNames))
    function.setResultAttr(i, "kiln.name", builder.getStringAttr(name));

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

} // namespace

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
  auto buffer = llvm::MemoryBuffer::getFileOrSTDIN(path, /*IsText=*/false,
                                                   /*RequiresNullTerminator=*/false);
  if (!buffer)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   path + ": cannot read: " +
                                       buffer.getError().message());
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
