//===- KilnDialect.cpp - registration of the kiln dialect -----------------===//

#include "kiln/KilnInterfaces.h"
#include "kiln/KilnOps.h"

#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace kiln;

#include "kiln/KilnDialect.cpp.inc"
#include "kiln/KilnEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "kiln/KilnAttrs.cpp.inc"

void KilnDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "kiln/KilnOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "kiln/KilnAttrs.cpp.inc"
      >();
  attachDifferentiationRules(*this);
}

Operation *KilnDialect::materializeConstant(OpBuilder &builder, Attribute value,
                                            Type type, Location loc) {
  auto elements = dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return ConstantOp::create(builder, loc, elements);
}
