//===- FlashAttention.cpp - attention for the tensor-core kernels ---------===//
//
// kiln.attention becomes kiln.flash_attention, and the kiln.attention_grad
// of its result kiln.flash_attention_grad, where the CUDA target's
// tensor-core kernels can compute them: 16-bit [B, H, S, D] operands with a
// head size they have, and a mask they can read (or a causal one they need
// not read). With `cudnn`, those whose gradient fills no scores go to
// cuDNN's fused attention instead, which stores its output and gradients in
// 16 bits, adds the mask, and takes grouped key and value heads. The
// forward's statistics go to the gradient, which then needs no pass over the
// keys to find each row's maximum and sum.
//
//===----------------------------------------------------------------------===//

#include "kiln/KilnDialect.h"
#include "kiln/KilnOps.h"
#include "kiln/Target/CUDA/Passes.h"
#include "kiln/Transforms/Attention.h"
#include "kiln/Transforms/Utils/LibraryOpBufferization.h"
#include "kiln/Transforms/Utils/NarrowType.h"

#include "mlir/IR/Matchers.h"

namespace kiln {
#define GEN_PASS_DEF_KILNFLASHATTENTION
#include "kiln/Target/CUDA/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {

/// The kernels' grid has a block row per head (CUDA's limit on grid.y);
/// the runtime takes at most 2^30 queries or keys.
constexpr int64_t kMaxHeads = 65535;
constexpr int64_t kMaxRows = int64_t(1) << 30;

/// How the kernels take one attention: whether it is causal (and the
/// parameters that tells from, isCausalMask's `fixed`), and the shape of
/// its mask as [B or 1, H or 1, Sq or 1, Sk] (empty: no mask read).
struct Plan {
  bool causal = false;
  SmallVector<Operation *> fixed;
  SmallVector<int64_t, 4> maskShape;
};

std::optional<Plan> planFor(Value query, Value key, Value value, Value mask) {
  auto q = cast<RankedTensorType>(query.getType());
  auto k = cast<RankedTensorType>(key.getType());
  auto v = cast<RankedTensorType>(value.getType());
  if (!q.getElementType().isF32() || q.getRank() != 4 || k.getRank() != 4 ||
      v.getRank() != 4 || k.getElementType() != q.getElementType() ||
      v.getElementType() != q.getElementType())
    return std::nullopt;
  int64_t b = q.getDimSize(0), h = q.getDimSize(1), sq = q.getDimSize(2),
          d = q.getDimSize(3), sk = k.getDimSize(2);
  if (b < 1 || h < 1 || sq < 1 || sk < 1 ||
      (d != 16 && d != 32 && d != 64 && d != 128) || v.getDimSize(3) != d ||
      b * h > kMaxHeads || sq > kMaxRows || sk > kMaxRows)
    return std::nullopt;
  Plan plan;
  if (!mask)
    return plan;
  if (isCausalMask(mask, sq, sk, plan.fixed)) {
    plan.causal = true;
    return plan;
  }
  auto m = cast<RankedTensorType>(mask.getType());
  // The kernels read a row of the mask's keys contiguously, from a buffer
  // the runtime knows: a constant (a global) is no such buffer, and the
  // loops read it in their kernels instead.
  if (!m.getElementType().isF32() || m.getRank() < 1 ||
      m.getDimSize(m.getRank() - 1) != sk || matchPattern(mask, m_Constant()))
    return std::nullopt;
  plan.maskShape.assign(4 - m.getRank(), 1);
  llvm::append_range(plan.maskShape, m.getShape());
  return plan;
}

/// Where `repeated` ([B, H, S, D]) repeats each head of a [B, Hk, S, D]
/// tensor H / Hk times in a row, as grouped-query attention is imported
/// (reshape to [B, Hk, 1, S, D], broadcast to [B, Hk, G, S, D], reshape to
/// [B, H, S, D]): the 5-D tensor before the broadcast, and G; else null.
std::pair<Value, int64_t> repeatedHeads(Value repeated) {
  auto merge = repeated.getDefiningOp<ReshapeOp>();
  if (!merge)
    return {};
  auto broadcast = merge.getInput().getDefiningOp<BroadcastOp>();
  if (!broadcast)
    return {};
  auto full = cast<RankedTensorType>(repeated.getType());
  auto grouped = cast<RankedTensorType>(broadcast.getType());
  auto single = cast<RankedTensorType>(broadcast.getInput().getType());
  if (full.getRank() != 4 || grouped.getRank() != 5 || single.getRank() != 5)
    return {};
  int64_t b = full.getDimSize(0), h = full.getDimSize(1),
          s = full.getDimSize(2), d = full.getDimSize(3),
          hk = grouped.getDimSize(1), g = grouped.getDimSize(2);
  if (grouped.getShape() != ArrayRef<int64_t>{b, hk, g, s, d} ||
      single.getShape() != ArrayRef<int64_t>{b, hk, 1, s, d} || g < 2 ||
      hk * g != h)
    return {};
  return {broadcast.getInput(), g};
}

/// The op that sums a gradient of repeated heads back to the heads they
/// repeat, `groups` each, where it is the gradient's only reader (through
/// a reshape to [B, Hk, G, S, D] and nothing else): autodiff's gradient of
/// repeatedHeads's broadcast. Null otherwise.
ReduceSumOp groupSum(Value grad, int64_t groups) {
  if (!grad.hasOneUse())
    return nullptr;
  auto split = dyn_cast<ReshapeOp>(*grad.getUsers().begin());
  if (!split || !split.getResult().hasOneUse())
    return nullptr;
  auto sum = dyn_cast<ReduceSumOp>(*split.getResult().getUsers().begin());
  auto full = cast<RankedTensorType>(grad.getType());
  auto type = cast<RankedTensorType>(split.getType());
  int64_t h = full.getDimSize(1);
  if (!sum || type.getRank() != 5 ||
      type.getShape() != ArrayRef<int64_t>{full.getDimSize(0), h / groups,
                                           groups, full.getDimSize(2),
                                           full.getDimSize(3)} ||
      sum.getDimensions() != ArrayRef<int64_t>{2})
    return nullptr;
  return sum;
}

struct KilnFlashAttentionPass
    : kiln::impl::KilnFlashAttentionBase<KilnFlashAttentionPass> {
  using KilnFlashAttentionBase::KilnFlashAttentionBase;

  void runOnOperation() override {
    FloatType narrow = narrowFloatType(&getContext(), amp);
    if (!narrow) {
      getOperation().emitError("kiln-flash-attention: amp must be bf16 or "
                               "f16, not '")
          << amp << "'";
      return signalPassFailure();
    }
    SmallVector<AttentionOp> attentions;
    getOperation().walk([&](AttentionOp op) { attentions.push_back(op); });
    for (AttentionOp attention : attentions)
      rewrite(attention, narrow);
  }

  void rewrite(AttentionOp attention, FloatType narrow) {
    std::optional<Plan> plan =
        planFor(attention.getQuery(), attention.getKey(), attention.getValue(),
                attention.getMask());
    if (!plan)
      return;
    // Its gradients, where they come after it in its block (as autodiff
    // puts them); any other stays for the loops, which need no statistics.
    SmallVector<AttentionGradOp> grads;
    for (Operation *user : attention->getUsers())
      if (auto grad = dyn_cast<AttentionGradOp>(user))
        if (grad.getOut() == attention.getResult() &&
            grad.getQuery() == attention.getQuery() &&
            grad.getKey() == attention.getKey() &&
            grad.getValue() == attention.getValue() &&
            grad.getMask() == attention.getMask() &&
            grad.getScale() == attention.getScale() &&
            grad->getBlock() == attention->getBlock() &&
            attention->isBeforeInBlock(grad) &&
            !llvm::is_contained(grads, grad))
          grads.push_back(grad);
    fixParameters(plan->fixed);
    OpBuilder b(attention);
    Location loc = attention.getLoc();
    auto rounded = [&](Value v) -> Value {
      auto type = cast<RankedTensorType>(v.getType());
      return CastOp::create(b, loc, type.clone(narrow), v);
    };
    Value mask;
    if (!plan->maskShape.empty()) {
      mask = attention.getMask();
      auto type = cast<RankedTensorType>(mask.getType());
      if (type.getShape() != ArrayRef(plan->maskShape))
        mask = ReshapeOp::create(b, loc, type.clone(plan->maskShape), mask);
    }
    // cuDNN adds the mask to the scores; a gradient that fills the scores
    // of a mask read (masked_fill, causal_fill) is the runtime kernels'.
    bool fills = mask && (attention.getMaskedFill() ||
                          llvm::any_of(grads, [](AttentionGradOp grad) {
                            return grad.getMaskedFill() || grad.getCausalFill();
                          }));
    bool onCudnn = cudnn && !fills;
    if (onCudnn && mask) {
      // At least -2^100, in whatever units cuDNN adds it (see the pass).
      auto type = cast<RankedTensorType>(mask.getType());
      APFloat least(kMaskedFillAtMost);
      bool lost;
      least.convert(APFloat::IEEEsingle(), APFloat::rmNearestTiesToEven, &lost);
      Value floor =
          ConstantOp::create(b, loc, DenseElementsAttr::get(type, least));
      mask = MaxOp::create(b, loc, mask, floor);
    }
    // cuDNN reads grouped heads as they are: the key and value before
    // their heads were repeated, where each gradient's sum over the groups
    // can take cuDNN's gradient in its place.
    Value key = attention.getKey(), value = attention.getValue();
    SmallVector<std::pair<ReduceSumOp, ReduceSumOp>> sums;
    if (onCudnn) {
      auto [keySource, groups] = repeatedHeads(key);
      auto [valueSource, valueGroups] = repeatedHeads(value);
      bool grouped = keySource && valueSource && groups == valueGroups;
      for (AttentionGradOp grad : grads) {
        if (!grouped)
          break;
        sums.emplace_back(groupSum(grad.getResult(1), groups),
                          groupSum(grad.getResult(2), groups));
        grouped = sums.back().first && sums.back().second;
      }
      if (grouped) {
        auto merged = [&](Value v) -> Value {
          auto type = cast<RankedTensorType>(v.getType());
          SmallVector<int64_t> shape(type.getShape());
          shape.erase(shape.begin() + 2);
          return ReshapeOp::create(b, loc, type.clone(shape), v);
        };
        key = merged(keySource);
        value = merged(valueSource);
      } else {
        sums.clear();
      }
    }
    Value q = rounded(attention.getQuery()), k = rounded(key),
          v = rounded(value);
    auto queryType = cast<RankedTensorType>(attention.getQuery().getType());
    auto keyType = cast<RankedTensorType>(key.getType());
    // Two statistics per query row: the softmax's shift and its sum.
    SmallVector<int64_t> statsShape(queryType.getShape().drop_back());
    statsShape.push_back(2);
    auto statsType = queryType.clone(statsShape);
    FloatAttr scale = attention.getScaleAttr();
    UnitAttr causal = plan->causal ? b.getUnitAttr() : nullptr;
    // cuDNN writes its output and gradients in the 16-bit type: f32
    // readers read them widened.
    UnitAttr cudnnAttr = onCudnn ? b.getUnitAttr() : nullptr;
    auto stored = [&](RankedTensorType type) {
      return onCudnn ? type.clone(narrow) : type;
    };
    auto widened = [&](OpBuilder &at, Value v) -> Value {
      if (!onCudnn)
        return v;
      auto type = cast<RankedTensorType>(v.getType());
      return CastOp::create(at, v.getLoc(), type.clone(at.getF32Type()), v);
    };
    auto flash = FlashAttentionOp::create(
        b, loc, TypeRange{stored(queryType), statsType}, q, k, v, mask,
        ValueRange{}, scale, causal, cudnnAttr);
    Value out = flash.getResults()[0], stats = flash.getResults()[1];

    for (auto [index, grad] : llvm::enumerate(grads)) {
      b.setInsertionPoint(grad);
      // On cuDNN the output's gradient is read in 16 bits too; a
      // causal_fill without a mask is causal (every row keeps its
      // diagonal, so no row fills all its scores).
      Value outGrad = onCudnn ? rounded(grad.getGrad()) : grad.getGrad();
      auto flashGrad = FlashAttentionGradOp::create(
          b, grad.getLoc(),
          TypeRange{stored(queryType), stored(keyType), stored(keyType),
                    queryType.clone(queryType.getShape().drop_back())},
          q, k, v, out, outGrad, stats, mask, ValueRange{}, scale, causal,
          mask ? grad.getMaskedFillAttr() : nullptr,
          onCudnn ? nullptr : grad.getCausalFillAttr(), cudnnAttr);
      b.setInsertionPointAfter(flashGrad);
      grad.getResult(0).replaceAllUsesWith(widened(b, flashGrad.getResult(0)));
      for (unsigned i = 1; i < 3; ++i) {
        Value result = widened(b, flashGrad.getResult(i));
        if (sums.empty()) {
          grad.getResult(i).replaceAllUsesWith(result);
          continue;
        }
        // The group's sum becomes cuDNN's gradient (reshaped where the
        // sum keeps its dimension).
        ReduceSumOp sum = i == 1 ? sums[index].first : sums[index].second;
        auto sumType = cast<RankedTensorType>(sum.getType());
        if (sumType != result.getType())
          result = ReshapeOp::create(b, sum.getLoc(), sumType, result);
        sum.getResult().replaceAllUsesWith(result);
        Operation *split = sum.getInput().getDefiningOp();
        sum.erase();
        split->erase();
      }
      grad.erase();
    }
    b.setInsertionPointAfter(flash);
    attention.replaceAllUsesWith(widened(b, out));
    attention.erase();
  }
};

} // namespace

namespace kiln {

/// The buffer forms LibraryOpBufferization builds.
void createBufferForm(OpBuilder &b, Location loc, FlashAttentionOp op,
                      llvm::function_ref<Value(Value)> mapped,
                      ValueRange outputs) {
  FlashAttentionOp::create(b, loc, TypeRange{}, mapped(op.getQuery()),
                           mapped(op.getKey()), mapped(op.getValue()),
                           mapped(op.getMask()), outputs, op.getScaleAttr(),
                           op.getCausalAttr(), op.getCudnnAttr());
}

void createBufferForm(OpBuilder &b, Location loc, FlashAttentionGradOp op,
                      llvm::function_ref<Value(Value)> mapped,
                      ValueRange outputs) {
  FlashAttentionGradOp::create(
      b, loc, TypeRange{}, mapped(op.getQuery()), mapped(op.getKey()),
      mapped(op.getValue()), mapped(op.getOut()), mapped(op.getGrad()),
      mapped(op.getStats()), mapped(op.getMask()), outputs, op.getScaleAttr(),
      op.getCausalAttr(), op.getMaskedFillAttr(), op.getCausalFillAttr(),
      op.getCudnnAttr());
}

} // namespace kiln

void kiln::registerFlashAttentionBufferization(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *context, KilnDialect *) {
    FlashAttentionOp::attachInterface<LibraryOpBufferization<FlashAttentionOp>>(
        *context);
    FlashAttentionGradOp::attachInterface<
        LibraryOpBufferization<FlashAttentionGradOp>>(*context);
  });
}
