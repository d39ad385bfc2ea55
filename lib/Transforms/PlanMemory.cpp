//===- PlanMemory.cpp - one arena for every transient buffer --------------===//

#include "kiln/Transforms/Passes.h"

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
  int64_t offset = 0;
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

/// The last position where `value` or any view of it is used.
LogicalResult lastUse(Block &block, Value value,
                      const DenseMap<Operation *, int64_t> &position,
                      int64_t &last) {
  SmallVector<Value> worklist{value};
  DenseSet<Value> visited{value};
  while (!worklist.empty()) {
    Value v = worklist.pop_back_val();
    for (Operation *user : v.getUsers()) {
      if (isa<func::ReturnOp>(user))
        return user->emitError("kiln-plan-memory: a transient buffer escapes "
                               "through the return value");
      last = std::max(last, positionIn(block, user, position));
      // Conservatively, any buffer an op returns may alias the buffer it
      // takes: views, casts, and scf.if / scf.for results that yield it.
      Operation *producer = user;
      if (user->hasTrait<OpTrait::IsTerminator>() && user->getParentOp() &&
          !isa<func::FuncOp>(user->getParentOp()))
        producer = user->getParentOp();
      for (Value result : producer->getResults())
        if (isa<BaseMemRefType>(result.getType()) && visited.insert(result).second)
          worklist.push_back(result);
    }
  }
  return success();
}

/// Largest first; each at the lowest aligned offset that does not collide
/// with an already placed buffer alive at the same time.
int64_t place(MutableArrayRef<Buffer> buffers) {
  SmallVector<Buffer *> order;
  for (Buffer &b : buffers)
    order.push_back(&b);
  llvm::stable_sort(order, [](Buffer *a, Buffer *b) { return a->bytes > b->bytes; });
  SmallVector<Buffer *> placed;
  int64_t total = 0;
  for (Buffer *buffer : order) {
    SmallVector<std::pair<int64_t, int64_t>> busy;
    for (Buffer *other : placed)
      if (other->first <= buffer->last && buffer->first <= other->last)
        busy.push_back({other->offset, other->offset + alignTo(other->bytes)});
    llvm::sort(busy);
    int64_t offset = 0;
    for (auto [begin, end] : busy) {
      if (offset + buffer->bytes <= begin)
        break;
      offset = std::max(offset, end);
    }
    buffer->offset = offset;
    total = std::max(total, offset + alignTo(buffer->bytes));
    placed.push_back(buffer);
  }
  return total;
}

struct KilnPlanMemoryPass
    : kiln::impl::KilnPlanMemoryBase<KilnPlanMemoryPass> {
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
    for (Operation &op : block)
      position[&op] = index++;

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
      buffer.bytes = type.getNumElements() * elementBytes(type.getElementType());
      buffer.first = buffer.last = position[alloc];
      if (failed(lastUse(block, alloc.getResult(), position, buffer.last)))
        return WalkResult::interrupt();
      buffers.push_back(buffer);
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return failure();

    int64_t arenaBytes = place(buffers);
    OpBuilder b(function.getContext());
    auto arenaType = MemRefType::get({arenaBytes}, b.getI8Type());
    unsigned arenaIndex = function.getNumArguments();
    if (failed(function.insertArgument(arenaIndex, arenaType, DictionaryAttr(),
                                       function.getLoc())))
      return failure();
    function.setArgAttr(arenaIndex, "kiln.arena", b.getUnitAttr());
    function->setAttr("kiln.arena_bytes", b.getI64IntegerAttr(arenaBytes));
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
