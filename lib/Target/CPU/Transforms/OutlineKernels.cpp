//===- OutlineKernels.cpp - one function per kernel -----------------------===//
//
// A training step is one entry function with hundreds of kernels. LLVM's
// optimizer and instruction scheduler grow faster than linearly with the size
// of a function and of its basic blocks, so compiling it whole took minutes
// for a four-layer transformer. Each kernel (a linalg op or a copy, before
// it becomes loops) moves into a private function of its own, marked
// noinline, and the entry function keeps a call: LLVM then optimizes many
// small functions, and the entry block holds only buffer addresses and calls.
//
//===----------------------------------------------------------------------===//

#include "kiln/Target/CPU/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Transforms/RegionUtils.h"

namespace kiln {
#define GEN_PASS_DEF_KILNOUTLINEKERNELS
#include "kiln/Target/CPU/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace {

/// Whether `v` can be a kernel argument under the bare-pointer calling
/// convention the entry functions use: a statically shaped, contiguous
/// memref, or a scalar.
bool passable(Value v) {
  if (auto memref = dyn_cast<MemRefType>(v.getType()))
    return memref.hasStaticShape() && memref.getLayout().isIdentity();
  return v.getType().isIntOrIndexOrFloat();
}

struct KilnOutlineKernelsPass
    : kiln::impl::KilnOutlineKernelsBase<KilnOutlineKernelsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> entries;
    for (auto function : module.getOps<func::FuncOp>())
      if (!function.isExternal())
        entries.push_back(function);
    for (func::FuncOp entry : entries) {
      int64_t next = 0;
      SmallVector<Operation *> kernels;
      for (Operation &op : entry.getBody().front())
        if (isa<linalg::LinalgOp, memref::CopyOp>(op))
          kernels.push_back(&op);
      for (Operation *kernel : kernels)
        outline(module, entry, kernel, next);
    }
  }

  void outline(ModuleOp module, func::FuncOp entry, Operation *kernel,
               int64_t &next) {
    // Arguments: the kernel's operands and the values its body uses from
    // outside, except constants, which are cloned in.
    SetVector<Value> captured;
    for (Value operand : kernel->getOperands())
      captured.insert(operand);
    for (Region &region : kernel->getRegions())
      getUsedValuesDefinedAbove(region, captured);
    SmallVector<Value> arguments;
    SmallVector<Operation *> constants;
    for (Value v : captured) {
      Operation *def = v.getDefiningOp();
      if (def && def->hasTrait<OpTrait::ConstantLike>()) {
        constants.push_back(def);
        continue;
      }
      if (!passable(v))
        return;
      arguments.push_back(v);
    }

    OpBuilder b(module.getBodyRegion());
    b.setInsertionPointAfter(entry);
    auto type = b.getFunctionType(ValueRange(arguments).getTypes(), {});
    std::string name = (entry.getName() + "_kernel" + Twine(next++)).str();
    auto function = func::FuncOp::create(b, kernel->getLoc(), name, type);
    function.setPrivate();
    function->setAttr("passthrough",
                      b.getArrayAttr({b.getStringAttr("noinline")}));
    Block *body = function.addEntryBlock();
    OpBuilder kb = OpBuilder::atBlockBegin(body);
    IRMapping mapping;
    for (auto [value, argument] : llvm::zip(arguments, body->getArguments()))
      mapping.map(value, argument);
    for (Operation *constant : constants)
      kb.clone(*constant, mapping);
    kb.clone(*kernel, mapping);
    func::ReturnOp::create(kb, kernel->getLoc());

    OpBuilder cb(kernel);
    func::CallOp::create(cb, kernel->getLoc(), function, arguments);
    kernel->erase();
  }
};

} // namespace
