//===- LibraryOpBufferization.h - ops the runtime computes ------*- C++ -*-===//
//
// Some kiln ops stand for the CUDA runtime's own kernels (flash attention,
// the fused layer norm): on tensors they have results; after bufferization
// they take their results' buffers after their operands (`into`) and have
// none. They read their operands and write new dense buffers, whatever the
// analysis would infer, and an operand in a buffer with another layout is
// copied to a dense one first: the kernels address dense tensors.
//
// An op's buffer form is built by `createBufferForm(builder, loc, op,
// mapped, outputs)`, which each op's pass defines next to it (found by
// argument-dependent lookup): `mapped` gives each operand's buffer.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TRANSFORMS_LIBRARYOPBUFFERIZATION_H
#define KILN_TRANSFORMS_LIBRARYOPBUFFERIZATION_H

#include "kiln/Transforms/Utils/Buffers.h"

#include "mlir/Dialect/Bufferization/IR/BufferizableOpInterface.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/IRMapping.h"

namespace kiln {

template <typename Op>
struct LibraryOpBufferization
    : mlir::bufferization::BufferizableOpInterface::ExternalModel<
          LibraryOpBufferization<Op>, Op> {
  bool
  bufferizesToMemoryRead(mlir::Operation *, mlir::OpOperand &,
                         const mlir::bufferization::AnalysisState &) const {
    return true;
  }
  bool
  bufferizesToMemoryWrite(mlir::Operation *, mlir::OpOperand &,
                          const mlir::bufferization::AnalysisState &) const {
    return false;
  }
  mlir::bufferization::AliasingValueList
  getAliasingValues(mlir::Operation *, mlir::OpOperand &,
                    const mlir::bufferization::AnalysisState &) const {
    return {};
  }
  /// Each result is a new dense buffer.
  bool bufferizesToAllocation(mlir::Operation *, mlir::Value) const {
    return true;
  }
  mlir::FailureOr<mlir::bufferization::BufferLikeType>
  getBufferType(mlir::Operation *, mlir::Value value,
                const mlir::bufferization::BufferizationOptions &,
                const mlir::bufferization::BufferizationState &,
                llvm::SmallVector<mlir::Value> &) const {
    auto tensor = mlir::cast<mlir::RankedTensorType>(value.getType());
    return mlir::cast<mlir::bufferization::BufferLikeType>(
        mlir::MemRefType::get(tensor.getShape(), tensor.getElementType()));
  }
  mlir::LogicalResult
  bufferize(mlir::Operation *op, mlir::RewriterBase &rewriter,
            const mlir::bufferization::BufferizationOptions &options,
            mlir::bufferization::BufferizationState &state) const {
    mlir::Location loc = op->getLoc();
    mlir::IRMapping buffers;
    for (mlir::Value operand : op->getOperands()) {
      mlir::FailureOr<mlir::Value> buffer =
          mlir::bufferization::getBuffer(rewriter, operand, options, state);
      if (mlir::failed(buffer))
        return mlir::failure();
      mlir::Value plain = *buffer;
      if (!isPlainBuffer(plain.getType())) {
        auto type = mlir::cast<mlir::MemRefType>(plain.getType());
        mlir::FailureOr<mlir::Value> copy = options.createAlloc(
            rewriter, loc,
            mlir::MemRefType::get(type.getShape(), type.getElementType()), {});
        if (mlir::failed(copy) ||
            mlir::failed(options.createMemCpy(rewriter, loc, plain, *copy)))
          return mlir::failure();
        plain = *copy;
      }
      buffers.map(operand, plain);
    }
    llvm::SmallVector<mlir::Value> outputs;
    for (mlir::Type type : op->getResultTypes()) {
      auto tensor = mlir::cast<mlir::RankedTensorType>(type);
      mlir::FailureOr<mlir::Value> output = options.createAlloc(
          rewriter, loc,
          mlir::MemRefType::get(tensor.getShape(), tensor.getElementType()),
          {});
      if (mlir::failed(output))
        return mlir::failure();
      outputs.push_back(*output);
    }
    auto mapped = [&](mlir::Value v) {
      return v ? buffers.lookup(v) : mlir::Value();
    };
    createBufferForm(rewriter, loc, mlir::cast<Op>(op), mapped, outputs);
    mlir::bufferization::replaceOpWithBufferizedValues(rewriter, op, outputs);
    return mlir::success();
  }
};

} // namespace kiln

#endif // KILN_TRANSFORMS_LIBRARYOPBUFFERIZATION_H
