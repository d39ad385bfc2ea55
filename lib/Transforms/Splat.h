//===- Splat.h - the value of a splat float constant ------------*- C++ -*-===//
//
// The recognition passes (kiln-fuse-gelu, kiln-fuse-attention) match
// constants such as 0.5, sqrt(2) or -inf written as kiln.constant splats.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_TRANSFORMS_SPLAT_H
#define KILN_LIB_TRANSFORMS_SPLAT_H

#include "kiln/KilnOps.h"

#include <optional>

namespace kiln {

/// The value of a kiln.constant float splat, if `v` is one.
inline std::optional<double> floatSplatValue(mlir::Value v) {
  auto constant = v.getDefiningOp<ConstantOp>();
  if (!constant)
    return std::nullopt;
  auto dense = llvm::dyn_cast<mlir::DenseFPElementsAttr>(constant.getValue());
  if (!dense || !dense.isSplat())
    return std::nullopt;
  return dense.getSplatValue<llvm::APFloat>().convertToDouble();
}

} // namespace kiln

#endif // KILN_LIB_TRANSFORMS_SPLAT_H
