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

/// Products of fewer multiply-adds (batch * m * n * k) than this run as one
/// call on the calling thread: about 20 microseconds of one core's work,
/// where sharing them costs about as much as it saves (an OpenMP team's
/// wake-up is a few microseconds).
constexpr int64_t kMinPartitionedWork = int64_t(1) << 20;
/// The fewest rows (or columns) of C one part of a shared product takes, so
/// that each call still fills OpenBLAS's register blocks.
constexpr int64_t kMinPartExtent = 32;

/// Declares the OpenMP runtime's omp_get_max_threads: the size of the team
/// the next parallel loop runs on.
func::FuncOp declareMaxThreads(ModuleOp module) {
  StringRef name = "omp_get_max_threads";
  if (auto existing = module.lookupSymbol<func::FuncOp>(name))
    return existing;
  OpBuilder b(module.getBodyRegion());
  auto function = func::FuncOp::create(b, module.getLoc(), name,
                                       b.getFunctionType({}, {b.getI32Type()}));
  function.setPrivate();
  return function;
}

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
  auto index = [&](OpBuilder &nb, int64_t v) {
    return arith::ConstantIndexOp::create(nb, loc, v).getResult();
  };
  auto i32 = [&](OpBuilder &nb, int64_t v) {
    return arith::ConstantOp::create(nb, loc, nb.getI32IntegerAttr(v))
        .getResult();
  };
  auto toI32 = [&](OpBuilder &nb, Value v) {
    return arith::IndexCastOp::create(nb, loc, nb.getI32Type(), v).getResult();
  };
  Value lhs = g.lhs, rhs = g.rhs, out = g.out;
  // Which of op(A)'s rows or op(B)'s columns a part takes: the larger of m
  // and n is split, and a part starts `first` rows (or columns) in.
  bool splitRows = m >= n;
  // C[b][first.., :] = op(A)[b][first.., :] op(B)[b] (rows), or
  // C[b][:, first..] = op(A)[b] op(B)[b][:, first..] (columns), `count` of
  // them: A's rows start `first` elements in when A is stored transposed
  // (k x m), `first` rows in otherwise; B's columns likewise.
  auto emitCall = [&](OpBuilder &nb, Value batchIndex, Value first,
                      Value count) {
    auto offset = [&](int operand, int64_t firstStride) {
      Value at = arith::MulIOp::create(nb, loc, batchIndex,
                                       index(nb, g.batchStride[operand]));
      if (first)
        at = arith::AddIOp::create(
            nb, loc, at,
            arith::MulIOp::create(nb, loc, first, index(nb, firstStride)));
      return at;
    };
    Value a = pointerTo(nb, loc, lhs,
                        offset(0, !splitRows ? 0
                                  : transLhs ? 1
                                             : g.ld[0]),
                        elementBytes);
    Value bm = pointerTo(nb, loc, rhs,
                         offset(1, splitRows  ? 0
                                   : transRhs ? g.ld[1]
                                              : 1),
                         elementBytes);
    Value c = pointerTo(nb, loc, out, offset(2, splitRows ? g.ld[2] : 1),
                        elementBytes);
    Value one =
        arith::ConstantOp::create(nb, loc, nb.getFloatAttr(element, 1.0));
    Value beta = arith::ConstantOp::create(
        nb, loc, nb.getFloatAttr(element, deadFill || g.overwrite ? 0.0 : 1.0));
    // Operands are made in argument order (a braced list evaluates left to
    // right).
    SmallVector<Value> arguments{
        i32(nb, kRowMajor),
        i32(nb, transLhs ? kTrans : kNoTrans),
        i32(nb, transRhs ? kTrans : kNoTrans),
        first && splitRows ? toI32(nb, count) : i32(nb, m),
        first && !splitRows ? toI32(nb, count) : i32(nb, n),
        i32(nb, k),
        one,
        a,
        i32(nb, g.ld[0]),
        bm,
        i32(nb, g.ld[1]),
        beta,
        c,
        i32(nb, g.ld[2])};
    func::CallOp::create(nb, loc, gemm, arguments);
  };
  if (batch * m * n * k < kMinPartitionedWork) {
    // Too small to share: one call per batch element, on this thread.
    if (batch == 1) {
      emitCall(b, index(b, 0), nullptr, nullptr);
    } else {
      scf::ForOp::create(b, loc, index(b, 0), index(b, batch), index(b, 1),
                         ValueRange{},
                         [&](OpBuilder &nb, Location, Value iv, ValueRange) {
                           emitCall(nb, iv, nullptr, nullptr);
                           scf::YieldOp::create(nb, loc);
                         });
    }
  } else {
    // The products share the threads of the generated loops: OpenBLAS runs
    // single-threaded (the runtime sets it so), and the batch elements, each
    // cut into `parts` row (or column) blocks, are the iterations of one
    // parallel loop, which becomes an OpenMP worksharing loop. `parts` is
    // decided at run time from the team's size: at least one block per
    // thread, no block under kMinPartExtent rows (or columns).
    int64_t extent = splitRows ? m : n;
    Value threads = arith::IndexCastOp::create(
        b, loc, b.getIndexType(),
        func::CallOp::create(b, loc, declareMaxThreads(module), ValueRange{})
            .getResult(0));
    Value parts = arith::CeilDivSIOp::create(b, loc, threads, index(b, batch));
    parts = arith::MaxSIOp::create(b, loc, parts, index(b, 1));
    parts = arith::MinSIOp::create(
        b, loc, parts, index(b, std::max<int64_t>(1, extent / kMinPartExtent)));
    Value perPart = arith::CeilDivSIOp::create(b, loc, index(b, extent), parts);
    // As many parts as blocks of perPart cover: none is empty. (The loop's
    // body stays one block: scf-to-openmp puts it in a memref.alloca_scope,
    // which a call keeps from being inlined, and such a scope cannot hold
    // the branches an scf.if would become.)
    parts = arith::CeilDivSIOp::create(b, loc, index(b, extent), perPart);
    scf::ParallelOp::create(
        b, loc, ValueRange{index(b, 0), index(b, 0)},
        ValueRange{index(b, batch), parts},
        ValueRange{index(b, 1), index(b, 1)},
        [&](OpBuilder &nb, Location, ValueRange ivs) {
          Value first = arith::MulIOp::create(nb, loc, ivs[1], perPart);
          Value count = arith::MinSIOp::create(
              nb, loc, perPart,
              arith::SubIOp::create(nb, loc, index(nb, extent), first));
          emitCall(nb, ivs[0], first, count);
        });
  }
  // What kiln-profile-marks reports for the product: the op just made is
  // the last before `op`.
  Operation *lowered = op->getPrevNode();
  bool accumulates = !deadFill && !g.overwrite;
  auto elements = [&](int operand, int64_t rows, int64_t columns) {
    return (g.batchStride[operand] == 0 ? 1 : batch) * rows * columns;
  };
  int64_t read = (elements(0, m, k) + elements(1, k, n) +
                  (accumulates ? batch * m * n : 0)) *
                 elementBytes;
  std::string what;
  llvm::raw_string_ostream os(what);
  if (batch > 1)
    os << batch << " x ";
  os << name.drop_front(strlen("cblas_")) << " " << m << "x" << n << "x" << k
     << (transLhs ? " A^T" : "") << (transRhs ? " B^T" : "")
     << (accumulates ? " C+=" : "");
  Builder attrs(op.getContext());
  lowered->setAttr(
      "kiln.cost",
      attrs.getDictionaryAttr({
          attrs.getNamedAttr("kind", attrs.getStringAttr("gemm")),
          attrs.getNamedAttr("what", attrs.getStringAttr(what)),
          attrs.getNamedAttr("flops",
                             attrs.getI64IntegerAttr(2 * batch * m * n * k)),
          attrs.getNamedAttr("read", attrs.getI64IntegerAttr(read)),
          attrs.getNamedAttr(
              "written", attrs.getI64IntegerAttr(batch * m * n * elementBytes)),
      }));
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
