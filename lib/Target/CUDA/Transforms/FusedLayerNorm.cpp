//===- FusedLayerNorm.cpp - layer norms for the row kernels ---------------===//
//
// kiln.layer_norm and kiln.layer_norm_grad become kiln.fused_layer_norm and
// kiln.fused_layer_norm_grad, which the CUDA runtime computes with its own
// kernels, a warp per row: the statistics never leave registers, and the
// gradient reads the input again rather than a normalized copy kept from
// the forward pass. A transformer's residual connections meet its layer
// norms: the sum a layer norm normalizes is added by its kernel, and the
// gradient it adds to the residual's too.
//
//===----------------------------------------------------------------------===//

#include "kiln/KilnDialect.h"
#include "kiln/KilnOps.h"
#include "kiln/Target/CUDA/LayerNorm.h"
#include "kiln/Target/CUDA/Passes.h"
#include "kiln/Transforms/Utils/BlockOrder.h"
#include "kiln/Transforms/Utils/LibraryOpBufferization.h"

namespace kiln {
#define GEN_PASS_DEF_KILNFUSEDLAYERNORM
#include "kiln/Target/CUDA/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {

/// The kernels index rows with 32-bit grid coordinates.
constexpr int64_t kMaxRows = int64_t(1) << 31;

/// The [rows, cols] matrix an f32 layer norm over `axis..` of `input`
/// normalizes, when the kernels can take it.
std::optional<std::pair<int64_t, int64_t>> matrixOf(Value input, int64_t axis) {
  auto type = cast<RankedTensorType>(input.getType());
  if (!type.getElementType().isF32() || !type.hasStaticShape())
    return std::nullopt;
  int64_t rows = 1, cols = 1;
  for (auto [d, size] : llvm::enumerate(type.getShape()))
    (static_cast<int64_t>(d) < axis ? rows : cols) *= size;
  if (rows < 1 || cols < 1 || rows >= kMaxRows || cols >= kMaxRows)
    return std::nullopt;
  return std::pair{rows, cols};
}

/// The kiln.add of two tensors of its own type that computes `v` (a
/// residual connection's sum), or null.
AddOp sumOfTwo(Value v) {
  auto add = v.getDefiningOp<AddOp>();
  if (!add || add.getLhs().getType() != v.getType() ||
      add.getRhs().getType() != v.getType())
    return {};
  return add;
}

/// `v` reshaped to `shape` (of its element type), unless it has it.
Value reshaped(OpBuilder &b, Location loc, Value v, ArrayRef<int64_t> shape) {
  auto type = cast<RankedTensorType>(v.getType());
  if (type.getShape() == shape)
    return v;
  return ReshapeOp::create(b, loc, type.clone(shape), v);
}

struct KilnFusedLayerNormPass
    : kiln::impl::KilnFusedLayerNormBase<KilnFusedLayerNormPass> {
  void runOnOperation() override {
    SmallVector<Operation *> ops;
    getOperation().walk([&](Operation *op) {
      if (isa<LayerNormOp, LayerNormGradOp>(op))
        ops.push_back(op);
    });
    for (Operation *op : ops) {
      if (auto forward = dyn_cast<LayerNormOp>(op))
        rewrite(forward);
      else
        rewrite(cast<LayerNormGradOp>(op));
    }
  }

  void rewrite(LayerNormOp op) {
    auto matrix = matrixOf(op.getInput(), op.getAxis());
    if (!matrix)
      return;
    auto [rows, cols] = *matrix;
    OpBuilder b(op);
    Location loc = op.getLoc();
    Value bias =
        op.getBias() ? reshaped(b, loc, op.getBias(), {cols}) : Value();
    auto type = cast<RankedTensorType>(op.getType());
    auto matrix2d = type.clone({rows, cols});
    // The sum of a residual connection is added (and stored) by the kernel,
    // when nothing reads it before the layer norm.
    Value input = op.getInput(), residual;
    SmallVector<Type, 2> results = {matrix2d};
    AddOp add = sumOfTwo(input);
    if (add && !llvm::all_of(add->getUsers(), [&](Operation *user) {
          return user == op || kiln::comesAfter(user, op);
        }))
      add = nullptr;
    if (add) {
      input = reshaped(b, loc, add.getLhs(), {rows, cols});
      residual = reshaped(b, loc, add.getRhs(), {rows, cols});
      results.push_back(matrix2d);
    } else {
      input = reshaped(b, loc, input, {rows, cols});
    }
    auto fused = FusedLayerNormOp::create(
        b, loc, results, input, reshaped(b, loc, op.getScale(), {cols}), bias,
        residual, ValueRange{}, op.getEpsilonAttr());
    op.replaceAllUsesWith(
        reshaped(b, loc, fused.getResults()[0], type.getShape()));
    if (add) {
      add.replaceAllUsesWith(
          reshaped(b, loc, fused.getResults()[1], type.getShape()));
      add.erase();
    }
    op.erase();
  }

  void rewrite(LayerNormGradOp op) {
    auto matrix = matrixOf(op.getInput(), op.getAxis());
    if (!matrix)
      return;
    auto [rows, cols] = *matrix;
    auto type = cast<RankedTensorType>(op.getInput().getType());
    auto scaleType = cast<RankedTensorType>(op.getScale().getType());
    // Where the input's gradient is only added to another (the residual
    // connection's), the kernel adds it, where that sum is: when the other
    // gradients are read only after it.
    Value inputGrad = op.getInputGrad(), accumulate;
    AddOp add;
    if (inputGrad.hasOneUse())
      add = dyn_cast<AddOp>(*inputGrad.getUsers().begin());
    auto afterAdd = [&](Operation *user) {
      return kiln::comesAfter(user, add);
    };
    if (add && add.getLhs() != add.getRhs() &&
        add.getType() == inputGrad.getType() &&
        add->getBlock() == op->getBlock() &&
        llvm::all_of(op.getScaleGrad().getUsers(), afterAdd) &&
        llvm::all_of(op.getBiasGrad().getUsers(), afterAdd)) {
      accumulate = add.getLhs() == inputGrad ? add.getRhs() : add.getLhs();
    } else {
      add = nullptr;
    }
    OpBuilder b(add ? add.getOperation() : op.getOperation());
    Location loc = op.getLoc();
    auto f32 = b.getF32Type();
    int64_t blocks = FusedLayerNormGradOp::partialBlocks(rows);
    auto fused = FusedLayerNormGradOp::create(
        b, loc,
        TypeRange{RankedTensorType::get({rows, cols}, f32),
                  RankedTensorType::get({cols}, f32),
                  RankedTensorType::get({cols}, f32),
                  RankedTensorType::get({blocks, 2, cols}, f32)},
        reshaped(b, loc, op.getInput(), {rows, cols}),
        reshaped(b, loc, op.getScale(), {cols}),
        reshaped(b, loc, op.getGrad(), {rows, cols}),
        accumulate ? reshaped(b, loc, accumulate, {rows, cols}) : Value(),
        ValueRange{}, op.getEpsilonAttr());
    ValueRange results = fused.getResults();
    Value gradients[] = {reshaped(b, loc, results[0], type.getShape()),
                         reshaped(b, loc, results[1], scaleType.getShape()),
                         reshaped(b, loc, results[2], scaleType.getShape())};
    if (add) {
      // What read the sum reads the kernel's.
      add.replaceAllUsesWith(gradients[0]);
      add.erase();
    }
    op.replaceAllUsesWith(gradients);
    op.erase();
  }
};

} // namespace

namespace kiln {

/// The buffer forms LibraryOpBufferization builds.
void createBufferForm(OpBuilder &b, Location loc, FusedLayerNormOp op,
                      llvm::function_ref<Value(Value)> mapped,
                      ValueRange outputs) {
  FusedLayerNormOp::create(b, loc, TypeRange{}, mapped(op.getInput()),
                           mapped(op.getScale()), mapped(op.getBias()),
                           mapped(op.getResidual()), outputs,
                           op.getEpsilonAttr());
}

void createBufferForm(OpBuilder &b, Location loc, FusedLayerNormGradOp op,
                      llvm::function_ref<Value(Value)> mapped,
                      ValueRange outputs) {
  FusedLayerNormGradOp::create(b, loc, TypeRange{}, mapped(op.getInput()),
                               mapped(op.getScale()), mapped(op.getGrad()),
                               mapped(op.getAccumulate()), outputs,
                               op.getEpsilonAttr());
}

} // namespace kiln

void kiln::registerFusedLayerNormBufferization(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *context, KilnDialect *) {
    FusedLayerNormOp::attachInterface<LibraryOpBufferization<FusedLayerNormOp>>(
        *context);
    FusedLayerNormGradOp::attachInterface<
        LibraryOpBufferization<FusedLayerNormGradOp>>(*context);
  });
}
