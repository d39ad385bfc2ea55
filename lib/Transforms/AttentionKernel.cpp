//===- AttentionKernel.cpp - kiln.attention as one online-softmax loop ----===//
//
// Expanded into its chain (a batched product, the scale and mask, a
// softmax, a second product), attention stores the [B..., Sq, Sk] scores
// several times over and reads them back as many: on a GPU, elementwise
// kernels over matrices far larger than the activations around them. Here
// each query row is one point of an scf.forall that never stores a score:
// it runs over the keys keeping the running maximum m, the sum l of
// exp(s - m) and the weighted sum of value rows, rescaling both by
// exp(m_old - m_new) when the maximum grows, and divides once at the end.
//
//===----------------------------------------------------------------------===//

#include "kiln/KilnOps.h"
#include "kiln/Transforms/Passes.h"

#include "mlir/IR/Matchers.h"

#include <limits>

namespace kiln {
#define GEN_PASS_DEF_KILNATTENTIONKERNEL
#include "kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {

/// Whether `mask` is a constant that keeps exactly the keys up to each
/// query's position (0 for key <= query, -inf after) in every batch, over
/// square scores: causal attention, which needs no mask reads.
bool isCausalMask(Value mask, int64_t queries, int64_t keys) {
  DenseElementsAttr values;
  if (!mask || queries != keys || !matchPattern(mask, m_Constant(&values)) ||
      values.isSplat())
    return false;
  auto type = cast<RankedTensorType>(mask.getType());
  if (type.getRank() < 2 || type.getDimSize(type.getRank() - 1) != keys ||
      type.getDimSize(type.getRank() - 2) != queries)
    return false;
  int64_t index = 0;
  for (APFloat value : values.getValues<APFloat>()) {
    int64_t key = index % keys, query = (index / keys) % queries;
    ++index;
    bool dropped = value.isInfinity() && value.isNegative();
    if (key > query ? !dropped : !value.isZero())
      return false;
  }
  return true;
}

/// Builds the loop that replaces one kiln.attention.
class KernelBuilder {
public:
  /// `narrow`: the type the query, key and value are rounded to as they
  /// are read (null: none).
  KernelBuilder(AttentionOp op, bool causal, FloatType narrow)
      : op(op), causal(causal), narrow(narrow), b(op), loc(op.getLoc()) {}

  Value build() {
    auto result = cast<RankedTensorType>(op.getType());
    ArrayRef<int64_t> shape = result.getShape();
    int64_t rank = shape.size();
    // One point per batch index and query row.
    SmallVector<OpFoldResult> counts;
    for (int64_t size : shape.drop_back())
      counts.push_back(b.getIndexAttr(size));
    Value empty = tensor::EmptyOp::create(b, loc, shape, result.getElementType());
    auto loop = scf::ForallOp::create(b, loc, counts, ValueRange{empty},
                                      /*mapping=*/std::nullopt);
    Block *body = loop.getBody();
    b.setInsertionPointToStart(body);
    SmallVector<Value> point(body->getArguments().take_front(rank - 1));
    Value output = body->getArguments().back();

    SmallVector<Value> row = rowOfSums(point);
    // The row goes into its slice of the output.
    int64_t width = shape.back();
    SmallVector<OpFoldResult> offsets(point.begin(), point.end()),
        sizes(rank - 1, b.getIndexAttr(1)), strides(rank, b.getIndexAttr(1));
    offsets.push_back(b.getIndexAttr(0));
    sizes.push_back(b.getIndexAttr(width));
    auto rowType = RankedTensorType::get({width}, result.getElementType());
    Value slice = tensor::ExtractSliceOp::create(b, loc, rowType, output,
                                                 offsets, sizes, strides);
    for (auto [e, value] : llvm::enumerate(row))
      slice = tensor::InsertOp::create(b, loc, value, slice, index(e));
    b.setInsertionPointToStart(loop.getTerminator().getBody());
    tensor::ParallelInsertSliceOp::create(b, loc, slice, output, offsets,
                                          sizes, strides);
    return loop.getResult(0);
  }

private:
  Value index(int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); }
  Value f32(double v) {
    return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(v));
  }
  Value load(Value tensor, ArrayRef<Value> indices) {
    return tensor::ExtractOp::create(b, loc, tensor, indices);
  }
  /// An element of the query, key or value, rounded under mixed precision.
  Value loadOperand(Value tensor, ArrayRef<Value> indices) {
    return rounded(load(tensor, indices));
  }
  /// `value` rounded to the mixed-precision type (if any) and back.
  Value rounded(Value value) {
    if (!narrow)
      return value;
    Value narrowed = arith::TruncFOp::create(b, loc, narrow, value);
    return arith::ExtFOp::create(b, loc, b.getF32Type(), narrowed);
  }

  /// The output row at `point` (batch indices, then the query row).
  SmallVector<Value> rowOfSums(ArrayRef<Value> point) {
    Value query = op.getQuery(), value = op.getValue();
    int64_t headSize = op.getQuery().getType().getShape().back();
    int64_t valueSize = op.getValue().getType().getShape().back();
    int64_t keys = op.getKey().getType().getShape().drop_back().back();
    ArrayRef<Value> batch = point.drop_back();
    Value queryRow = point.back();

    // The query row, with the scale applied once instead of to each score.
    Value scale = f32(op.getScale().convertToDouble());
    SmallVector<Value> q;
    SmallVector<Value> at(batch.begin(), batch.end());
    at.append({queryRow, Value()});
    for (int64_t d = 0; d < headSize; ++d) {
      at.back() = index(d);
      q.push_back(arith::MulFOp::create(b, loc, loadOperand(query, at), scale));
    }

    Value end = causal ? arith::AddIOp::create(b, loc, queryRow, index(1))
                             .getResult()
                       : index(keys);
    auto scoreOf = [&](Value keyRow) {
      return score(batch, queryRow, keyRow, q);
    };

    // First pass: the maximum score m and the sum l of exp(score - m), both
    // updated as each key comes (l rescaled by exp(m_old - m_new) when the
    // maximum grows).
    Value negInf = f32(-std::numeric_limits<double>::infinity());
    Value zero = f32(0.0);
    scf::ForOp statistics = keyLoop(
        end, {negInf, zero}, [&](Value keyRow, ValueRange carried) {
          Value s = scoreOf(keyRow);
          Value grown = arith::MaximumFOp::create(b, loc, carried[0], s);
          Value shift = finiteShift(grown);
          Value rescale = math::ExpOp::create(
              b, loc, arith::SubFOp::create(b, loc, carried[0], shift));
          Value weight = math::ExpOp::create(
              b, loc, arith::SubFOp::create(b, loc, s, shift));
          return SmallVector<Value>{
              grown, math::FmaOp::create(b, loc, carried[1], rescale, weight)};
        });
    Value shift = finiteShift(statistics.getResult(0));
    Value sum = statistics.getResult(1);

    // Second pass: each key's probability exp(score - m) / l, as the
    // softmax computes it (and rounded as a product's operand under mixed
    // precision), weights its value row.
    SmallVector<Value> initial(valueSize, zero);
    scf::ForOp weighted =
        keyLoop(end, initial, [&](Value keyRow, ValueRange carried) {
          Value probability = arith::DivFOp::create(
              b, loc,
              math::ExpOp::create(
                  b, loc, arith::SubFOp::create(b, loc, scoreOf(keyRow), shift)),
              sum);
          probability = rounded(probability);
          SmallVector<Value> at(batch.begin(), batch.end());
          at.append({keyRow, Value()});
          SmallVector<Value> next;
          for (int64_t e = 0; e < valueSize; ++e) {
            at.back() = index(e);
            next.push_back(math::FmaOp::create(
                b, loc, probability, loadOperand(value, at), carried[e]));
          }
          return next;
        });
    return SmallVector<Value>(weighted.getResults());
  }

  /// A loop over the keys before `end` carrying `initial`; `body` returns
  /// what one key makes of the carried values.
  scf::ForOp
  keyLoop(Value end, ArrayRef<Value> initial,
          function_ref<SmallVector<Value>(Value, ValueRange)> body) {
    return scf::ForOp::create(
        b, loc, index(0), end, index(1), initial,
        [&](OpBuilder &nested, Location, Value keyRow, ValueRange carried) {
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPoint(nested.getInsertionBlock(),
                              nested.getInsertionPoint());
          scf::YieldOp::create(b, loc, body(keyRow, carried));
        });
  }

  /// `maximum`, or 0 while every score so far is -inf (masked): nothing has
  /// weight yet, and shifting by 0 keeps exp(-inf - -inf) from making NaN.
  Value finiteShift(Value maximum) {
    Value none = arith::CmpFOp::create(
        b, loc, arith::CmpFPredicate::OEQ, maximum,
        f32(-std::numeric_limits<double>::infinity()));
    return arith::SelectOp::create(b, loc, none, f32(0.0), maximum);
  }

  /// The scaled and masked score of the query row and `keyRow`.
  Value score(ArrayRef<Value> batch, Value queryRow, Value keyRow,
              ArrayRef<Value> q) {
    SmallVector<Value> at(batch.begin(), batch.end());
    at.append({keyRow, Value()});
    Value sum;
    for (auto [d, qd] : llvm::enumerate(q)) {
      at.back() = index(d);
      Value kd = loadOperand(op.getKey(), at);
      sum = sum ? math::FmaOp::create(b, loc, qd, kd, sum).getResult()
                : arith::MulFOp::create(b, loc, qd, kd).getResult();
    }
    if (Value mask = op.getMask(); mask && !causal)
      sum = arith::AddFOp::create(b, loc, sum,
                                  maskAt(mask, batch, queryRow, keyRow));
    return sum;
  }

  /// The mask element for this score, through the mask's broadcast: a
  /// size-1 dimension reads index 0.
  Value maskAt(Value mask, ArrayRef<Value> batch, Value queryRow,
               Value keyRow) {
    SmallVector<Value> scoreIndex(batch.begin(), batch.end());
    scoreIndex.append({queryRow, keyRow});
    auto type = cast<RankedTensorType>(mask.getType());
    int64_t offset = scoreIndex.size() - type.getRank();
    SmallVector<Value> at;
    for (auto [d, size] : llvm::enumerate(type.getShape()))
      at.push_back(size == 1 ? index(0) : scoreIndex[d + offset]);
    return load(mask, at);
  }

  AttentionOp op;
  bool causal;
  FloatType narrow;
  OpBuilder b;
  Location loc;
};

struct KilnAttentionKernelPass
    : kiln::impl::KilnAttentionKernelBase<KilnAttentionKernelPass> {
  using KilnAttentionKernelBase::KilnAttentionKernelBase;

  void runOnOperation() override {
    FloatType narrow;
    if (amp == "bf16")
      narrow = BFloat16Type::get(&getContext());
    else if (amp == "f16")
      narrow = Float16Type::get(&getContext());
    else if (!amp.empty()) {
      getOperation().emitError("kiln-attention-kernel: amp must be bf16, f16 "
                               "or empty, not '")
          << amp << "'";
      return signalPassFailure();
    }
    SmallVector<AttentionOp> ops;
    getOperation().walk([&](AttentionOp op) { ops.push_back(op); });
    for (AttentionOp op : ops) {
      auto query = op.getQuery().getType(), key = op.getKey().getType(),
           value = op.getValue().getType();
      auto isF32 = [](Value v) {
        auto type = cast<RankedTensorType>(v.getType());
        return type.hasStaticShape() && type.getElementType().isF32();
      };
      if (!isF32(op.getQuery()) || !isF32(op.getKey()) ||
          !isF32(op.getValue()) || (op.getMask() && !isF32(op.getMask())) ||
          query.getRank() < 2 || query.getShape().back() < 1 ||
          query.getShape().back() > maxHeadSize ||
          value.getShape().back() > maxHeadSize)
        continue;
      int64_t queries = query.getShape().drop_back().back();
      int64_t keys = key.getShape().drop_back().back();
      bool causal = isCausalMask(op.getMask(), queries, keys);
      Value replacement = KernelBuilder(op, causal, narrow).build();
      op.replaceAllUsesWith(replacement);
      op.erase();
    }
  }
};

} // namespace
