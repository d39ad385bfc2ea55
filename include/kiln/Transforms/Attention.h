//===- Attention.h - what the attention passes share ------------*- C++ -*-===//

#ifndef KILN_TRANSFORMS_ATTENTION_H
#define KILN_TRANSFORMS_ATTENTION_H

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/Value.h"

#include "llvm/ADT/SmallVector.h"

namespace kiln {

/// The largest mask value that stands for a fill where kiln.attention is
/// `masked_fill` (and the largest finite fill kiln-fuse-attention takes for
/// a dropped score): -2^100, below which any score an f32 product gives is
/// absorbed, so that the sum is the fill itself.
constexpr double kMaskedFillAtMost = -0x1p100;

/// Whether element `index` (row-major) of [..., queries, keys] scores is a
/// key after its query's position.
inline bool isAfterDiagonal(int64_t index, int64_t queries, int64_t keys) {
  return index % keys > (index / keys) % queries;
}

/// Whether `mask` keeps exactly the keys up to each query's position (0
/// for key <= query; after it -inf, or a value at most kMaskedFillAtMost,
/// as the lowest float Hugging Face's models add, which absorbs any score
/// of a row that keeps its diagonal: the same zero probability and no
/// gradient) in every batch, over square scores: causal attention, which
/// needs no mask reads. Its values must be known when
/// compiling: constants and parameters that no entry point updates (a
/// model's mask buffer), through kiln.compare, kiln.select, kiln.cast and
/// kiln.slice. The parameters they come from are appended to `fixed`; a
/// caller that compiles the answer in marks them (fixParameters).
bool isCausalMask(mlir::Value mask, int64_t queries, int64_t keys,
                  llvm::SmallVectorImpl<mlir::Operation *> &fixed);

/// Marks kiln.param ops `kiln.fixed`: the code relies on their initial
/// value, so the bundle keeps it and the runtime takes no other
/// (Parameter.fixed in the bundle format).
void fixParameters(llvm::ArrayRef<mlir::Operation *> params);

/// Makes kiln.flash_attention and its gradient bufferizable: they read
/// their operands and write new buffers.
void registerFlashAttentionBufferization(mlir::DialectRegistry &registry);

} // namespace kiln

#endif // KILN_TRANSFORMS_ATTENTION_H
