//===- AutoMixedPrecision.cpp - products on bf16 operands -----------------===//
//
// Matrix products dominate a training step's arithmetic and run on tensor
// cores only with 16-bit operands. Rounding just their operands to bf16,
// and keeping the f32 accumulation, the f32 master weights and f32
// everything else, is the usual bf16 mixed precision of training
// frameworks; bf16 keeps f32's exponent range, so no loss scaling is
// needed.
//
//===----------------------------------------------------------------------===//

#include "kiln/Transforms/Passes.h"

#include "llvm/ADT/DenseMap.h"

namespace kiln {
#define GEN_PASS_DEF_KILNAUTOMIXEDPRECISION
#include "kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace {

/// `value` (an f32 tensor) rounded to bf16, by a new elementwise op after
/// its definition.
Value roundToBF16(OpBuilder &b, Value value) {
  auto type = cast<RankedTensorType>(value.getType());
  Location loc = value.getLoc();
  auto bf16 = RankedTensorType::get(type.getShape(), b.getBF16Type());
  Value init = tensor::EmptyOp::create(b, loc, type.getShape(),
                                       b.getBF16Type());
  AffineMap identity = b.getMultiDimIdentityMap(type.getRank());
  SmallVector<utils::IteratorType> parallel(type.getRank(),
                                            utils::IteratorType::parallel);
  auto round = linalg::GenericOp::create(
      b, loc, TypeRange{bf16}, ValueRange{value}, ValueRange{init},
      ArrayRef<AffineMap>{identity, identity}, parallel,
      [&](OpBuilder &nb, Location nloc, ValueRange args) {
        Value rounded =
            arith::TruncFOp::create(nb, nloc, nb.getBF16Type(), args[0]);
        linalg::YieldOp::create(nb, nloc, rounded);
      });
  return round.getResult(0);
}

struct KilnAutoMixedPrecisionPass
    : kiln::impl::KilnAutoMixedPrecisionBase<KilnAutoMixedPrecisionPass> {
  void runOnOperation() override {
    getOperation().walk([&](func::FuncOp function) {
      llvm::DenseMap<Value, Value> rounded;
      function.walk([&](linalg::GenericOp op) {
        if (!op->hasAttr("kiln.matmul") || !op.hasPureTensorSemantics() ||
            op.getNumDpsInputs() != 2)
          return;
        for (OpOperand *input : op.getDpsInputOperands())
          if (!getElementTypeOrSelf(input->get().getType()).isF32())
            return;
        Block &body = op.getRegion().front();
        for (OpOperand *input : op.getDpsInputOperands()) {
          Value value = input->get();
          Value &bf16 = rounded[value];
          if (!bf16) {
            OpBuilder b(op.getContext());
            if (Operation *def = value.getDefiningOp())
              b.setInsertionPointAfter(def);
            else
              b.setInsertionPointToStart(
                  cast<BlockArgument>(value).getOwner());
            bf16 = roundToBF16(b, value);
          }
          input->set(bf16);
          // The body reads the bf16 element and widens it (exactly).
          BlockArgument element =
              body.getArgument(input->getOperandNumber());
          element.setType(BFloat16Type::get(op.getContext()));
          OpBuilder b = OpBuilder::atBlockBegin(&body);
          Value wide = arith::ExtFOp::create(b, op.getLoc(), b.getF32Type(),
                                             element);
          element.replaceAllUsesExcept(wide, wide.getDefiningOp());
        }
      });
    });
  }
};

} // namespace
