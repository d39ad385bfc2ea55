//===- GraphImporter.h - ONNX graphs to kiln functions ----------*- C++ -*-===//
//
// The importer's state for one model: the module being built, its
// parameters, and the function being filled. Importer.cpp imports the main
// graph as the entry function; TrainingInfo.cpp imports a TrainingInfoProto
// (initial values and the `train_step` function) with the same machinery.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_IMPORT_ONNX_GRAPHIMPORTER_H
#define KILN_LIB_IMPORT_ONNX_GRAPHIMPORTER_H

#include "NodeContext.h"

#include "kiln/Import/ONNX.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringSet.h"

namespace kiln::onnx_import {

/// The domain of the training operators (Gradient, Adam, ...).
inline constexpr llvm::StringLiteral kTrainingDomain =
    "ai.onnx.preview.training";

/// One graph's initializers, as the functions that see them read them.
struct GraphScope {
  const onnx::GraphProto *graph = nullptr;
  /// Float initializers, and every initializer training updates: symbols.
  llvm::StringMap<ParamOp> params;
  /// The other (integer and boolean) initializers: constants of each
  /// function, in file order.
  llvm::SmallVector<std::pair<std::string, mlir::DenseElementsAttr>> constants;
};

class GraphImporter {
public:
  GraphImporter(mlir::MLIRContext &context, const onnx::ModelProto &model,
                llvm::StringRef displayName, llvm::StringRef baseDir,
                const ImportOptions &options)
      : context(context), model(model), displayName(displayName),
        baseDir(baseDir), options(options), builder(&context) {}

  llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>> run();

private:
  llvm::Error makeError(const llvm::Twine &message) const {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   displayName + ": " + message);
  }
  llvm::Error checkModel();
  llvm::Error readBindings();
  llvm::Expected<mlir::RankedTensorType>
  graphValueType(const onnx::ValueInfoProto &info, bool isInput);
  /// Reads `scope.graph`'s initializers. With `asConstants`, every one is a
  /// constant (the initialization graph's); otherwise float initializers and
  /// those named in `mutableNames` become kiln.param symbols.
  llvm::Error importInitializers(GraphScope &scope, bool asConstants);
  /// Reads the roles PyTorch's dynamo exporter records for initializers
  /// (the value_info metadata kind PARAMETER, BUFFER or CONSTANT_TENSOR)
  /// into `initializerRoles`; importInitializers marks the float parameters
  /// that are not PARAMETERs `kiln.buffer`.
  void readInitializerRoles(const onnx::GraphProto &graph);
  /// Builds the function `name` from the nodes of `scopes`' graphs, in
  /// order. Its arguments are the graphs' inputs that are not initializers
  /// (the first graph's dropped when unused, if there are several graphs);
  /// its results are `outputs`, resolved in the combined graph.
  llvm::Expected<mlir::func::FuncOp>
  importFunction(llvm::StringRef name, llvm::ArrayRef<GraphScope *> scopes,
                 llvm::ArrayRef<const onnx::ValueInfoProto *> outputs,
                 llvm::StringRef graphKind);
  llvm::Error importNode(const onnx::NodeProto &node, unsigned index);
  /// Appends the values of the node's inputs from `first` on (null for an
  /// absent optional one); an error names an undefined input or a sequence.
  llvm::Error
  nodeInputs(const onnx::NodeProto &node, int first,
             llvm::SmallVectorImpl<mlir::Value> &inputs,
             llvm::function_ref<llvm::Error(const llvm::Twine &)> nodeError);
  /// Runs `body` on a NodeContext of the node, its diagnostics and failure
  /// becoming the node's error.
  llvm::Error runNodeImporter(
      const onnx::NodeProto &node, unsigned index, int64_t nodeOpset,
      llvm::SmallVectorImpl<mlir::Value> &inputs,
      llvm::SmallVectorImpl<mlir::Value> &outputs,
      llvm::function_ref<mlir::LogicalResult(NodeContext &)> body,
      llvm::function_ref<llvm::Error(const llvm::Twine &)> nodeError);
  /// SplitToSequence, SequenceConstruct, SequenceAt, SequenceLength and
  /// ConcatFromSequence, over sequences known when importing.
  llvm::Error importSequenceNode(
      const onnx::NodeProto &node, unsigned index,
      llvm::function_ref<llvm::Error(const llvm::Twine &)> nodeError);
  mlir::Location nodeLocation(const onnx::NodeProto &node, unsigned index);
  /// Reads a parameter at the top of the entry block, in first-use order.
  mlir::Value readParam(ParamOp param);
  /// The value named `name` in the function being imported, or null.
  mlir::Value lookupValue(llvm::StringRef name);
  /// Checks a --bind-input value against the input's declared type.
  llvm::Error checkBinding(llvm::StringRef name, mlir::DenseElementsAttr value);
  /// Checks computed outputs against their declared types.
  llvm::Error checkOutput(const onnx::ValueInfoProto &info, mlir::Value value,
                          llvm::StringRef graphKind);
  void eraseDeadOps();
  std::string nodeLabel(const onnx::NodeProto &node, unsigned index) const;

  // TrainingInfo.cpp.
  /// Validates training_info and collects the initializers it updates.
  llvm::Error checkTrainingInfo();
  /// Applies the initialization graph's constants as initial values.
  llvm::Error importInitialization();
  /// Makes the constant `value` (output `source` of the initialization
  /// graph) the initial value of the initializer `key`.
  llvm::Error setInitialValue(llvm::StringRef key, llvm::StringRef source,
                              mlir::Value value);
  /// Builds `train_step` from the main and algorithm graphs.
  llvm::Error importTrainStep();

  mlir::MLIRContext &context;
  const onnx::ModelProto &model;
  std::string displayName;
  std::string baseDir;
  const ImportOptions &options;
  mlir::OpBuilder builder;
  int64_t opset = 0;
  bool haveDefaultOpset = false;
  /// The imported version of the training domain, 0 when not imported.
  int64_t trainingOpset = 0;
  mlir::ModuleOp module;
  GraphScope mainScope, algorithmScope;
  /// Initializers a TrainingInfoProto assigns (update_binding keys).
  llvm::StringSet<> mutableNames;
  /// Initializer name -> the role the exporter recorded for it.
  llvm::StringMap<std::string> initializerRoles;
  /// Initializer name -> what the exporter's optimizer folded into it.
  llvm::StringMap<std::string> foldedFrom;
  /// --bind-input values by input name.
  llvm::StringMap<mlir::DenseElementsAttr> boundValues;

  // The function being imported.
  /// ONNX value name -> kiln value.
  llvm::StringMap<mlir::Value> values;
  /// ONNX sequence name -> its tensors. Sequences exist only while
  /// importing: the exporters' SplitToSequence / SequenceAt pairs (how the
  /// dynamo exporter writes torch.split unoptimized) become the tensors.
  llvm::StringMap<llvm::SmallVector<mlir::Value>> sequences;
  /// The parameters its graphs see, read on first use.
  llvm::StringMap<ParamOp> params;
  mlir::Block *entryBlock = nullptr;
  mlir::Operation *lastParamRead = nullptr;
};

} // namespace kiln::onnx_import

#endif // KILN_LIB_IMPORT_ONNX_GRAPHIMPORTER_H
