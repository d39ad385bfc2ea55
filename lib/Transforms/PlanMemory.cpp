//===- PlanMemory.cpp - one arena for every transient buffer --------------===//

#include "kiln/KilnInterfaces.h"
#include "kiln/KilnOps.h"
#include "kiln/Transforms/Passes.h"
#include "kiln/Transforms/Utils/Gemm.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

namespace kiln {
#define GEN_PASS_DEF_KILNPLANMEMORY
#include "kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {

constexpr int64_t kAlignment = 64;

struct Buffer {
  memref::AllocOp alloc;
  int64_t bytes = 0;
  int64_t first = 0, last = 0; // live interval, in entry-block op positions
  // The same interval counted in the ops that touch memory: with a reuse
  // distance, buffers whose intervals come that close get apart bytes.
  int64_t firstStep = 0, lastStep = 0;
  int64_t offset = 0;
  kiln::StepPhase phase = kiln::StepPhase::Forward; // of its first writer
};

int64_t alignTo(int64_t value) {
  return (value + kAlignment - 1) / kAlignment * kAlignment;
}

int64_t elementBytes(Type type) {
  if (type.isInteger(1))
    return 1;
  if (type.isIndex())
    return 8;
  return (type.getIntOrFloatBitWidth() + 7) / 8;
}

/// The position of the entry-block op that holds `op`.
int64_t positionIn(Block &block, Operation *op,
                   const DenseMap<Operation *, int64_t> &position) {
  Operation *top = block.findAncestorOpInBlock(*op);
  return top ? position.lookup(top) : -1;
}

/// The last position where `value` or any view of it is used, and the first
/// op that uses it (the one that writes it first).
LogicalResult lastUse(Block &block, Value value,
                      const DenseMap<Operation *, int64_t> &position,
                      int64_t &last, Operation *&firstUser) {
  int64_t firstPosition = INT64_MAX;
  SmallVector<Value> worklist{value};
  DenseSet<Value> visited{value};
  while (!worklist.empty()) {
    Value v = worklist.pop_back_val();
    for (Operation *user : v.getUsers()) {
      if (isa<func::ReturnOp>(user))
        return user->emitError("kiln-plan-memory: a transient buffer escapes "
                               "through the return value");
      int64_t at = positionIn(block, user, position);
      last = std::max(last, at);
      if (at < firstPosition && !isa<ViewLikeOpInterface>(user)) {
        firstPosition = at;
        firstUser = user;
      }
      // Conservatively, any buffer an op returns may alias the buffer it
      // takes: views, casts, and scf.if / scf.for results that yield it.
      Operation *producer = user;
      if (user->hasTrait<OpTrait::IsTerminator>() && user->getParentOp() &&
          !isa<func::FuncOp>(user->getParentOp()))
        producer = user->getParentOp();
      for (Value result : producer->getResults())
        if (isa<BaseMemRefType>(result.getType()) &&
            visited.insert(result).second)
          worklist.push_back(result);
    }
  }
  return success();
}

/// The lowest offset (with `bestFit`, the one of the smallest gap) where
/// `size` bytes fit among the `busy` ranges, or the end of the last of them.
int64_t fit(SmallVectorImpl<std::pair<int64_t, int64_t>> &busy, int64_t size,
            bool bestFit) {
  llvm::sort(busy);
  // The gaps between busy ranges, then the unbounded space after them.
  int64_t chosen = -1, chosenGap = INT64_MAX, free = 0;
  for (auto [begin, end] : busy) {
    int64_t gap = begin - free;
    if (gap >= size && (bestFit ? gap < chosenGap : chosen < 0)) {
      chosen = free;
      chosenGap = gap;
    }
    free = std::max(free, end);
  }
  return chosen >= 0 ? chosen : free;
}

/// Places `buffers` in size order, largest first, each in a free gap of the
/// buffers already placed that are alive at the same time: with `bestFit`,
/// the smallest gap it fits in, otherwise the lowest. With a `distance`, a
/// buffer also keeps off the bytes of those alive within that many steps of
/// it, or within half as many, a quarter, and so on: the farthest that
/// fits in the arena placed so far. Returns the arena size.
int64_t place(MutableArrayRef<Buffer> buffers, bool bestFit, int64_t distance) {
  SmallVector<Buffer *> order;
  for (Buffer &b : buffers)
    order.push_back(&b);
  llvm::stable_sort(order,
                    [](Buffer *a, Buffer *b) { return a->bytes > b->bytes; });
  SmallVector<Buffer *> placed;
  int64_t total = 0;
  for (Buffer *buffer : order) {
    SmallVector<std::pair<int64_t, int64_t>> alive;
    // The others within `distance` steps, and how many steps apart.
    SmallVector<std::pair<int64_t, std::pair<int64_t, int64_t>>> near;
    for (Buffer *other : placed) {
      std::pair<int64_t, int64_t> range = {
          other->offset, other->offset + alignTo(other->bytes)};
      int64_t apart = std::max(other->firstStep - buffer->lastStep,
                               buffer->firstStep - other->lastStep);
      if (other->first <= buffer->last && buffer->first <= other->last)
        alive.push_back(range);
      else if (distance > 0 && apart <= distance)
        near.push_back({apart, range});
    }
    int64_t size = alignTo(buffer->bytes);
    int64_t offset = -1;
    // Nearest first: each halving keeps a shorter prefix.
    llvm::sort(near,
               [](const auto &x, const auto &y) { return x.first < y.first; });
    size_t tried = near.size() + 1;
    for (int64_t within = distance; within > 0 && offset < 0; within /= 2) {
      size_t kept =
          llvm::partition_point(
              near, [&](const auto &entry) { return entry.first <= within; }) -
          near.begin();
      if (kept == 0)
        break;
      if (kept == tried)
        continue;
      tried = kept;
      SmallVector<std::pair<int64_t, int64_t>> busy(alive);
      for (const auto &entry : ArrayRef(near).take_front(kept))
        busy.push_back(entry.second);
      offset = fit(busy, size, bestFit);
      if (offset + size > total)
        offset = -1;
    }
    if (offset < 0)
      offset = fit(alive, size, bestFit);
    buffer->offset = offset;
    total = std::max(total, offset + size);
    placed.push_back(buffer);
  }
  return total;
}

/// What the arena holds where the live buffers are largest: the attributes
/// kiln-plan-memory records on each function (see Passes.td).
struct Peak {
  int64_t live = 0, activations = 0, gradients = 0, workspace = 0;
};

/// The largest sum of the sizes of the buffers alive at one position, and
/// what they are: forward values (activations), values of the backward pass
/// still alive when the optimizer update starts (gradients), and the rest.
Peak findPeak(ArrayRef<Buffer> buffers, Block &block) {
  int64_t optimizerStart = INT64_MAX, index = 0;
  for (Operation &op : block) {
    if (kiln::phaseOf(op.getLoc()) == kiln::StepPhase::Optimizer) {
      optimizerStart = index;
      break;
    }
    ++index;
  }
  // Sizes change only where a buffer starts; the peak is at one of those.
  Peak peak;
  for (const Buffer &at : buffers) {
    Peak here;
    for (const Buffer &b : buffers) {
      if (b.first > at.first || b.last < at.first)
        continue;
      int64_t size = alignTo(b.bytes);
      here.live += size;
      if (b.phase == kiln::StepPhase::Forward)
        here.activations += size;
      else if (b.phase == kiln::StepPhase::Backward && b.last >= optimizerStart)
        here.gradients += size;
      else
        here.workspace += size;
    }
    if (here.live > peak.live)
      peak = here;
  }
  return peak;
}

/// The allocation `buffer` is, or is a view of; null for anything else.
memref::AllocOp rootAllocation(Value buffer) {
  while (auto view =
             dyn_cast_or_null<ViewLikeOpInterface>(buffer.getDefiningOp()))
    buffer = view.getViewSource();
  return buffer.getDefiningOp<memref::AllocOp>();
}

/// A collective reads and writes its buffers until the wait for it, which
/// the target puts before the next op that touches one of them (or at the
/// end): a reduce-scatter's or all-gather's input stays alive as long as
/// its output does, and a buffer nothing touches after the collective to
/// the end.
void keepBuffersOfCollectives(Block &block, MutableArrayRef<Buffer> buffers,
                              const DenseMap<Operation *, int64_t> &position) {
  DenseMap<Operation *, Buffer *> byAlloc;
  for (Buffer &buffer : buffers)
    byAlloc[buffer.alloc] = &buffer;
  int64_t end = static_cast<int64_t>(position.size());
  for (Operation &op : block) {
    int64_t at = position.lookup(&op);
    if (!isa<kiln::AllReduceMeanOp, kiln::ReduceScatterMeanOp,
             kiln::AllGatherOp>(op))
      continue;
    for (Value operand : op.getOperands())
      if (Buffer *buffer = byAlloc.lookup(rootAllocation(operand)))
        if (buffer->last <= at)
          buffer->last = end;
    if (isa<kiln::AllReduceMeanOp>(op) || op.getNumOperands() != 2)
      continue;
    Buffer *input = byAlloc.lookup(rootAllocation(op.getOperand(0)));
    if (!input)
      continue;
    Buffer *output = byAlloc.lookup(rootAllocation(op.getOperand(1)));
    input->last = std::max(input->last, output ? output->last : end);
  }
}

/// Places `buffers` by `other` when that is `acceptable` given the arena
/// size of their current placement, `placed`; keeps the current placement
/// otherwise. Returns the arena size of the placement kept.
int64_t placeIfBetter(MutableArrayRef<Buffer> buffers, int64_t placed,
                      function_ref<int64_t()> other,
                      function_ref<bool(int64_t, int64_t)> acceptable) {
  SmallVector<int64_t> offsets;
  for (Buffer &buffer : buffers)
    offsets.push_back(buffer.offset);
  int64_t otherBytes = other();
  if (acceptable(otherBytes, placed))
    return otherBytes;
  for (auto [buffer, offset] : llvm::zip(buffers, offsets))
    buffer.offset = offset;
  return placed;
}

/// Best fit usually packs tighter; where first fit happens to do better,
/// it is kept. Returns the arena size.
int64_t placeTighter(MutableArrayRef<Buffer> buffers, int64_t distance) {
  return placeIfBetter(
      buffers, place(buffers, /*bestFit=*/false, distance),
      [&] { return place(buffers, /*bestFit=*/true, distance); },
      [](int64_t bestFit, int64_t firstFit) { return bestFit <= firstFit; });
}

struct KilnPlanMemoryPass : kiln::impl::KilnPlanMemoryBase<KilnPlanMemoryPass> {
  using Base::Base;

  void runOnOperation() override {
    for (auto function : getOperation().getOps<func::FuncOp>()) {
      if (function.isExternal())
        continue;
      if (failed(planFunction(function)))
        return signalPassFailure();
    }
  }

  LogicalResult planFunction(func::FuncOp function) {
    Block &block = function.getBody().front();
    DenseMap<Operation *, int64_t> position;
    int64_t index = 0;
    // The product before each GELU that it may compute as its epilogue.
    DenseMap<Operation *, Operation *> epilogueProducts;
    for (Operation &op : block) {
      position[&op] = index++;
      Value aux;
      if (auto product = dyn_cast<linalg::GenericOp>(op))
        if (linalg::GenericOp epilogue = kiln::geluEpilogueOf(product, aux))
          epilogueProducts[epilogue] = product;
    }

    SmallVector<Buffer> buffers;
    WalkResult walk = function.walk([&](Operation *op) {
      if (auto dealloc = dyn_cast<memref::DeallocOp>(op)) {
        dealloc.erase();
        return WalkResult::advance();
      }
      auto alloc = dyn_cast<memref::AllocOp>(op);
      if (!alloc)
        return WalkResult::advance();
      MemRefType type = alloc.getType();
      if (alloc->getBlock() != &block || !type.hasStaticShape() ||
          !type.getLayout().isIdentity()) {
        alloc.emitError("kiln-plan-memory: only statically shaped, top-level "
                        "allocations can be planned");
        return WalkResult::interrupt();
      }
      Buffer buffer;
      buffer.alloc = alloc;
      buffer.bytes =
          type.getNumElements() * elementBytes(type.getElementType());
      buffer.first = buffer.last = position[alloc];
      Operation *writer = nullptr;
      if (failed(
              lastUse(block, alloc.getResult(), position, buffer.last, writer)))
        return WalkResult::interrupt();
      buffer.phase = kiln::phaseOf(writer ? writer->getLoc() : alloc.getLoc());
      // A GELU that a product before it may compute as its epilogue
      // (kiln-gemm-gelu) is written from that product on.
      if (auto product = epilogueProducts.find(writer);
          product != epilogueProducts.end())
        buffer.first = std::min(buffer.first, position[product->second]);
      buffers.push_back(buffer);
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return failure();
    keepBuffersOfCollectives(block, buffers, position);

    // The positions counted in ops that touch memory; a collective's
    // buffers kept to the end end at the last.
    SmallVector<int64_t> step;
    step.reserve(position.size() + 1);
    int64_t steps = 0;
    for (Operation &op : block) {
      step.push_back(steps);
      if (!isa<ViewLikeOpInterface, memref::AllocOp, memref::DeallocOp>(op) &&
          !isPure(&op))
        ++steps;
    }
    step.push_back(steps);
    for (Buffer &buffer : buffers) {
      buffer.firstStep = step[buffer.first];
      buffer.lastStep = step[buffer.last];
    }

    int64_t arenaBytes = placeTighter(buffers, 0);
    if (reuseDistance > 0)
      arenaBytes = placeIfBetter(
          buffers, arenaBytes,
          [&] { return placeTighter(buffers, reuseDistance); },
          [](int64_t apart, int64_t plain) {
            return apart <= plain + plain / 16;
          });
    Peak peak = findPeak(buffers, block);
    OpBuilder b(function.getContext());
    auto arenaType = MemRefType::get({arenaBytes}, b.getI8Type());
    unsigned arenaIndex = function.getNumArguments();
    if (failed(function.insertArgument(arenaIndex, arenaType, DictionaryAttr(),
                                       function.getLoc())))
      return failure();
    function.setArgAttr(arenaIndex, "kiln.arena", b.getUnitAttr());
    function->setAttr("kiln.arena_bytes", b.getI64IntegerAttr(arenaBytes));
    if (!buffers.empty())
      function->setAttr(
          "kiln.arena_peak",
          b.getDictionaryAttr(
              {b.getNamedAttr("activations",
                              b.getI64IntegerAttr(peak.activations)),
               b.getNamedAttr("gradients", b.getI64IntegerAttr(peak.gradients)),
               b.getNamedAttr("live", b.getI64IntegerAttr(peak.live)),
               b.getNamedAttr("workspace",
                              b.getI64IntegerAttr(peak.workspace))}));
    Value arena = block.getArgument(arenaIndex);
    for (Buffer &buffer : buffers) {
      b.setInsertionPoint(buffer.alloc);
      Location loc = buffer.alloc.getLoc();
      Value offset = arith::ConstantIndexOp::create(b, loc, buffer.offset);
      Value view = memref::ViewOp::create(b, loc, buffer.alloc.getType(), arena,
                                          offset, ValueRange{});
      buffer.alloc.replaceAllUsesWith(view);
      buffer.alloc.erase();
    }
    return success();
  }
};

} // namespace
