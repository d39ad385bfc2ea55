//===- AutoMixedPrecision.cpp - products on 16-bit operands ---------------===//
//
// Matrix products dominate a training step's arithmetic and run on tensor
// cores only with 16-bit operands. Rounding just their operands to bf16 (or
// f16), and keeping the f32 accumulation, the f32 master weights and f32
// everything else, is the usual mixed precision of training frameworks;
// bf16 keeps f32's exponent range, f16 needs the loss scaling of
// kiln-train-step.
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

/// `value` (an f32 tensor) rounded to `element`, by a new elementwise op
/// after its definition.
Value roundTo(OpBuilder &b, Value value, FloatType element) {
  auto type = cast<RankedTensorType>(value.getType());
  Location loc = value.getLoc();
  auto rounded = RankedTensorType::get(type.getShape(), element);
  Value init = tensor::EmptyOp::create(b, loc, type.getShape(), element);
  AffineMap identity = b.getMultiDimIdentityMap(type.getRank());
  SmallVector<utils::IteratorType> parallel(type.getRank(),
                                            utils::IteratorType::parallel);
  auto round = linalg::GenericOp::create(
      b, loc, TypeRange{rounded}, ValueRange{value}, ValueRange{init},
      ArrayRef<AffineMap>{identity, identity}, parallel,
      [&](OpBuilder &nb, Location nloc, ValueRange args) {
        linalg::YieldOp::create(
            nb, nloc,
            ValueRange{arith::TruncFOp::create(nb, nloc, element, args[0])});
      });
  return round.getResult(0);
}

struct KilnAutoMixedPrecisionPass
    : kiln::impl::KilnAutoMixedPrecisionBase<KilnAutoMixedPrecisionPass> {
  using KilnAutoMixedPrecisionBase::KilnAutoMixedPrecisionBase;

  void runOnOperation() override {
    MLIRContext *context = &getContext();
    FloatType element;
    if (type == "bf16")
      element = BFloat16Type::get(context);
    else if (type == "f16")
      element = Float16Type::get(context);
    else {
      getOperation().emitError("kiln-amp: type must be bf16 or f16, not '")
          << type << "'";
      return signalPassFailure();
    }
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
          Value &narrow = rounded[value];
          if (!narrow) {
            OpBuilder b(op.getContext());
            if (Operation *def = value.getDefiningOp())
              b.setInsertionPointAfter(def);
            else
              b.setInsertionPointToStart(
                  cast<BlockArgument>(value).getOwner());
            narrow = roundTo(b, value, element);
          }
          input->set(narrow);
          // The body reads the narrow element and widens it (exactly).
          BlockArgument argument =
              body.getArgument(input->getOperandNumber());
          argument.setType(element);
          OpBuilder b = OpBuilder::atBlockBegin(&body);
          Value wide = arith::ExtFOp::create(b, op.getLoc(), b.getF32Type(),
                                             argument);
          argument.replaceAllUsesExcept(wide, wide.getDefiningOp());
        }
      });
    });
  }
};

} // namespace
