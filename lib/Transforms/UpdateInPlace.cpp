//===- UpdateInPlace.cpp - write parameter updates into their storage -----===//
//
// After bufferization every result of an entry function is computed into a
// buffer of its own and copied into its out-parameter at the end. For an
// output that updates a parameter (kiln.update), the runtime passes the
// parameter's own storage as that out-parameter, so the copy is there only
// because the new value may not overwrite the old one before its last read.
// This pass removes the copy, and the buffer, where the elementwise kernel
// that computes the new value can write straight into the parameter: every
// other read of the old value happens before it (moving the kernel down past
// the last one when nothing in between touches its inputs or output), and the
// kernel itself reads the old value only at the element it writes.
//
//===----------------------------------------------------------------------===//

#include "kiln/Transforms/Passes.h"
#include "kiln/Transforms/Utils/Buffers.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

namespace kiln {
#define GEN_PASS_DEF_KILNUPDATEINPLACE
#include "kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace {

/// The buffer a memref value is a view of (following view-like ops).
Value rootOf(Value v) {
  while (auto view = v.getDefiningOp<ViewLikeOpInterface>())
    v = view.getViewSource();
  return v;
}

/// The buffers whose aligned pointers flow into `v` (a call operand built
/// from memref.extract_aligned_pointer_as_index and address arithmetic).
void pointerRoots(Value v, SmallVectorImpl<Value> &roots, int depth = 0) {
  Operation *def = v.getDefiningOp();
  if (!def || depth > 8)
    return;
  if (auto extract = dyn_cast<memref::ExtractAlignedPointerAsIndexOp>(def)) {
    roots.push_back(rootOf(extract.getSource()));
    return;
  }
  for (Value operand : def->getOperands())
    pointerRoots(operand, roots, depth + 1);
}

/// What one top-level op reads and writes, as root buffers.
struct Access {
  SmallVector<Value, 4> reads, writes;
  bool touches(Value root) const {
    return llvm::is_contained(reads, root) || llvm::is_contained(writes, root);
  }
};

/// What `op` reads and writes, as the buffers its operands view.
Access accessOfBuffers(Operation *op) {
  Access a;
  if (isa<memref::AllocOp, memref::DeallocOp,
          memref::ExtractAlignedPointerAsIndexOp, ViewLikeOpInterface>(op))
    return a;
  if (auto linalgOp = dyn_cast<linalg::LinalgOp>(op)) {
    for (OpOperand *input : linalgOp.getDpsInputOperands())
      if (isa<BaseMemRefType>(input->get().getType()))
        a.reads.push_back(rootOf(input->get()));
    for (OpOperand &init : linalgOp.getDpsInitsMutable()) {
      a.writes.push_back(rootOf(init.get()));
      if (linalgOp.payloadUsesValueFromOperand(&init))
        a.reads.push_back(rootOf(init.get()));
    }
    return a;
  }
  if (auto copy = dyn_cast<memref::CopyOp>(op)) {
    a.reads.push_back(rootOf(copy.getSource()));
    a.writes.push_back(rootOf(copy.getTarget()));
    return a;
  }
  // Scalar and address arithmetic touch no memory.
  bool usesMemory = isa<CallOpInterface>(op) || op->getNumRegions() > 0 ||
                    llvm::any_of(op->getOperandTypes(),
                                 [](Type t) { return isa<BaseMemRefType>(t); });
  if (!usesMemory)
    return a;
  // Anything else (library calls through raw pointers, loops): every buffer
  // it names, directly or through a pointer, is read and written.
  op->walk([&](Operation *inner) {
    for (Value operand : inner->getOperands()) {
      SmallVector<Value> roots;
      if (isa<BaseMemRefType>(operand.getType()))
        roots.push_back(rootOf(operand));
      else
        pointerRoots(operand, roots);
      for (Value root : roots) {
        a.reads.push_back(root);
        a.writes.push_back(root);
      }
    }
  });
  return a;
}

/// What `op` reads and writes. `aliases` maps an out-parameter to the
/// parameter whose storage it is at run time.
Access accessOf(Operation *op, const DenseMap<Value, Value> &aliases) {
  Access a = accessOfBuffers(op);
  for (SmallVectorImpl<Value> *roots : {&a.reads, &a.writes})
    for (Value &root : *roots)
      root = aliases.lookup_or(root, root);
  return a;
}

struct KilnUpdateInPlacePass
    : kiln::impl::KilnUpdateInPlaceBase<KilnUpdateInPlacePass> {
  void runOnOperation() override {
    for (auto function : getOperation().getOps<func::FuncOp>())
      if (!function.isExternal())
        updateInPlace(function);
  }

  void updateInPlace(func::FuncOp function) {
    aliases.clear();
    for (BlockArgument argument : function.getArguments())
      if (BlockArgument param = kiln::storageOf(argument); param != argument)
        aliases[argument] = param;
    // One update can unblock another (a kernel that wrote into a buffer the
    // next one reads now writes the parameter): repeat until nothing moves.
    for (bool changed = true; changed;) {
      changed = false;
      for (BlockArgument out : function.getArguments()) {
        Value param = aliases.lookup(out);
        if (!param || !out.hasOneUse())
          continue;
        auto copy = dyn_cast<memref::CopyOp>(*out.getUsers().begin());
        if (copy && copy.getTarget() == out &&
            succeeded(
                writeInPlace(function.getBody().front(), copy, param, out)))
          changed = true;
      }
    }
  }

  DenseMap<Value, Value> aliases;

  /// Makes the last writer of the copy's source write `out` directly.
  LogicalResult writeInPlace(Block &block, memref::CopyOp copy, Value param,
                             Value out) {
    Value source = copy.getSource();
    if (!source.getDefiningOp<memref::AllocOp>() || copy->getBlock() != &block)
      return failure();
    SmallVector<Operation *> ops;
    SmallVector<Access> accesses;
    for (Operation &op : block) {
      ops.push_back(&op);
      accesses.push_back(accessOf(&op, aliases));
    }
    auto position = [&](Operation *op) {
      return static_cast<int64_t>(llvm::find(ops, op) - ops.begin());
    };
    int64_t copyAt = position(copy);
    // The last writer of the source before the copy, and no use after it.
    int64_t writerAt = -1;
    for (int64_t i = 0; i < static_cast<int64_t>(ops.size()); ++i) {
      if (i > copyAt && accesses[i].touches(source))
        return failure();
      if (i < copyAt && llvm::is_contained(accesses[i].writes, source))
        writerAt = i;
    }
    if (writerAt < 0)
      return failure();
    auto writer = dyn_cast<linalg::GenericOp>(ops[writerAt]);
    if (!writer || writer.getNumParallelLoops() != writer.getNumLoops())
      return failure();
    // The output that holds the new value (an optimizer update may write the
    // parameter and its states in one loop).
    OpOperand *written = nullptr;
    for (OpOperand &candidate : writer.getDpsInitsMutable())
      if (candidate.get() == source)
        written = &candidate;
    if (!written)
      return failure();
    OpOperand &init = *written;
    AffineMap initMap = writer.getMatchingIndexingMap(&init);
    if (init.get() != source || !initMap.isPermutation() ||
        writer.payloadUsesValueFromOperand(&init))
      return failure();
    // The writer may read the old value only at the element it writes.
    for (OpOperand *input : writer.getDpsInputOperands()) {
      if (rootOf(input->get()) != param)
        continue;
      if (input->get() != param ||
          writer.getMatchingIndexingMap(input) != initMap)
        return failure();
    }
    // Every other read of the old value must come first: move the writer
    // down past the last one if nothing in between touches what it reads or
    // writes.
    int64_t lastRead = -1;
    for (int64_t i = 0; i < static_cast<int64_t>(ops.size()); ++i)
      if (i != writerAt && i != copyAt && accesses[i].touches(param))
        lastRead = i;
    if (lastRead > writerAt) {
      const Access &moved = accesses[writerAt];
      for (int64_t i = writerAt + 1; i <= lastRead; ++i) {
        if (accesses[i].touches(source) ||
            llvm::any_of(moved.reads, [&](Value root) {
              return llvm::is_contained(accesses[i].writes, root);
            }))
          return failure();
        // Operands the writer uses must be defined before its new place.
        for (Value operand : writer->getOperands())
          if (operand.getDefiningOp() == ops[i])
            return failure();
      }
      writer->moveAfter(ops[lastRead]);
    }
    // The new value now lives in the parameter's storage.
    init.set(out);
    source.replaceUsesWithIf(out, [&](OpOperand &use) {
      Operation *user = block.findAncestorOpInBlock(*use.getOwner());
      return user && user != copy && writer->isBeforeInBlock(user);
    });
    copy.erase();
    if (source.use_empty())
      source.getDefiningOp()->erase();
    return success();
  }
};

} // namespace
