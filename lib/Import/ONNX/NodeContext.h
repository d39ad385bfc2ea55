//===- NodeContext.h - what an ONNX op importer works with ------*- C++ -*-===//
//
// Each ONNX op type has an importer function that receives a NodeContext: the
// node, its opset, its inputs as kiln values, attribute accessors and helpers
// that build kiln ops safely (result types are inferred and checked before the
// op exists, so a malformed model yields a diagnostic, never a crash) and fold
// them when their operands are constants.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_IMPORT_ONNX_NODECONTEXT_H
#define KILN_LIB_IMPORT_ONNX_NODECONTEXT_H

#include "kiln/KilnOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringMap.h"

#include <onnx/onnx_pb.h>

#include <optional>
#include <string>

namespace kiln::onnx_import {

class NodeContext {
public:
  NodeContext(const onnx::NodeProto &node, int64_t opset,
              mlir::OpBuilder &builder, mlir::Location loc,
              llvm::SmallVectorImpl<mlir::Value> &inputs,
              llvm::SmallVectorImpl<mlir::Value> &outputs, std::string &error,
              llvm::StringRef baseDir, mlir::ModuleOp module)
      : node(node), opset(opset), b(builder), loc(loc),
        ctx(builder.getContext()), inputs(inputs), outputs(outputs),
        error(error), baseDir(baseDir), module(module) {}

  const onnx::NodeProto &node;
  const int64_t opset;
  mlir::OpBuilder &b;
  const mlir::Location loc;
  mlir::MLIRContext *const ctx;
  /// The value an ONNX name denotes where the node is (for operators that
  /// name values in attributes, like Gradient); null when unknown.
  llvm::function_ref<mlir::Value(llvm::StringRef)> lookupValue;

  //===--------------------------------------------------------------------===//
  // Inputs and outputs.
  //===--------------------------------------------------------------------===//

  unsigned numInputs() const { return inputs.size(); }
  bool hasInput(unsigned i) const { return i < inputs.size() && inputs[i]; }
  mlir::Value input(unsigned i) const {
    return hasInput(i) ? inputs[i] : nullptr;
  }
  mlir::RankedTensorType inputType(unsigned i) const {
    return mlir::cast<mlir::RankedTensorType>(inputs[i].getType());
  }
  unsigned numOutputs() const { return outputs.size(); }
  bool wantsOutput(unsigned i) const {
    return i < static_cast<unsigned>(node.output_size()) &&
           !node.output(i).empty();
  }
  void setOutput(unsigned i, mlir::Value value) {
    if (i < outputs.size())
      outputs[i] = value;
  }
  /// Sets output `i` to `value` unless building it failed.
  mlir::LogicalResult setResult(mlir::FailureOr<mlir::Value> value,
                                unsigned i = 0) {
    if (mlir::failed(value))
      return mlir::failure();
    setOutput(i, *value);
    return mlir::success();
  }

  /// Fails unless the node has between `min` and `max` inputs (absent
  /// optional inputs count).
  mlir::LogicalResult expectInputs(unsigned min, unsigned max);

  //===--------------------------------------------------------------------===//
  // Attributes.
  //===--------------------------------------------------------------------===//

  const onnx::AttributeProto *attr(llvm::StringRef name) const;
  int64_t getInt(llvm::StringRef name, int64_t defaultValue) const;
  std::optional<int64_t> getOptionalInt(llvm::StringRef name) const;
  double getFloat(llvm::StringRef name, double defaultValue) const;
  std::string getString(llvm::StringRef name,
                        llvm::StringRef defaultValue) const;
  std::optional<llvm::SmallVector<int64_t>> getInts(llvm::StringRef name) const;
  std::optional<llvm::SmallVector<double>>
  getFloats(llvm::StringRef name) const;

  //===--------------------------------------------------------------------===//
  // Errors.
  //===--------------------------------------------------------------------===//

  /// Records `reason` (unless an error is already recorded) and fails.
  mlir::LogicalResult fail(const llvm::Twine &reason);

  //===--------------------------------------------------------------------===//
  // Constants.
  //===--------------------------------------------------------------------===//

  /// The constant value of `value`, when it is one.
  mlir::DenseElementsAttr constantOf(mlir::Value value) const;
  /// The integers held by input `i`, which must be a constant; `what` names
  /// the input in the error.
  mlir::FailureOr<llvm::SmallVector<int64_t>> constInts(unsigned i,
                                                        llvm::StringRef what);
  /// The float values held by input `i`, which must be a constant.
  mlir::FailureOr<llvm::SmallVector<double>> constFloats(unsigned i,
                                                         llvm::StringRef what);
  /// Converts an ONNX TensorProto attribute or initializer.
  mlir::FailureOr<mlir::DenseElementsAttr>
  tensorAttr(const onnx::TensorProto &tensor);

  mlir::Value constant(mlir::DenseElementsAttr value);
  /// A tensor of `type` with every element `value`.
  mlir::Value splat(mlir::RankedTensorType type, double value);
  /// A rank-0 tensor of element type `elementType`.
  mlir::Value scalar(mlir::Type elementType, double value);
  mlir::Value i64Vector(llvm::ArrayRef<int64_t> values);

  //===--------------------------------------------------------------------===//
  // Building kiln ops.
  //===--------------------------------------------------------------------===//

  mlir::NamedAttribute named(llvm::StringRef name, mlir::Attribute value) {
    return b.getNamedAttr(name, value);
  }
  mlir::NamedAttribute i64(llvm::StringRef name, int64_t value) {
    return named(name, b.getI64IntegerAttr(value));
  }
  mlir::NamedAttribute f64(llvm::StringRef name, double value) {
    return named(name, b.getF64FloatAttr(value));
  }
  mlir::NamedAttribute array(llvm::StringRef name,
                             llvm::ArrayRef<int64_t> values) {
    return named(name, b.getDenseI64ArrayAttr(values));
  }
  mlir::NamedAttribute unit(llvm::StringRef name) {
    return named(name, b.getUnitAttr());
  }

  /// Creates an op, inferring its result types unless `types` are given,
  /// and verifies it; a failure has been diagnosed.
  template <typename OpTy>
  mlir::FailureOr<mlir::Operation *>
  createOp(mlir::ValueRange operands,
           llvm::ArrayRef<mlir::NamedAttribute> attrs = {},
           mlir::TypeRange types = {}) {
    llvm::SmallVector<mlir::Type> resultTypes(types.begin(), types.end());
    if (resultTypes.empty()) {
      if constexpr (OpTy::template hasTrait<
                        mlir::InferTypeOpInterface::Trait>()) {
        mlir::NamedAttrList attrList(attrs);
        if (mlir::failed(OpTy::inferReturnTypes(
                ctx, loc, operands, attrList.getDictionary(ctx),
                mlir::OpaqueProperties(nullptr), {}, resultTypes)))
          return mlir::failure();
      } else if constexpr (OpTy::template hasTrait<
                               mlir::OpTrait::SameOperandsAndResultType>()) {
        resultTypes.push_back(operands.front().getType());
      } else {
        return fail("internal error: no result type for " +
                    OpTy::getOperationName());
      }
    }
    return buildVerified(OpTy::getOperationName(), operands, attrs,
                         resultTypes);
  }

  /// Like createOp for single-result ops, folding the result when possible.
  template <typename OpTy>
  mlir::FailureOr<mlir::Value>
  create(mlir::ValueRange operands,
         llvm::ArrayRef<mlir::NamedAttribute> attrs = {},
         mlir::TypeRange types = {}) {
    mlir::FailureOr<mlir::Operation *> op =
        createOp<OpTy>(operands, attrs, types);
    if (mlir::failed(op))
      return mlir::failure();
    return foldSingleResult(*op);
  }

  mlir::FailureOr<mlir::Value> reshape(mlir::Value value,
                                       llvm::ArrayRef<int64_t> shape);
  mlir::FailureOr<mlir::Value> broadcastTo(mlir::Value value,
                                           llvm::ArrayRef<int64_t> shape);
  /// Numpy-broadcasts all `values` to their common shape, in place.
  mlir::LogicalResult broadcastAll(llvm::MutableArrayRef<mlir::Value> values);
  mlir::FailureOr<mlir::Value> cast(mlir::Value value, mlir::Type elementType);
  /// Normalizes a possibly negative axis against `rank`.
  mlir::FailureOr<int64_t> normalizeAxis(int64_t axis, int64_t rank);

  /// The directory external tensor data is read relative to.
  llvm::StringRef externalDataDir() const { return baseDir; }
  /// Appends `value` to the module's array attribute `name`, for what the
  /// import notes for the compiler driver.
  void noteOnModule(llvm::StringRef name, mlir::Attribute value);

private:
  mlir::FailureOr<mlir::Operation *>
  buildVerified(llvm::StringRef name, mlir::ValueRange operands,
                llvm::ArrayRef<mlir::NamedAttribute> attrs,
                mlir::TypeRange types);
  mlir::Value foldSingleResult(mlir::Operation *op);

  llvm::SmallVectorImpl<mlir::Value> &inputs;
  llvm::SmallVectorImpl<mlir::Value> &outputs;
  std::string &error;
  llvm::StringRef baseDir;
  mlir::ModuleOp module;
};

/// Imports one node; the node context already holds its inputs.
using OpImporter = mlir::LogicalResult (*)(NodeContext &);
using OpImporterTable = llvm::StringMap<OpImporter>;

void registerElementwiseOps(OpImporterTable &table);
void registerShapeOps(OpImporterTable &table);
void registerNNOps(OpImporterTable &table);
void registerReductionOps(OpImporterTable &table);
void registerEinsumOp(OpImporterTable &table);
/// QuantizeLinear and DequantizeLinear to and from 16-, 8-, 4- and 2-bit
/// integers and the float8 and float4 types.
void registerQuantizeOps(OpImporterTable &table);
/// The tensors SplitToSequence splits its input into.
mlir::FailureOr<llvm::SmallVector<mlir::Value>> splitToSequence(NodeContext &n);
/// RNN, GRU and LSTM, unrolled over the sequence.
void registerRecurrentOps(OpImporterTable &table);
/// HannWindow, HammingWindow, BlackmanWindow.
void registerSignalOps(OpImporterTable &table);
/// Attention and RotaryEmbedding (opset 23).
void registerAttentionOps(OpImporterTable &table);
/// The ai.onnx.preview.training operators (Gradient, Adam, Adagrad,
/// Momentum).
void registerTrainingOps(OpImporterTable &table);

/// The kiln element type of an ONNX TensorProto data type, or null.
mlir::Type elementTypeOf(int32_t onnxType, mlir::MLIRContext *context);

/// onnx.proto's numbers of the types newer than ONNX 1.12.
enum NewerOnnxType : int32_t {
  kFloat8E4M3FN = 17,
  kFloat8E4M3FNUZ = 18,
  kFloat8E5M2 = 19,
  kFloat8E5M2FNUZ = 20,
  kUInt4 = 21,
  kInt4 = 22,
  kFloat4E2M1 = 23,
  kFloat8E8M0 = 24,
  kUInt2 = 25,
  kInt2 = 26,
};
/// The ONNX name of a TensorProto data type, for messages.
llvm::StringRef onnxTypeName(int32_t onnxType);

/// Converts a TensorProto to an attribute; `baseDir` resolves external data.
mlir::FailureOr<mlir::DenseElementsAttr>
convertTensor(const onnx::TensorProto &tensor, mlir::MLIRContext *context,
              llvm::StringRef baseDir, std::string &error);

/// Reads a NumPy `.npy` file into an attribute.
mlir::FailureOr<mlir::DenseElementsAttr> readNpyFile(llvm::StringRef path,
                                                     mlir::MLIRContext *context,
                                                     std::string &error);

} // namespace kiln::onnx_import

#endif // KILN_LIB_IMPORT_ONNX_NODECONTEXT_H
