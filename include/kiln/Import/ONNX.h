//===- ONNX.h - importing ONNX models into the kiln dialect -----*- C++ -*-===//

#ifndef KILN_IMPORT_ONNX_H
#define KILN_IMPORT_ONNX_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>

namespace kiln {

/// How symbolic dimensions and frozen inputs are resolved during import.
struct ImportOptions {
  /// Values of named symbolic dimensions (`--dim NAME=N`).
  llvm::StringMap<int64_t> dims;
  /// Binds the leading symbolic dimension of every graph input
  /// (`--batch-size=N`).
  std::optional<int64_t> batchSize;
  /// Graph inputs frozen to constants read from files (`--bind-input`):
  /// an ONNX TensorProto (`.pb`) or a NumPy array (`.npy`).
  llvm::StringMap<std::string> boundInputs;
  /// Name of the function the graph becomes.
  std::string entryName = "forward";
};

/// Imports the ONNX model at `path`. Errors name the file and, for nodes,
/// the node, its op type and opset: `model.onnx: node 'fc1' (Gemm, opset
/// 17): reason`.
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
importONNXFile(mlir::MLIRContext &context, llvm::StringRef path,
               const ImportOptions &options);

/// Imports a serialized ModelProto held in memory; `displayName` names it in
/// errors and external data files are looked up relative to `baseDir` (none
/// when empty).
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
importONNXBuffer(mlir::MLIRContext &context, llvm::StringRef bytes,
                 llvm::StringRef displayName, llvm::StringRef baseDir,
                 const ImportOptions &options);

/// Parses `NAME=N` as used by `--dim`; N must be a positive integer.
llvm::Expected<std::pair<std::string, int64_t>>
parseDimBinding(llvm::StringRef text);

} // namespace kiln

#endif // KILN_IMPORT_ONNX_H
