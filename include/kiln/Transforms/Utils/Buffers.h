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
#include "mlir/Support/LLVM.h"

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

/// The root buffer `v` views, and the view ops from the root to `v` (root
/// side first); failure when `v` is not a view of a root buffer.
mlir::FailureOr<mlir::Value>
traceToRoot(mlir::Value v, llvm::SmallVectorImpl<mlir::Operation *> &chain);

/// The buffer `v` views (through any chain of views), or `v` itself.
mlir::Value viewRoot(mlir::Value v);

/// The bytes [first, end) of function argument `argument` that a root
/// buffer covers.
struct ByteRange {
  mlir::BlockArgument argument;
  int64_t first = 0, end = 0;
  bool overlaps(const ByteRange &other) const {
    return argument == other.argument && first < other.end && other.first < end;
  }
};

/// The argument whose storage `argument` is at run time: for an output
/// that updates a parameter (kiln.update), the parameter's argument; the
/// argument itself otherwise.
mlir::BlockArgument storageOf(mlir::BlockArgument argument);

/// The bytes root buffer `root` (an argument or an arena slot) covers;
/// std::nullopt when it is no root buffer. An output that updates a
/// parameter (kiln.update) counts as the parameter's argument: the runtime
/// passes the parameter's storage for it.
std::optional<ByteRange> bytesOf(mlir::Value root);

/// The bytes of the root buffer `v` views (traceToRoot, then bytesOf);
/// std::nullopt when `v` is no view of one.
std::optional<ByteRange> viewedBytes(mlir::Value v);

/// Appends the bytes of every buffer `op` (or an op nested in it) names
/// to `bytes`; false when one of them is no view of a root buffer, so its
/// bytes are unknown. Views and arithmetic name no memory.
bool touchedBytes(mlir::Operation *op, llvm::SmallVectorImpl<ByteRange> &bytes);

/// Whether `op` (or an op nested in it) may read or write a buffer
/// overlapping `bytes`, or one whose bytes are unknown.
bool touches(mlir::Operation *op, const ByteRange &bytes);

} // namespace kiln

#endif // KILN_TRANSFORMS_BUFFERS_H
