//===- Buffers.h - the buffers a step's commands run on ---------*- C++ -*-===//
//
// After memory planning every buffer of an entry function is a view of one
// the runtime knows by itself: an argument (an input, output, parameter or
// the arena), or an arena slot, a view of the arena at a constant offset.
// kiln-gpu-outline-kernels passes only these to kernels and the CUDA target
// names them in its commands; both recognise them here.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TRANSFORMS_BUFFERS_H
#define KILN_TRANSFORMS_BUFFERS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Value.h"

#include <optional>

namespace kiln {

struct RootBuffer {
  /// The argument of the function's entry block the buffer is (a view of).
  mlir::BlockArgument argument;
  /// The buffer's first byte in the argument.
  int64_t byteOffset = 0;
};

/// Whether `type` is a statically shaped memref with the identity layout:
/// contiguous, so one pointer names it.
bool isPlainBuffer(mlir::Type type);

/// `v` as a root buffer: a plain buffer that is an argument of its
/// function's entry block, or a memref.view of one at a constant,
/// non-negative byte offset; std::nullopt otherwise.
std::optional<RootBuffer> asRootBuffer(mlir::Value v);

/// The address of `buffer`'s first element as an LLVM pointer, for a call
/// into the runtime.
mlir::Value bufferAddress(mlir::OpBuilder &b, mlir::Location loc,
                          mlir::Value buffer);

/// The private declaration of runtime function `name` in `module`, made
/// with `type` if the module has none yet.
mlir::func::FuncOp declareRuntimeFunction(mlir::ModuleOp module,
                                          llvm::StringRef name,
                                          mlir::FunctionType type);

} // namespace kiln

#endif // KILN_TRANSFORMS_BUFFERS_H
