//===- Buffers.cpp - the buffers a step's commands run on -----------------===//

#include "kiln/Transforms/Buffers.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

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
