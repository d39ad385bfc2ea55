//===- Buffers.cpp - the buffers a step's commands run on -----------------===//

#include "kiln/Transforms/Buffers.h"

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
