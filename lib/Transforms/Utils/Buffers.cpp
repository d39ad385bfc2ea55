//===- Buffers.cpp - the buffers a step's commands run on -----------------===//

#include "kiln/Transforms/Utils/Buffers.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;

bool kiln::isPlainBuffer(Type type) {
  auto memref = dyn_cast<MemRefType>(type);
  return memref && memref.hasStaticShape() && memref.getLayout().isIdentity();
}

std::optional<kiln::RootBuffer> kiln::asRootBuffer(Value v) {
  if (!isPlainBuffer(v.getType()))
    return std::nullopt;
  auto isEntryArgument = [](Value value) {
    auto arg = dyn_cast<BlockArgument>(value);
    return arg && arg.getOwner()->isEntryBlock() &&
           isa<FunctionOpInterface>(arg.getOwner()->getParentOp());
  };
  if (isEntryArgument(v))
    return RootBuffer{cast<BlockArgument>(v), 0};
  auto view = v.getDefiningOp<memref::ViewOp>();
  if (!view || !view.getSizes().empty() || !isEntryArgument(view.getSource()))
    return std::nullopt;
  std::optional<int64_t> shift = getConstantIntValue(view.getByteShift());
  if (!shift || *shift < 0)
    return std::nullopt;
  return RootBuffer{cast<BlockArgument>(view.getSource()), *shift};
}

Value kiln::bufferAddress(OpBuilder &b, Location loc, Value buffer) {
  Type ptr = LLVM::LLVMPointerType::get(b.getContext());
  Value base = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, buffer);
  Value integer = arith::IndexCastOp::create(b, loc, b.getI64Type(), base);
  return LLVM::IntToPtrOp::create(b, loc, ptr, integer);
}

func::FuncOp kiln::declareRuntimeFunction(ModuleOp module, StringRef name,
                                          FunctionType type) {
  if (auto existing = module.lookupSymbol<func::FuncOp>(name))
    return existing;
  OpBuilder b(module.getBodyRegion());
  auto function = func::FuncOp::create(b, module.getLoc(), name, type);
  function.setPrivate();
  return function;
}

FailureOr<Value> kiln::traceToRoot(Value v,
                                   SmallVectorImpl<Operation *> &chain) {
  SmallVector<Operation *> reversed;
  while (!asRootBuffer(v)) {
    Operation *def = v.getDefiningOp();
    auto view = dyn_cast_or_null<ViewLikeOpInterface>(def);
    if (!view || def->getNumResults() != 1)
      return failure();
    reversed.push_back(def);
    v = view.getViewSource();
  }
  chain.append(reversed.rbegin(), reversed.rend());
  return v;
}

Value kiln::viewRoot(Value v) {
  while (auto view = v.getDefiningOp<ViewLikeOpInterface>())
    v = view.getViewSource();
  return v;
}

BlockArgument kiln::storageOf(BlockArgument argument) {
  auto function =
      dyn_cast<FunctionOpInterface>(argument.getOwner()->getParentOp());
  auto updates = function ? function.getArgAttrOfType<StringAttr>(
                                argument.getArgNumber(), "kiln.update")
                          : StringAttr();
  if (!updates)
    return argument;
  for (unsigned i = 0, e = function.getNumArguments(); i != e; ++i)
    if (function.getArgAttrOfType<StringAttr>(i, "kiln.param") == updates)
      return function.getArgument(i);
  return argument;
}

std::optional<kiln::ByteRange> kiln::bytesOf(Value root) {
  std::optional<RootBuffer> buffer = asRootBuffer(root);
  auto type = dyn_cast<MemRefType>(root.getType());
  if (!buffer || !type || !type.hasStaticShape())
    return std::nullopt;
  int64_t bytes =
      (type.getElementTypeBitWidth() + 7) / 8 * type.getNumElements();
  return ByteRange{storageOf(buffer->argument), buffer->byteOffset,
                   buffer->byteOffset + std::max<int64_t>(1, bytes)};
}

std::optional<kiln::ByteRange> kiln::viewedBytes(Value v) {
  SmallVector<Operation *> chain;
  FailureOr<Value> root = traceToRoot(v, chain);
  return succeeded(root) ? bytesOf(*root) : std::nullopt;
}

bool kiln::touchedBytes(Operation *op, SmallVectorImpl<ByteRange> &bytes) {
  if (op->getNumRegions() == 0 && isPure(op))
    return true;
  llvm::SetVector<Value> used(op->getOperands().begin(),
                              op->getOperands().end());
  for (Region &region : op->getRegions())
    getUsedValuesDefinedAbove(region, used);
  for (Value v : used) {
    if (!isa<BaseMemRefType>(v.getType()))
      continue;
    std::optional<ByteRange> range = viewedBytes(v);
    if (!range)
      return false;
    bytes.push_back(*range);
  }
  return true;
}

bool kiln::touches(Operation *op, const ByteRange &bytes) {
  SmallVector<ByteRange> used;
  return !touchedBytes(op, used) ||
         llvm::any_of(used, [&](const ByteRange &range) {
           return range.overlaps(bytes);
         });
}
