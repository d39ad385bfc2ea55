//===- GPUOutlineKernels.cpp - kernels as GPU kernels, one thread per point
//===//
//
// The CUDA target runs a step as a list of commands the runtime issues on a
// stream: kernel launches and library calls, over buffers it knows (the
// caller's tensors, the parameters, arena slots). This pass makes that list
// explicit in the IR: every kernel of an entry function becomes a
// gpu.launch_func on such buffers, and its body a gpu.func in which each
// thread computes one point of the kernel's parallel loops.
//
//===----------------------------------------------------------------------===//

#include "kiln/KilnInterfaces.h"
#include "kiln/KilnOps.h"
#include "kiln/Target/CUDA/GPUKernels.h"
#include "kiln/Target/CUDA/Passes.h"
#include "kiln/Transforms/Utils/Buffers.h"
#include "kiln/Transforms/Utils/Gemm.h"

#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Linalg/Utils/Utils.h"
#include "mlir/IR/Dominance.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "mlir/Transforms/CSE.h"
#include "mlir/Transforms/LoopInvariantCodeMotionUtils.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SmallBitVector.h"

namespace kiln {
#define GEN_PASS_DEF_KILNGPUOUTLINEKERNELS
#include "kiln/Target/CUDA/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using kiln::ByteRange;
using kiln::bytesOf;
using kiln::touches;
using kiln::traceToRoot;
using kiln::viewRoot;

namespace {

/// Whether `value` is computed in `body` without reading `buffer`: from
/// block arguments, values defined outside, and pure ops or loads of other
/// buffers.
bool independentOf(Value value, Value buffer, Block *body, int depth = 0) {
  Operation *def = value.getDefiningOp();
  if (!def || def->getBlock() != body)
    return true;
  if (depth > 16)
    return false;
  if (auto load = dyn_cast<memref::LoadOp>(def))
    if (viewRoot(load.getMemRef()) == viewRoot(buffer))
      return false;
  if (!isPure(def) && !isa<memref::LoadOp>(def))
    return false;
  return llvm::all_of(def->getOperands(), [&](Value operand) {
    return independentOf(operand, buffer, body, depth + 1);
  });
}

/// Whether `value` is computed in `body` from a value loaded there.
bool readsMemory(Value value, Block *body, int depth = 0) {
  Operation *def = value.getDefiningOp();
  if (!def || def->getBlock() != body || depth > 16)
    return false;
  if (isa<memref::LoadOp>(def))
    return true;
  return llvm::any_of(def->getOperands(), [&](Value operand) {
    return readsMemory(operand, body, depth + 1);
  });
}

/// An scf.parallel before `at` over the iteration spaces of `loops`, with
/// their induction variables mapped to its own in `mapping` and `b` set to
/// insert into its body.
void parallelOver(OpBuilder &b, scf::ForOp at, ArrayRef<scf::ForOp> loops,
                  IRMapping &mapping) {
  b.setInsertionPoint(at);
  SmallVector<Value> lbs, ubs, steps;
  for (scf::ForOp loop : loops) {
    lbs.push_back(loop.getLowerBound());
    ubs.push_back(loop.getUpperBound());
    steps.push_back(loop.getStep());
  }
  auto parallel = scf::ParallelOp::create(b, at.getLoc(), lbs, ubs, steps);
  for (auto [loop, iv] : llvm::zip(loops, parallel.getInductionVars()))
    mapping.map(scf::ForOp(loop).getInductionVar(), iv);
  b.setInsertionPoint(parallel.getBody()->getTerminator());
}

/// The loop nest `loops` (outermost first) whose innermost body adds into
/// `store`'s element, at indices that are each a value defined outside the
/// nest or one of the loops' induction variables (each at most once), as
/// an scf.parallel over the loops that index the element (they write
/// distinct elements) around the others, which each thread runs in their
/// order with the sum in a register: loaded once, stored once. With no loop
/// indexing the element (a sum into one element, as a loss) the kernel
/// stays one thread, with the sum in a register too, instead of a load and
/// a store per term, each waiting for the last. Every element adds the same
/// terms in the same order as the nest did. Failure when the indices are
/// not of that form.
LogicalResult sumInRegisters(ArrayRef<scf::ForOp> loops, memref::StoreOp store,
                             memref::LoadOp old, arith::AddFOp add) {
  SmallVector<int64_t> indexedBy;
  for (Value index : store.getIndices()) {
    auto it = llvm::find_if(loops, [&](scf::ForOp loop) {
      return loop.getInductionVar() == index;
    });
    if (it != loops.end()) {
      int64_t position = it - loops.begin();
      if (llvm::is_contained(indexedBy, position))
        return failure();
      indexedBy.push_back(position);
    } else if (scf::ForOp(loops.front())
                   ->isAncestor(index.getParentBlock()->getParentOp())) {
      return failure();
    }
  }
  SmallVector<scf::ForOp> parallelLoops, sumLoops;
  for (auto [i, loop] : llvm::enumerate(loops))
    (llvm::is_contained(indexedBy, int64_t(i)) ? parallelLoops : sumLoops)
        .push_back(loop);

  scf::ForOp outer = loops.front(), innermost = loops.back();
  Block *body = innermost.getBody();
  OpBuilder b(outer);
  IRMapping mapping;
  if (!parallelLoops.empty())
    parallelOver(b, outer, parallelLoops, mapping);
  SmallVector<Value> indices;
  for (Value index : store.getIndices())
    indices.push_back(mapping.lookupOrDefault(index));
  Value buffer = store.getMemRef();
  Value sum = memref::LoadOp::create(b, old.getLoc(), buffer, indices);
  bool oldFirst = add.getLhs() == old.getResult();
  // Builds the sum loops from `level` in, returning the sum after them.
  std::function<Value(size_t, Value)> build = [&](size_t level,
                                                  Value partial) -> Value {
    if (level == sumLoops.size()) {
      for (Operation &op : body->without_terminator()) {
        if (&op == old.getOperation() || &op == add.getOperation() ||
            &op == store.getOperation())
          continue;
        b.clone(op, mapping);
      }
      // The operands in the nest's order: the same sums, bit for bit.
      Value term =
          mapping.lookupOrDefault(oldFirst ? add.getRhs() : add.getLhs());
      return arith::AddFOp::create(b, add.getLoc(), oldFirst ? partial : term,
                                   oldFirst ? term : partial);
    }
    scf::ForOp loop = sumLoops[level];
    auto inner = scf::ForOp::create(b, loop.getLoc(), loop.getLowerBound(),
                                    loop.getUpperBound(), loop.getStep(),
                                    ValueRange{partial});
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(inner.getBody());
    mapping.map(loop.getInductionVar(), inner.getInductionVar());
    Value next = build(level + 1, inner.getRegionIterArgs().front());
    scf::YieldOp::create(b, loop.getLoc(), next);
    return inner.getResult(0);
  };
  Value total = build(0, sum);
  memref::StoreOp::create(b, store.getLoc(), total, buffer, indices);
  outer.erase();
  return success();
}

/// A loop nest the lowering wrote (perfectly nested scf.for with constant
/// bounds, no loop-carried values) whose innermost body adds one value into
/// an element of a buffer it touches nowhere else (`buffer[i] = buffer[i] +
/// x`) runs in parallel when it can:
/// - at an index read from memory (a scatter-add, as an embedding's
///   gradient), one thread per iteration, adding with an atomic: iterations
///   that hit the same element then add in some order, as a GPU's
///   scatter-add does;
/// - at indices that are loop variables or fixed (a sum into a fixed row,
///   as the gradient of an embedding whose ids are all the same),
///   sumInRegisters' thread per element (one thread with the sum in a
///   register when every term goes into one element).
/// Other loop nests stay on one thread.
void parallelizeScatterAdds(gpu::GPUFuncOp kernel) {
  SmallVector<scf::ForOp> nests;
  for (Operation &op : kernel.getBody().front())
    if (auto loop = dyn_cast<scf::ForOp>(op))
      nests.push_back(loop);
  auto plain = [](scf::ForOp loop) {
    return loop.getNumResults() == 0 &&
           getConstantIntValue(loop.getLowerBound()) &&
           getConstantIntValue(loop.getUpperBound()) &&
           getConstantIntValue(loop.getStep());
  };
  for (scf::ForOp outer : nests) {
    SmallVector<scf::ForOp> loops{outer};
    while (plain(loops.back())) {
      Block *body = loops.back().getBody();
      auto inner = body->getOperations().size() == 2
                       ? dyn_cast<scf::ForOp>(body->front())
                       : scf::ForOp();
      if (!inner)
        break;
      loops.push_back(inner);
    }
    scf::ForOp innermost = loops.back();
    if (!plain(innermost))
      continue;
    Block *body = innermost.getBody();
    SmallVector<memref::StoreOp> stores;
    bool sideEffects = false;
    for (Operation &op : body->without_terminator()) {
      if (auto store = dyn_cast<memref::StoreOp>(op))
        stores.push_back(store);
      else if (!isPure(&op) && !isa<memref::LoadOp>(op))
        sideEffects = true;
    }
    if (sideEffects || stores.size() != 1)
      continue;
    memref::StoreOp store = stores.front();
    Value buffer = store.getMemRef();
    auto add = store.getValueToStore().getDefiningOp<arith::AddFOp>();
    if (!add || !add->hasOneUse() || add->getBlock() != body)
      continue;
    // One operand is the element the store overwrites, loaded here.
    memref::LoadOp old;
    Value addend;
    for (auto [x, y] : {std::pair{add.getLhs(), add.getRhs()},
                        std::pair{add.getRhs(), add.getLhs()}}) {
      auto load = x.getDefiningOp<memref::LoadOp>();
      if (load && load.getMemRef() == buffer &&
          load.getIndices() == store.getIndices() && load->hasOneUse()) {
        old = load;
        addend = y;
        break;
      }
    }
    if (!old || !independentOf(addend, buffer, body))
      continue;
    // Nothing else in the nest reads the buffer, through any view of it.
    Value root = viewRoot(buffer);
    bool otherReads = false;
    for (Operation &op : body->without_terminator())
      if (auto load = dyn_cast<memref::LoadOp>(op))
        otherReads |= load != old && viewRoot(load.getMemRef()) == root;
    for (Value index : store.getIndices())
      otherReads |= !independentOf(index, buffer, body);
    if (otherReads)
      continue;
    // Atomics only for scatters, whose target comes from an index tensor:
    // a sum into elements the loops pick keeps its deterministic order.
    if (llvm::none_of(store.getIndices(),
                      [&](Value index) { return readsMemory(index, body); })) {
      (void)sumInRegisters(loops, store, old, add);
      continue;
    }

    OpBuilder b(outer);
    IRMapping mapping;
    parallelOver(b, outer, loops, mapping);
    for (Operation &op : body->without_terminator()) {
      if (&op == old.getOperation() || &op == add.getOperation())
        continue;
      if (&op == store.getOperation()) {
        SmallVector<Value> indices;
        for (Value index : store.getIndices())
          indices.push_back(mapping.lookupOrDefault(index));
        memref::AtomicRMWOp::create(b, store.getLoc(),
                                    arith::AtomicRMWKind::addf,
                                    mapping.lookupOrDefault(addend),
                                    mapping.lookupOrDefault(buffer), indices);
        continue;
      }
      b.clone(op, mapping);
    }
    outer.erase();
  }
}

/// In `loop`'s body, a store of an element and the load of that element
/// before it (the same buffer at the same indices, both defined outside the
/// loop), when nothing else in the loop touches the buffer (through any
/// view of it) or memory it cannot see: the element is then the loop's own
/// for its whole run. Null when there is none.
std::pair<memref::LoadOp, memref::StoreOp> ownedElement(scf::ForOp loop) {
  Block *body = loop.getBody();
  for (auto store : body->getOps<memref::StoreOp>()) {
    if (!loop.isDefinedOutsideOfLoop(store.getMemRef()) ||
        !llvm::all_of(store.getIndices(), [&](Value index) {
          return loop.isDefinedOutsideOfLoop(index);
        }))
      continue;
    memref::LoadOp load;
    for (auto candidate : body->getOps<memref::LoadOp>())
      if (candidate.getMemRef() == store.getMemRef() &&
          candidate.getIndices() == store.getIndices() &&
          candidate->isBeforeInBlock(store)) {
        load = candidate;
        break;
      }
    if (!load)
      continue;
    Value root = viewRoot(store.getMemRef());
    WalkResult touched = body->walk([&](Operation *op) {
      if (op == load.getOperation() || op == store.getOperation())
        return WalkResult::advance();
      if (auto other = dyn_cast<memref::LoadOp>(op))
        return viewRoot(other.getMemRef()) == root ? WalkResult::interrupt()
                                                   : WalkResult::advance();
      if (auto other = dyn_cast<memref::StoreOp>(op))
        return viewRoot(other.getMemRef()) == root ? WalkResult::interrupt()
                                                   : WalkResult::advance();
      if (isPure(op) || isa<scf::ForOp, scf::IfOp, scf::YieldOp>(op))
        return WalkResult::advance();
      return WalkResult::interrupt();
    });
    if (!touched.wasInterrupted())
      return {load, store};
  }
  return {};
}

/// A thread that combines terms into an element of its output in a loop
/// (a reduction's `out[i] = out[i] + x[i, k]` for every k, as the lowering of
/// a linalg op writes it) loads and stores the element once, around the
/// loop, and keeps it in a register in between: the loop carries it. Each
/// iteration otherwise waits for the store of the last to reach memory and
/// come back, which on a GPU is a trip to L2. Loops are taken innermost
/// first, so a nest carries the element through every level. The same
/// operations run in the same order: the results are bit for bit the same.
void carryElementsInRegisters(gpu::GPUFuncOp kernel) {
  SmallVector<scf::ForOp> loops;
  kernel.walk([&](scf::ForOp loop) { loops.push_back(loop); });
  if (loops.empty())
    return;
  // The lowering recomputes an element's indices in the loop, for the load
  // and again for the store: one value each, outside the loop, first.
  IRRewriter rewriter(kernel.getContext());
  DominanceInfo dominance(kernel);
  eliminateCommonSubExpressions(rewriter, dominance, kernel);
  for (scf::ForOp loop : loops)
    moveLoopInvariantCode(cast<LoopLikeOpInterface>(loop.getOperation()));
  for (scf::ForOp loop : loops) {
    while (true) {
      auto [load, store] = ownedElement(loop);
      if (!load)
        break;
      rewriter.setInsertionPoint(loop);
      Value initial = memref::LoadOp::create(
          rewriter, load.getLoc(), load.getMemRef(), load.getIndices());
      Value stored = store.getValueToStore();
      FailureOr<LoopLikeOpInterface> carried = loop.replaceWithAdditionalYields(
          rewriter, initial, /*replaceInitOperandUsesInLoop=*/false,
          [&](OpBuilder &, Location, ArrayRef<BlockArgument>) {
            return SmallVector<Value>{stored};
          });
      if (failed(carried))
        break;
      loop = cast<scf::ForOp>(carried->getOperation());
      rewriter.replaceOp(load, loop.getRegionIterArgs().back());
      rewriter.setInsertionPointAfter(loop);
      memref::StoreOp::create(rewriter, store.getLoc(),
                              loop.getResults().back(), store.getMemRef(),
                              store.getIndices());
      rewriter.eraseOp(store);
    }
  }
}

/// The fill that a reduction `op` makes dead for its output `out`: `op`
/// writes the output's every element (its output map takes every output
/// dimension from a parallel loop), and the last op before it touching the
/// bytes of the output's buffer (an argument or arena slot, through any
/// view) fills exactly that output with a constant. Null when there is
/// none or `op` is no such reduction.
linalg::FillOp fillBeforeReduction(linalg::GenericOp op, OpOperand *out) {
  if (!op.hasPureBufferSemantics() || op.getNumReductionLoops() == 0)
    return {};
  AffineMap map = op.getMatchingIndexingMap(out);
  auto type = dyn_cast<MemRefType>(out->get().getType());
  if (!type || !map.isProjectedPermutation() ||
      map.getNumResults() != type.getRank())
    return {};
  for (AffineExpr result : map.getResults())
    if (op.getIteratorTypesArray()[cast<AffineDimExpr>(result).getPosition()] !=
        utils::IteratorType::parallel)
      return {};
  std::optional<ByteRange> bytes = kiln::viewedBytes(out->get());
  if (!bytes)
    return {};
  for (Operation *prev = op->getPrevNode(); prev; prev = prev->getPrevNode()) {
    if (!touches(prev, *bytes))
      continue;
    auto fill = dyn_cast<linalg::FillOp>(prev);
    if (fill && fill.hasPureBufferSemantics() &&
        fill.getDpsInits()[0] == out->get() &&
        matchPattern(fill.getDpsInputs()[0], m_Constant()))
      return fill;
    return {};
  }
  return {};
}

/// Where every read of `buffer` (a kernel argument) in `kernel` is the
/// first value of an element a loop carries (carryElementsInRegisters) and
/// the buffer holds `value` everywhere when the kernel starts, the loops
/// start from `value` and the kernel reads nothing of the buffer. False,
/// changing nothing, when any read is another.
bool startFromFill(gpu::GPUFuncOp kernel, Value buffer, TypedAttr value) {
  SmallVector<memref::LoadOp> reads;
  WalkResult other = kernel.walk([&](memref::LoadOp load) {
    if (viewRoot(load.getMemRef()) != buffer)
      return WalkResult::advance();
    if (!load->hasOneUse())
      return WalkResult::interrupt();
    auto loop = dyn_cast<scf::ForOp>(*load->getUsers().begin());
    if (!loop || !llvm::is_contained(loop.getInitArgs(), load.getResult()))
      return WalkResult::interrupt();
    reads.push_back(load);
    return WalkResult::advance();
  });
  if (other.wasInterrupted() || reads.empty())
    return false;
  for (memref::LoadOp load : reads) {
    OpBuilder b(load);
    load.replaceAllUsesWith(
        arith::ConstantOp::create(b, load.getLoc(), value).getResult());
    load.erase();
  }
  return true;
}

/// Makes each parallel dimension of `op` that some output's indexing map
/// does not use a reduction: the threads are the parallel dimensions, and
/// two threads that differ only in such a dimension would write the same
/// output element (a race on the GPU, where the emulated kernel, its
/// blocks run one after another, would still be right). As a loop inside
/// each thread, the element's last iteration writes it, as a sequential
/// run of the op does.
void serializeUnindexedParallelDims(RewriterBase &rewriter,
                                    linalg::GenericOp op) {
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  llvm::SmallBitVector indexed(iterators.size(), true);
  for (OpOperand &out : op.getDpsInitsMutable()) {
    llvm::SmallBitVector used(iterators.size(), false);
    for (AffineExpr result : op.getMatchingIndexingMap(&out).getResults())
      result.walk([&](AffineExpr e) {
        if (auto dim = dyn_cast<AffineDimExpr>(e))
          used.set(dim.getPosition());
      });
    indexed &= used;
  }
  bool changed = false;
  for (auto [d, kind] : llvm::enumerate(iterators))
    if (kind == utils::IteratorType::parallel && !indexed.test(d)) {
      kind = utils::IteratorType::reduction;
      changed = true;
    }
  if (!changed)
    return;
  SmallVector<Attribute> attributes;
  for (utils::IteratorType kind : iterators)
    attributes.push_back(linalg::IteratorTypeAttr::get(op.getContext(), kind));
  rewriter.modifyOpInPlace(
      op, [&] { op.setIteratorTypesAttr(rewriter.getArrayAttr(attributes)); });
}

/// `op` with its parallel dimensions before its reductions, each group in
/// its order: its loops are then one scf.parallel, which becomes the
/// threads, around the reductions' scf.for, which each thread runs. In the
/// given order a reduction before a parallel dimension (a sum over the
/// batch, `out[i, j] += x[b, i, j]`) would be a sequential loop around the
/// parallel one, and the whole kernel one thread. Each output element
/// still adds its terms in the same order.
linalg::GenericOp parallelDimsFirst(RewriterBase &rewriter,
                                    linalg::GenericOp op) {
  SmallVector<unsigned> order;
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  for (auto [d, kind] : llvm::enumerate(iterators))
    if (kind == utils::IteratorType::parallel)
      order.push_back(static_cast<unsigned>(d));
  for (auto [d, kind] : llvm::enumerate(iterators))
    if (kind != utils::IteratorType::parallel)
      order.push_back(static_cast<unsigned>(d));
  if (llvm::equal(order, llvm::seq<unsigned>(0, order.size())))
    return op;
  FailureOr<linalg::GenericOp> interchanged =
      linalg::interchangeGenericOp(rewriter, op, order);
  return succeeded(interchanged) ? *interchanged : op;
}

/// Replaces the top-level scf.parallel of `kernel` (if any) by one thread per
/// point: thread `blockIdx.x * blockSize + threadIdx.x` computes the point of
/// that linear index, when it is below the number of points. Returns the
/// number of points (1 for a kernel without parallel loops).
FailureOr<int64_t> mapToThreads(gpu::GPUFuncOp kernel, int64_t blockSize) {
  SmallVector<scf::ParallelOp> loops;
  for (Operation &op : kernel.getBody().front())
    if (auto loop = dyn_cast<scf::ParallelOp>(op))
      loops.push_back(loop);
  if (loops.empty())
    return 1;
  if (loops.size() > 1)
    return kernel.emitError("kernel has ")
           << loops.size() << " parallel loop nests, not one";
  scf::ParallelOp loop = loops.front();
  SmallVector<int64_t> lower, counts, steps;
  int64_t points = 1;
  for (auto [lb, ub, step] :
       llvm::zip(loop.getLowerBound(), loop.getUpperBound(), loop.getStep())) {
    auto l = getConstantIntValue(lb), u = getConstantIntValue(ub),
         s = getConstantIntValue(step);
    if (!l || !u || !s || *s <= 0)
      return loop.emitError("parallel loop with non-constant bounds");
    int64_t count = std::max<int64_t>(0, (*u - *l + *s - 1) / *s);
    lower.push_back(*l);
    counts.push_back(count);
    steps.push_back(*s);
    points *= count;
    if (points > (int64_t(1) << 40))
      return loop.emitError("kernel of more than 2^40 points");
  }

  OpBuilder b(loop);
  Location loc = loop.getLoc();
  auto index = [&](int64_t v) {
    return arith::ConstantIndexOp::create(b, loc, v).getResult();
  };
  Value block = gpu::BlockIdOp::create(b, loc, gpu::Dimension::x);
  Value thread = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
  Value linear = arith::AddIOp::create(
      b, loc, arith::MulIOp::create(b, loc, block, index(blockSize)), thread);
  Value inside = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                       linear, index(points));
  auto guard = scf::IfOp::create(b, loc, inside, /*withElseRegion=*/false);
  b.setInsertionPointToStart(guard.thenBlock());
  // The last loop dimension varies fastest, so neighbouring threads touch
  // neighbouring elements of row-major buffers.
  IRMapping mapping;
  Value rest = linear;
  for (int64_t d = static_cast<int64_t>(counts.size()) - 1; d >= 0; --d) {
    Value position = rest;
    if (d > 0) {
      position = arith::RemUIOp::create(b, loc, rest, index(counts[d]));
      rest = arith::DivUIOp::create(b, loc, rest, index(counts[d]));
    }
    Value iv = position;
    if (steps[d] != 1)
      iv = arith::MulIOp::create(b, loc, iv, index(steps[d]));
    if (lower[d] != 0)
      iv = arith::AddIOp::create(b, loc, iv, index(lower[d]));
    mapping.map(loop.getInductionVars()[d], iv);
  }
  for (Operation &op : loop.getBody()->without_terminator())
    b.clone(op, mapping);
  loop.erase();
  return points;
}

struct KilnGPUOutlineKernelsPass
    : kiln::impl::KilnGPUOutlineKernelsBase<KilnGPUOutlineKernelsPass> {
  using KilnGPUOutlineKernelsBase::KilnGPUOutlineKernelsBase;

  void runOnOperation() override {
    if (blockSize < 32 || blockSize > 1024 || blockSize % 32 != 0) {
      getOperation().emitError("block-size must be a multiple of 32 up to "
                               "1024, not ")
          << blockSize;
      return signalPassFailure();
    }
    // A pass instance may run on several modules (--split-input-file).
    gpuModule = {};
    bodies.clear();
    fillsBefore.clear();
    globals.clear();
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> entries;
    for (auto function : module.getOps<func::FuncOp>())
      if (!function.isExternal())
        entries.push_back(function);
    for (func::FuncOp entry : entries) {
      // Products first: preparing one erases its zero fill. They stay on
      // the host, and so do the bias broadcasts their epilogues replace.
      llvm::SmallPtrSet<Operation *, 16> library;
      for (auto generic : llvm::make_early_inc_range(
               entry.getBody().front().getOps<linalg::GenericOp>()))
        prepareGemm(generic, library);
      SmallVector<Operation *> kernels;
      for (Operation &op : entry.getBody().front())
        if (isKernel(&op) && !library.contains(&op))
          kernels.push_back(&op);
      // Fills that reductions may make dead wait for their reduction.
      llvm::SmallPtrSet<Operation *, 16> deferred;
      for (Operation *kernel : kernels)
        if (auto generic = dyn_cast<linalg::GenericOp>(kernel))
          for (OpOperand &out : generic.getDpsInitsMutable())
            if (linalg::FillOp fill = fillBeforeReduction(generic, &out)) {
              fillsBefore[kernel].push_back({out.getOperandNumber(), fill});
              deferred.insert(fill);
            }
      int64_t next = 0;
      for (Operation *kernel : kernels)
        if (!deferred.contains(kernel) && failed(outline(entry, kernel, next)))
          return signalPassFailure();
    }
    if (!gpuModule)
      return;
    module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                    UnitAttr::get(module.getContext()));
    // Constant buffers the kernels read live in the device code.
    OpBuilder b(gpuModule.getBodyRegion());
    for (memref::GlobalOp global : globals)
      b.clone(*global);
  }

  /// Adds `op` to `library` when it is a product the target hands to
  /// cuBLASLt, with the bias broadcast its epilogue replaces, if any. Its
  /// zero fill (dead, since the library can overwrite instead of
  /// accumulating) is erased and the product marked `overwrite`; so is its
  /// bias gradient's, marked `bias_grad_overwrite`.
  void prepareGemm(linalg::GenericOp op,
                   llvm::SmallPtrSetImpl<Operation *> &library) {
    std::optional<kiln::GemmDescription> gemm = kiln::describeGemm(op);
    // What cuBLASLt multiplies: f32, f16 or bf16 operands (describeGemm
    // checked that 16-bit ones accumulate into f32 or their own type).
    Type element =
        gemm ? cast<MemRefType>(gemm->lhs.getType()).getElementType() : Type();
    if (!gemm || (!element.isF32() && !element.isF16() && !element.isBF16())) {
      // A product with a bias gradient cuBLASLt will not compute is the
      // product and the sum again: as one kernel, every thread of a column
      // would write the column's sum.
      if (kiln::hasBiasGradOutput(op) && op.hasPureBufferSemantics())
        prepareGemm(kiln::splitBiasGrad(op), library);
      return;
    }
    auto markOverwritten = [&](linalg::FillOp fill, StringRef flag) {
      if (!fill)
        return;
      auto flags = op->getAttrOfType<DictionaryAttr>("kiln.matmul");
      NamedAttrList entries(flags);
      entries.set(flag, UnitAttr::get(op.getContext()));
      op->setAttr("kiln.matmul", entries.getDictionary(op.getContext()));
      fill.erase();
    };
    markOverwritten(gemm->zeroFill, "overwrite");
    markOverwritten(gemm->biasGradFill, "bias_grad_overwrite");
    library.insert(op);
    if (gemm->biasInit && kiln::asRootBuffer(gemm->bias))
      library.insert(gemm->biasInit);
    prepareGeluEpilogue(op, *gemm, library);
  }

  /// Hands `op`'s GELU epilogue (kiln-gemm-gelu) to the library with it
  /// when the product can compute it in its place, earlier than the IR
  /// does: the epilogue's output, of the product's shape and type, overlaps
  /// nothing else the fused product reads or writes (its operands, bias
  /// and auxiliary matrix), and no op between the two touches that output,
  /// the auxiliary matrix or the product's own output. Else the two run as
  /// they are.
  void prepareGeluEpilogue(linalg::GenericOp op,
                           const kiln::GemmDescription &gemm,
                           llvm::SmallPtrSetImpl<Operation *> &library) {
    auto flags = op->getAttrOfType<DictionaryAttr>("kiln.matmul");
    if (!flags || !(flags.contains("gelu") || flags.contains("dgelu")))
      return;
    Value aux;
    SmallVector<Operation *> between;
    linalg::GenericOp epilogue = kiln::geluEpilogueOf(op, aux, &between);
    if (epilogue && geluEpilogueFits(gemm, epilogue, aux, between))
      library.insert(epilogue);
    else
      kiln::dropGeluEpilogue(op, epilogue);
  }

  static bool geluEpilogueFits(const kiln::GemmDescription &gemm,
                               linalg::GenericOp epilogue, Value aux,
                               ArrayRef<Operation *> between) {
    Value result = epilogue.getDpsInits()[0];
    auto outType = cast<MemRefType>(gemm.out.getType());
    auto resultType = cast<MemRefType>(result.getType());
    std::optional<ByteRange> output = kiln::viewedBytes(result);
    if (gemm.batch != 1 || !output ||
        resultType.getNumElements() != outType.getNumElements() ||
        resultType.getElementType() != outType.getElementType() ||
        !kiln::isPlainBuffer(resultType) || !kiln::isPlainBuffer(outType))
      return false;
    SmallVector<Value, 4> read = {gemm.lhs, gemm.rhs};
    if (gemm.bias)
      read.push_back(gemm.bias);
    if (aux)
      read.push_back(aux);
    for (Value other : read) {
      std::optional<ByteRange> bytes = kiln::viewedBytes(other);
      if (!bytes || bytes->overlaps(*output))
        return false;
    }
    SmallVector<Value, 3> kept = {result, gemm.out};
    if (aux)
      kept.push_back(aux);
    for (Value value : kept) {
      std::optional<ByteRange> bytes = kiln::viewedBytes(value);
      if (!bytes || llvm::any_of(between, [&](Operation *other) {
            return kiln::touches(other, *bytes);
          }))
        return false;
    }
    return true;
  }

  /// Whether `op`, in an entry block, is work the device does: a linalg op,
  /// a copy, a loop or anything else that writes memory. Constants, views
  /// and scalar arithmetic only feed kernels, which clone what they use.
  static bool isKernel(Operation *op) {
    if (isa<linalg::LinalgOp, memref::CopyOp>(op))
      return true;
    // An op with results (a buffer, a loaded scalar) is not work a launch
    // can do; its users fail to outline if they need it.
    // Collectives, attention and layer norms are commands of their own: the
    // target makes them NCCL calls and the runtime's kernels.
    if (op->hasTrait<OpTrait::IsTerminator>() || op->getNumResults() > 0 ||
        isa<gpu::LaunchFuncOp, memref::DeallocOp, kiln::AllReduceMeanOp,
            kiln::ReduceScatterMeanOp, kiln::AllGatherOp, kiln::LocalShardOp,
            kiln::FlashAttentionOp, kiln::FlashAttentionGradOp,
            kiln::FusedLayerNormOp, kiln::FusedLayerNormGradOp>(op))
      return false;
    return op->getNumRegions() > 0 || !isPure(op);
  }

  /// Whether `v` can be recomputed inside a kernel: a constant, a constant
  /// global buffer, or pure scalar arithmetic on such values. Adds the ops
  /// that compute it to `inside`.
  bool addRecomputable(Value v, SetVector<Operation *> &inside) {
    Operation *def = v.getDefiningOp();
    if (!def)
      return false;
    if (auto global = dyn_cast<memref::GetGlobalOp>(def)) {
      auto symbol = SymbolTable::lookupNearestSymbolFrom<memref::GlobalOp>(
          def, global.getNameAttr());
      if (!symbol || !symbol.getConstant())
        return false;
      globals.insert(symbol);
      inside.insert(def);
      return true;
    }
    if (!def->hasTrait<OpTrait::ConstantLike>() &&
        (!isPure(def) || def->getNumRegions() > 0 ||
         isa<MemRefType>(v.getType())))
      return false;
    for (Value operand : def->getOperands())
      if (!addRecomputable(operand, inside))
        return false;
    inside.insert(def);
    return true;
  }

  gpu::GPUModuleOp getOrCreateGPUModule() {
    if (gpuModule)
      return gpuModule;
    ModuleOp module = getOperation();
    OpBuilder b(module.getBodyRegion());
    b.setInsertionPointToEnd(module.getBody());
    gpuModule = gpu::GPUModuleOp::create(b, module.getLoc(), "kiln_kernels");
    return gpuModule;
  }

  LogicalResult outline(func::FuncOp entry, Operation *kernel, int64_t &next) {
    SetVector<Value> captured;
    for (Value operand : kernel->getOperands())
      captured.insert(operand);
    for (Region &region : kernel->getRegions())
      getUsedValuesDefinedAbove(region, captured);

    // The buffers the kernel receives, and what it rebuilds inside.
    llvm::MapVector<Value, unsigned> roots;
    SetVector<Operation *> inside;
    auto addConstant = [&](Value v) { return addRecomputable(v, inside); };
    for (Value v : captured) {
      if (addConstant(v))
        continue;
      SmallVector<Operation *> chain;
      FailureOr<Value> root = traceToRoot(v, chain);
      if (failed(root))
        return kernel->emitError("reads a value that cannot be passed to a "
                                 "GPU kernel (not a constant, nor a view of "
                                 "an argument or arena buffer); not "
                                 "supported on the CUDA target yet");
      roots.insert({*root, roots.size()});
      for (Operation *view : chain) {
        for (Value operand : view->getOperands().drop_front())
          if (!addConstant(operand))
            return view->emitError("view with a non-constant operand cannot "
                                   "move into a GPU kernel");
        inside.insert(view);
      }
    }

    SmallVector<Type> argumentTypes;
    SmallVector<Value> arguments;
    for (auto &[root, position] : roots) {
      argumentTypes.push_back(root.getType());
      arguments.push_back(root);
    }
    gpu::GPUModuleOp module = getOrCreateGPUModule();
    OpBuilder b(module.getBodyRegion());
    b.setInsertionPointToEnd(module.getBody());
    std::string name = (entry.getName() + "_k" + std::to_string(next++)).str();
    if (std::string label = kiln::kernelLabelOf(kernel->getLoc());
        !label.empty())
      name += "_" + label;
    auto function = gpu::GPUFuncOp::create(
        b, kernel->getLoc(), name, b.getFunctionType(argumentTypes, {}));
    function->setAttr(gpu::GPUDialect::getKernelFuncAttrName(),
                      b.getUnitAttr());
    Block &kernelBody = function.getBody().front();
    b.setInsertionPointToStart(&kernelBody);
    IRMapping mapping;
    for (auto [i, root] : llvm::enumerate(arguments))
      mapping.map(root, kernelBody.getArgument(i));
    // In program order: every op comes after what it uses.
    SmallVector<Operation *> ordered(inside.begin(), inside.end());
    llvm::sort(ordered, [](Operation *x, Operation *y) {
      return x->isBeforeInBlock(y);
    });
    for (Operation *op : ordered)
      if (!mapping.contains(op->getResult(0)))
        b.clone(*op, mapping);
    Operation *cloned;
    if (auto copy = dyn_cast<memref::CopyOp>(kernel))
      cloned = linalg::makeMemRefCopyOp(b, kernel->getLoc(),
                                        mapping.lookup(copy.getSource()),
                                        mapping.lookup(copy.getTarget()));
    else
      cloned = b.clone(*kernel, mapping);
    gpu::ReturnOp::create(b, kernel->getLoc());

    // Anything else (a loop the lowering wrote, a scatter) runs as it is,
    // on one thread, as its iterations may depend on each other; but a
    // scatter-add gets a thread per update.
    if (auto linalgOp = dyn_cast<linalg::LinalgOp>(cloned)) {
      IRRewriter rewriter(b);
      rewriter.setInsertionPoint(cloned);
      if (auto generic = dyn_cast<linalg::GenericOp>(cloned)) {
        serializeUnindexedParallelDims(rewriter, generic);
        linalgOp = parallelDimsFirst(rewriter, generic);
      }
      if (failed(linalg::linalgOpToParallelLoops(rewriter, linalgOp)))
        return kernel->emitError("cannot turn this kernel into loops");
      rewriter.eraseOp(cloned);
    }
    parallelizeScatterAdds(function);
    FailureOr<int64_t> points = mapToThreads(function, blockSize);
    if (failed(points))
      return failure();
    carryElementsInRegisters(function);
    // A reduction whose output was just filled starts from the fill's value
    // instead of reading it back, and the fill goes; or it is a kernel
    // after all, launched where it was.
    auto fills = fillsBefore.find(kernel);
    if (fills != fillsBefore.end()) {
      SmallVector<std::pair<unsigned, linalg::FillOp>> pending =
          std::move(fills->second);
      fillsBefore.erase(fills);
      for (auto [operand, fill] : pending) {
        TypedAttr value;
        matchPattern(fill.getDpsInputs()[0], m_Constant(&value));
        SmallVector<Operation *> chain;
        FailureOr<Value> root = traceToRoot(kernel->getOperand(operand), chain);
        if (succeeded(root) &&
            startFromFill(function, mapping.lookup(*root), value))
          fill.erase();
        else if (failed(outline(entry, fill, next)))
          return failure();
      }
    }
    // A kernel over an empty tensor has nothing to do: no launch.
    if (*points == 0) {
      function.erase();
      kernel->erase();
      return success();
    }
    // Whole warps, except for kernels of fewer points (a kernel without
    // parallel loops runs on exactly one thread).
    int64_t threads =
        *points < 32
            ? *points
            : std::min<int64_t>(blockSize, llvm::alignTo(*points, int64_t(32)));
    int64_t blocks = llvm::divideCeil(*points, threads);
    if (blocks > std::numeric_limits<int32_t>::max())
      return kernel->emitError("kernel needs ")
             << blocks << " blocks, more than a grid holds";

    gpu::GPUFuncOp launched = kiln::deduplicateKernel(function, bodies);
    OpBuilder host(kernel);
    Location loc = kernel->getLoc();
    auto index = [&](int64_t v) {
      return arith::ConstantIndexOp::create(host, loc, v).getResult();
    };
    Value one = index(1);
    gpu::LaunchFuncOp::create(host, loc, launched, {index(blocks), one, one},
                              {index(threads), one, one},
                              /*dynamicSharedMemorySize=*/Value(), arguments);
    kernel->erase();
    return success();
  }

  gpu::GPUModuleOp gpuModule;
  /// The fills just before each reduction that may start from their values
  /// instead (fillBeforeReduction), with the operand each fills, until the
  /// reduction is outlined.
  llvm::DenseMap<Operation *, SmallVector<std::pair<unsigned, linalg::FillOp>>>
      fillsBefore;
  llvm::StringMap<gpu::GPUFuncOp> bodies;
  SetVector<memref::GlobalOp> globals;
};

} // namespace

gpu::GPUFuncOp
kiln::deduplicateKernel(gpu::GPUFuncOp kernel,
                        llvm::StringMap<gpu::GPUFuncOp> &bodies) {
  std::string key;
  {
    llvm::raw_string_ostream os(key);
    os << kernel.getFunctionType();
    kernel.getBody().front().print(os);
  }
  auto [it, inserted] = bodies.try_emplace(key, kernel);
  if (inserted)
    return kernel;
  kernel.erase();
  return it->second;
}
