//===- GPUMergeLaunches.cpp - independent kernels as one launch -----------===//
//
// A step of a transformer launches hundreds of small kernels that do not
// depend on each other: the bf16 copies of the weights, the query, key and
// value transposes, the optimizer's per-parameter updates. Each launch costs
// the GPU a few microseconds however little it does, so this pass launches
// each group of such kernels as one: the merged grid is the members' grids
// one after another, and each block runs the body of the member it belongs
// to.
//
//===----------------------------------------------------------------------===//

#include "kiln/KilnOps.h"
#include "kiln/Target/CUDA/GPUKernels.h"
#include "kiln/Target/CUDA/Passes.h"
#include "kiln/Transforms/Utils/Buffers.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/TypeSwitch.h"

#include <limits>
#include <memory>

namespace kiln {
#define GEN_PASS_DEF_KILNGPUMERGELAUNCHES
#include "kiln/Target/CUDA/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using kiln::ByteRange;

namespace {

/// The part of a buffer a kernel touches: the buffer's bytes and, when the
/// kernel reaches the buffer only through subviews at constant offsets,
/// sizes and strides, the boxes of indices those cover ([first, last] in
/// each dimension of the buffer's type).
struct Footprint {
  using Box = SmallVector<std::pair<int64_t, int64_t>, 4>;
  ByteRange bytes;
  Type type;
  std::optional<SmallVector<Box, 1>> boxes;
};

bool overlap(const ByteRange &x, const Footprint &y) {
  return x.overlaps(y.bytes);
}

bool overlap(const Footprint &x, const Footprint &y) {
  if (!x.bytes.overlaps(y.bytes))
    return false;
  // Boxes of the same buffer, indexed alike: apart when, for every pair,
  // some dimension's ranges are.
  if (!x.boxes || !y.boxes || x.type != y.type ||
      x.bytes.first != y.bytes.first || x.bytes.end != y.bytes.end)
    return true;
  return llvm::any_of(*x.boxes, [&](const Footprint::Box &a) {
    return llvm::any_of(*y.boxes, [&](const Footprint::Box &b) {
      return llvm::all_of(llvm::zip(a, b), [](auto ranges) {
        auto [p, q] = ranges;
        return p.first <= q.second && q.first <= p.second;
      });
    });
  });
}

template <typename X, typename Y>
bool overlapsAny(ArrayRef<X> xs, ArrayRef<Y> ys) {
  return llvm::any_of(xs, [&](const X &x) {
    return llvm::any_of(ys, [&](const Y &y) { return overlap(x, y); });
  });
}

/// A launch that can join a merged one: its sizes, and what it reads and
/// writes.
struct Launch {
  gpu::LaunchFuncOp op;
  gpu::GPUFuncOp kernel;
  int64_t blocks = 0, threads = 0;
  SmallVector<Footprint, 4> reads, writes;
};

/// Whether `x` and `y` may run at the same time: neither writes what the
/// other reads or writes.
bool independent(const Launch &x, const Launch &y) {
  return !overlapsAny<Footprint, Footprint>(x.writes, y.writes) &&
         !overlapsAny<Footprint, Footprint>(x.writes, y.reads) &&
         !overlapsAny<Footprint, Footprint>(x.reads, y.writes);
}

/// Whether the kernel reaches no element of `view` but its own: it only
/// loads, stores and takes views that re-index or narrow it.
bool staysInside(Value view) {
  return llvm::all_of(view.getUsers(), [&](Operation *user) {
    if (isa<memref::LoadOp, memref::StoreOp, memref::AtomicRMWOp>(user))
      return true;
    if (isa<memref::SubViewOp, memref::ExpandShapeOp, memref::CollapseShapeOp,
            memref::TransposeOp>(user))
      return staysInside(user->getResult(0));
    return false;
  });
}

/// The boxes of kernel argument `buffer` the kernel touches, when it
/// reaches it only through subviews at constant offsets, sizes and strides.
std::optional<SmallVector<Footprint::Box, 1>> boxesOf(Value buffer) {
  SmallVector<Footprint::Box, 1> boxes;
  for (Operation *user : buffer.getUsers()) {
    auto subview = dyn_cast<memref::SubViewOp>(user);
    if (!subview || !staysInside(subview.getResult()))
      return std::nullopt;
    Footprint::Box box;
    for (auto [offset, size, stride] :
         llvm::zip(subview.getStaticOffsets(), subview.getStaticSizes(),
                   subview.getStaticStrides())) {
      if (ShapedType::isDynamic(offset) || ShapedType::isDynamic(size) ||
          ShapedType::isDynamic(stride))
        return std::nullopt;
      box.push_back({offset, offset + std::max<int64_t>(size - 1, 0) * stride});
    }
    boxes.push_back(std::move(box));
  }
  return boxes;
}

/// Whether the kernel only loads from `buffer` (through any views of it).
bool onlyLoaded(Value buffer) {
  SmallVector<Value> pending = {buffer};
  while (!pending.empty()) {
    Value v = pending.pop_back_val();
    for (Operation *user : v.getUsers()) {
      if (isa<memref::LoadOp>(user))
        continue;
      auto view = dyn_cast<ViewLikeOpInterface>(user);
      if (!view || view.getViewSource() != v)
        return false;
      llvm::append_range(pending, user->getResults());
    }
  }
  return true;
}

/// `launch` as a possible member of a merged launch, or std::nullopt when
/// it cannot be one: it is asynchronous, uses shared memory or a dimension
/// other than x, synchronizes its block, or receives a buffer that is not
/// an argument or arena slot.
std::optional<Launch> describe(gpu::LaunchFuncOp launch) {
  if (launch.getAsyncToken() || !launch.getAsyncDependencies().empty() ||
      launch.getDynamicSharedMemorySize() || launch.hasClusterSize())
    return std::nullopt;
  gpu::KernelDim3 grid = launch.getGridSizeOperandValues();
  gpu::KernelDim3 block = launch.getBlockSizeOperandValues();
  std::optional<int64_t> blocks = getConstantIntValue(grid.x),
                         threads = getConstantIntValue(block.x);
  if (!blocks || !threads || *blocks <= 0 || *threads <= 0)
    return std::nullopt;
  for (Value size : {grid.y, grid.z, block.y, block.z})
    if (getConstantIntValue(size) != 1)
      return std::nullopt;
  auto kernel = SymbolTable::lookupNearestSymbolFrom<gpu::GPUFuncOp>(
      launch, launch.getKernel());
  if (!kernel || !kernel.getBody().hasOneBlock() ||
      kernel.getNumWorkgroupAttributions() != 0 ||
      kernel.getNumPrivateAttributions() != 0 ||
      kernel.getNumArguments() != launch.getNumKernelOperands())
    return std::nullopt;
  // The ids and sizes along x are all a member may ask for: its block id is
  // what the merged kernel renumbers, and the grid size is its own.
  WalkResult unsupported = kernel.walk([&](Operation *op) {
    // Memory other than global (a workgroup buffer) and NVVM's own ops (a
    // barrier, a shuffle) would need every thread of the block, which a
    // member's guard leaves out.
    if (op->getDialect() && op->getDialect()->getNamespace() == "nvvm")
      return WalkResult::interrupt();
    for (Type type : op->getResultTypes())
      if (auto memref = dyn_cast<MemRefType>(type);
          memref && memref.getMemorySpace())
        return WalkResult::interrupt();
    if (op == kernel || !isa<gpu::GPUDialect>(op->getDialect()))
      return WalkResult::advance();
    if (isa<gpu::ReturnOp>(op) && op->getParentOp() == kernel)
      return WalkResult::advance();
    return TypeSwitch<Operation *, WalkResult>(op)
        .Case<gpu::BlockIdOp, gpu::ThreadIdOp, gpu::BlockDimOp, gpu::GridDimOp>(
            [](auto id) {
              return id.getDimension() == gpu::Dimension::x
                         ? WalkResult::advance()
                         : WalkResult::interrupt();
            })
        .Default([](Operation *) { return WalkResult::interrupt(); });
  });
  if (unsupported.wasInterrupted())
    return std::nullopt;

  Launch described{launch, kernel, *blocks, *threads, {}, {}};
  for (auto [operand, argument] :
       llvm::zip(launch.getKernelOperands(), kernel.getArguments())) {
    std::optional<ByteRange> bytes = kiln::bytesOf(operand);
    if (!bytes)
      return std::nullopt;
    (onlyLoaded(argument) ? described.reads : described.writes)
        .push_back({*bytes, operand.getType(), boxesOf(argument)});
  }
  return described;
}

/// Whether `value` is available at `at` once the pure ops computing it in
/// `at`'s block move before `at`; moves them when `move` is set.
bool hoistBefore(Value value, Operation *at, bool move) {
  Operation *def = value.getDefiningOp();
  if (!def || def->getBlock() != at->getBlock() || def->isBeforeInBlock(at))
    return true;
  if (!isPure(def) || def->getNumRegions() != 0)
    return false;
  for (Value operand : def->getOperands())
    if (!hoistBefore(operand, at, move))
      return false;
  if (move)
    def->moveBefore(at);
  return true;
}

/// Launches merged into one, at the place of the first; the others follow
/// it directly until the merged launch replaces them all.
struct Group {
  SmallVector<Launch, 4> members;
  /// The merged grid, and its blocks' size: the largest member's. A member
  /// with smaller blocks leaves the threads past its own idle.
  int64_t blocks = 0, threads = 0;
  /// The threads the members asked for, all blocks together.
  int64_t used = 0;
  /// The buffers the merged kernel receives.
  llvm::SmallDenseSet<Value, 16> arguments;

  /// Kernel parameters take at most 4 KiB before PTX ISA 8.1, and each
  /// buffer is one 8-byte pointer; half of that leaves room to spare.
  static constexpr size_t kMaxArguments = 256;
  /// Members of different block sizes merge while the merged grid is at
  /// most this many blocks (less than one wave: an A100's 108
  /// multiprocessors hold 8 blocks of 256 threads each, so what such a
  /// launch costs is mostly the launch), or while its idle threads are at
  /// most a quarter of those it runs.
  static constexpr int64_t kSmallGrid = 256;

  bool accepts(const Launch &launch) const {
    gpu::LaunchFuncOp op = launch.op;
    size_t added = llvm::count_if(op.getKernelOperands(), [&](Value v) {
      return !arguments.contains(v);
    });
    int64_t mergedBlocks = blocks + launch.blocks;
    if (mergedBlocks > std::numeric_limits<int32_t>::max() ||
        arguments.size() + added > kMaxArguments)
      return false;
    int64_t mergedThreads = std::max(threads, launch.threads);
    int64_t run = mergedBlocks * mergedThreads;
    int64_t asked = used + launch.blocks * launch.threads;
    return mergedBlocks <= kSmallGrid || 4 * (run - asked) <= run;
  }

  void add(Launch launch) {
    blocks += launch.blocks;
    threads = std::max(threads, launch.threads);
    used += launch.blocks * launch.threads;
    arguments.insert(launch.op.getKernelOperands().begin(),
                     launch.op.getKernelOperands().end());
    members.push_back(std::move(launch));
  }
};

struct KilnGPUMergeLaunchesPass
    : kiln::impl::KilnGPUMergeLaunchesBase<KilnGPUMergeLaunchesPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    bodies.clear();
    merged = 0;
    SetVector<gpu::GPUFuncOp> replaced;
    for (auto entry : module.getOps<func::FuncOp>()) {
      if (entry.isExternal())
        continue;
      std::vector<std::unique_ptr<Group>> groups = group(entry);
      for (const std::unique_ptr<Group> &g : groups) {
        if (g->members.size() < 2)
          continue;
        for (const Launch &member : g->members)
          replaced.insert(member.kernel);
        launchMerged(entry, *g);
      }
    }
    // Kernels only merged launches ran are gone with them.
    for (gpu::GPUFuncOp kernel : replaced)
      if (SymbolTable::symbolKnownUseEmpty(kernel, module))
        kernel.erase();
  }

  /// The groups of `entry`'s launches, each member moved right after the
  /// group's previous member: a launch joins the earliest group it can
  /// reach.
  std::vector<std::unique_ptr<Group>> group(func::FuncOp entry) {
    std::vector<std::unique_ptr<Group>> groups;
    llvm::DenseMap<Operation *, std::pair<Group *, unsigned>> memberOf;
    // The bytes each other op names (std::nullopt: unknown ones).
    llvm::DenseMap<Operation *, std::optional<SmallVector<ByteRange>>> named;
    auto bytesNamedBy =
        [&](Operation *op) -> const std::optional<SmallVector<ByteRange>> & {
      auto [it, inserted] = named.try_emplace(op);
      if (inserted) {
        SmallVector<ByteRange> bytes;
        if (kiln::touchedBytes(op, bytes))
          it->second = std::move(bytes);
      }
      return it->second;
    };

    // A launch that touches what a collective before it averages or
    // gathers waits for that collective alone, and runs beside the later
    // ones: it stays on its own.
    SmallVector<Operation *> collectives;
    for (Operation &op : entry.getBody().front())
      if (isa<kiln::AllReduceMeanOp, kiln::ReduceScatterMeanOp,
              kiln::AllGatherOp>(op))
        collectives.push_back(&op);
    auto waitsForCollective = [&](const Launch &launch) {
      return llvm::any_of(collectives, [&](Operation *collective) {
        if (!collective->isBeforeInBlock(launch.op))
          return false;
        const std::optional<SmallVector<ByteRange>> &bytes =
            bytesNamedBy(collective);
        return !bytes ||
               overlapsAny<ByteRange, Footprint>(*bytes, launch.reads) ||
               overlapsAny<ByteRange, Footprint>(*bytes, launch.writes);
      });
    };

    SmallVector<gpu::LaunchFuncOp> launches(
        entry.getBody().front().getOps<gpu::LaunchFuncOp>());
    for (gpu::LaunchFuncOp op : launches) {
      std::optional<Launch> launch = describe(op);
      if (!launch || waitsForCollective(*launch))
        continue;
      Group *target = nullptr;
      for (Operation *x = op->getPrevNode(); x; x = x->getPrevNode()) {
        auto member = memberOf.find(x);
        if (member != memberOf.end()) {
          auto [g, index] = member->second;
          if (!independent(*launch, g->members[index]))
            break;
          // The earliest group that takes the launch (see Passes.td).
          if (index == 0 && g->accepts(*launch) &&
              llvm::all_of(op.getKernelOperands(), [&](Value operand) {
                return hoistBefore(operand, x, /*move=*/false);
              }))
            target = g;
          continue;
        }
        // Anything else stays where it is, so the launch must not touch
        // what it names.
        const std::optional<SmallVector<ByteRange>> &bytes = bytesNamedBy(x);
        if (!bytes ||
            overlapsAny<ByteRange, Footprint>(*bytes, launch->reads) ||
            overlapsAny<ByteRange, Footprint>(*bytes, launch->writes))
          break;
      }
      if (!target) {
        groups.push_back(std::make_unique<Group>());
        target = groups.back().get();
      } else {
        // The merged launch, at the first member's place, passes what the
        // members receive.
        for (Value operand : op.getKernelOperands())
          hoistBefore(operand, target->members.front().op, /*move=*/true);
        op->moveAfter(target->members.back().op);
      }
      memberOf[op] = {target, static_cast<unsigned>(target->members.size())};
      target->add(std::move(*launch));
    }
    return groups;
  }

  /// Replaces the launches of `g` by one of a kernel that runs them all.
  void launchMerged(func::FuncOp entry, Group &g) {
    Launch &first = g.members.front();
    Location loc = first.op.getLoc();
    llvm::MapVector<Value, unsigned> arguments;
    for (Launch &member : g.members)
      for (Value operand : member.op.getKernelOperands())
        arguments.insert({operand, arguments.size()});
    SmallVector<Type> types;
    SmallVector<Value> operands;
    for (auto &[operand, position] : arguments) {
      types.push_back(operand.getType());
      operands.push_back(operand);
    }

    auto gpuModule = first.kernel->getParentOfType<gpu::GPUModuleOp>();
    OpBuilder b(gpuModule.getBodyRegion());
    b.setInsertionPointToEnd(gpuModule.getBody());
    std::string name;
    do
      name = (entry.getName() + "_m" + Twine(merged++)).str();
    while (SymbolTable::lookupSymbolIn(gpuModule, name));
    auto kernel =
        gpu::GPUFuncOp::create(b, loc, name, b.getFunctionType(types, {}));
    kernel->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
    Block &body = kernel.getBody().front();
    b.setInsertionPointToStart(&body);
    auto index = [&](OpBuilder &at, int64_t v) -> Value {
      return arith::ConstantIndexOp::create(at, loc, v);
    };
    Value block = gpu::BlockIdOp::create(b, loc, gpu::Dimension::x);
    Value thread = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
    int64_t start = 0;
    for (Launch &member : g.members) {
      int64_t end = start + member.blocks;
      Value inside = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                           block, index(b, end));
      if (start > 0)
        inside = arith::AndIOp::create(
            b, loc, inside,
            arith::CmpIOp::create(b, loc, arith::CmpIPredicate::uge, block,
                                  index(b, start)));
      if (member.threads < g.threads)
        inside = arith::AndIOp::create(
            b, loc, inside,
            arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, thread,
                                  index(b, member.threads)));
      auto branch = scf::IfOp::create(b, loc, inside, /*withElseRegion=*/false);
      OpBuilder inner = OpBuilder::atBlockBegin(branch.thenBlock());
      Value own = block;
      if (start > 0)
        own = arith::SubIOp::create(inner, loc, block, index(inner, start));
      IRMapping mapping;
      for (auto [operand, argument] : llvm::zip(member.op.getKernelOperands(),
                                                member.kernel.getArguments()))
        mapping.map(argument, body.getArgument(arguments.lookup(operand)));
      for (Operation &op : member.kernel.getBody().front().without_terminator())
        inner.clone(op, mapping);
      // The member's block ids count from its first block, and its grid
      // and block size are its own; the thread id is read once for all
      // members.
      SmallVector<Operation *> ids;
      branch.thenBlock()->walk([&](Operation *op) {
        if (isa<gpu::BlockIdOp, gpu::ThreadIdOp, gpu::BlockDimOp,
                gpu::GridDimOp>(op))
          ids.push_back(op);
      });
      for (Operation *op : ids) {
        OpBuilder at(op);
        Value replacement =
            TypeSwitch<Operation *, Value>(op)
                .Case([&](gpu::BlockIdOp) { return own; })
                .Case([&](gpu::ThreadIdOp) { return thread; })
                .Case(
                    [&](gpu::BlockDimOp) { return index(at, member.threads); })
                .Default([&](Operation *) { return index(at, member.blocks); });
        op->getResult(0).replaceAllUsesWith(replacement);
        op->erase();
      }
      b.setInsertionPointAfter(branch);
      start = end;
    }
    gpu::ReturnOp::create(b, loc);
    kernel = kiln::deduplicateKernel(kernel, bodies);

    OpBuilder host(first.op);
    Value one = index(host, 1);
    gpu::LaunchFuncOp::create(host, loc, kernel,
                              {index(host, g.blocks), one, one},
                              {index(host, g.threads), one, one},
                              /*dynamicSharedMemorySize=*/Value(), operands);
    // The members' sizes go with them.
    SmallVector<Operation *> sizes;
    for (Launch &member : g.members) {
      for (Value operand : member.op->getOperands())
        if (Operation *def = operand.getDefiningOp())
          sizes.push_back(def);
      member.op.erase();
    }
    for (Operation *def : sizes)
      if (isOpTriviallyDead(def))
        def->erase();
  }

  llvm::StringMap<gpu::GPUFuncOp> bodies;
  int64_t merged = 0;
};

} // namespace
