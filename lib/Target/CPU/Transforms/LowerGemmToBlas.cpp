//===- LowerGemmToBlas.cpp - matrix products as cblas_?gemm calls ---------===//

#include "kiln/Target/CPU/Passes.h"
#include "kiln/Transforms/Utils/Gemm.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

namespace kiln {
#define GEN_PASS_DEF_KILNLOWERGEMMTOBLAS
#include "kiln/Target/CPU/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {

// CBLAS enumerators.
constexpr int32_t kRowMajor = 101, kNoTrans = 111, kTrans = 112;

/// Declares `name` with the CBLAS gemm signature for `element`.
func::FuncOp declareGemm(ModuleOp module, StringRef name, Type element) {
  if (auto existing = module.lookupSymbol<func::FuncOp>(name))
    return existing;
  OpBuilder b(module.getBodyRegion());
  Type i32 = b.getI32Type();
  Type ptr = LLVM::LLVMPointerType::get(b.getContext());
  auto type = b.getFunctionType({i32, i32, i32, i32, i32, i32, element, ptr,
                                 i32, ptr, i32, element, ptr, i32},
                                {});
  auto function = func::FuncOp::create(b, module.getLoc(), name, type);
  function.setPrivate();
  return function;
}

/// A pointer to element `elementOffset` of `buffer`, counted from the
/// view's first element.
Value pointerTo(OpBuilder &b, Location loc, Value buffer, Value elementOffset,
                int64_t elementBytes) {
  // The aligned pointer is the allocation's: the view starts at its
  // layout's offset.
  std::optional<MatrixLayout> layout =
      matrixLayout(cast<MemRefType>(buffer.getType()));
  if (layout->offset != 0)
    elementOffset = arith::AddIOp::create(
        b, loc, elementOffset,
        arith::ConstantIndexOp::create(b, loc, layout->offset));
  Value base = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, buffer);
  Value bytes = arith::MulIOp::create(
      b, loc, elementOffset,
      arith::ConstantIndexOp::create(b, loc, elementBytes));
  Value address = arith::IndexCastOp::create(
      b, loc, b.getI64Type(), arith::AddIOp::create(b, loc, base, bytes));
  return LLVM::IntToPtrOp::create(
      b, loc, LLVM::LLVMPointerType::get(b.getContext()), address);
}

LogicalResult lowerGemm(linalg::GenericOp op, ModuleOp module) {
  std::optional<GemmDescription> described = describeGemm(op);
  if (!described)
    return failure();
  const GemmDescription &g = *described;
  Type element = cast<MemRefType>(g.out.getType()).getElementType();
  // CBLAS has no bias-gradient epilogue: such a product stays a loop nest.
  if (cast<MemRefType>(g.lhs.getType()).getElementType() != element ||
      g.biasGrad)
    return failure();
  StringRef name;
  if (element.isF32())
    name = "cblas_sgemm";
  else if (element.isF64())
    name = "cblas_dgemm";
  else
    return failure();
  bool transLhs = g.transposeLhs, transRhs = g.transposeRhs;
  int64_t m = g.m, n = g.n, k = g.k, batch = g.batch;
  int64_t elementBytes = element.getIntOrFloatBitWidth() / 8;
  // The contraction accumulates into C. When C was just zero-filled (the
  // usual init), beta is 0 and the fill is dead; otherwise beta is 1.
  linalg::FillOp deadFill = g.zeroFill;

  func::FuncOp gemm = declareGemm(module, name, element);
  OpBuilder b(op);
  Location loc = op.getLoc();
  auto i32 = [&](int64_t v) {
    return arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(v))
        .getResult();
  };
  Value lhs = g.lhs, rhs = g.rhs, out = g.out;
  auto emitCall = [&](OpBuilder &nb, Value batchIndex) {
    auto offset = [&](int64_t matrixElements) {
      return arith::MulIOp::create(
          nb, loc, batchIndex,
          arith::ConstantIndexOp::create(nb, loc, matrixElements));
    };
    Value a = pointerTo(nb, loc, lhs, offset(g.batchStride[0]), elementBytes);
    Value bm = pointerTo(nb, loc, rhs, offset(g.batchStride[1]), elementBytes);
    Value c = pointerTo(nb, loc, out, offset(g.batchStride[2]), elementBytes);
    Value one =
        arith::ConstantOp::create(nb, loc, nb.getFloatAttr(element, 1.0));
    Value beta = arith::ConstantOp::create(
        nb, loc, nb.getFloatAttr(element, deadFill || g.overwrite ? 0.0 : 1.0));
    func::CallOp::create(nb, loc, gemm,
                         ValueRange{i32(kRowMajor),
                                    i32(transLhs ? kTrans : kNoTrans),
                                    i32(transRhs ? kTrans : kNoTrans), i32(m),
                                    i32(n), i32(k), one, a, i32(g.ld[0]), bm,
                                    i32(g.ld[1]), beta, c, i32(g.ld[2])});
  };
  if (batch == 1) {
    emitCall(b, arith::ConstantIndexOp::create(b, loc, 0));
  } else {
    Value lb = arith::ConstantIndexOp::create(b, loc, 0);
    Value ub = arith::ConstantIndexOp::create(b, loc, batch);
    Value step = arith::ConstantIndexOp::create(b, loc, 1);
    scf::ForOp::create(b, loc, lb, ub, step, ValueRange{},
                       [&](OpBuilder &nb, Location, Value iv, ValueRange) {
                         emitCall(nb, iv);
                         scf::YieldOp::create(nb, loc);
                       });
  }
  if (deadFill)
    deadFill.erase();
  op.erase();
  return success();
}

struct KilnLowerGemmToBlasPass
    : kiln::impl::KilnLowerGemmToBlasBase<KilnLowerGemmToBlasPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<linalg::GenericOp> gemms;
    module.walk([&](linalg::GenericOp op) {
      if (op->hasAttr("kiln.matmul"))
        gemms.push_back(op);
    });
    for (linalg::GenericOp op : gemms)
      (void)lowerGemm(op, module);
  }
};

} // namespace
