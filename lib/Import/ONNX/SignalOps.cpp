//===- SignalOps.cpp - importers of the window functions ------------------===//
//
// HannWindow, HammingWindow and BlackmanWindow (opset 17): generalized cosine
// windows of a constant length, so constants:
//   w[n] = a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N),   n = 0 .. size - 1,
// with N = size (periodic, the default) or size - 1 (symmetric).
//
//===----------------------------------------------------------------------===//

#include "NodeContext.h"

#include <cmath>

using namespace mlir;
using namespace kiln;
using namespace kiln::onnx_import;

namespace {

struct CosineWindow {
  double a0, a1, a2;
};

LogicalResult importWindow(NodeContext &n, CosineWindow coefficients) {
  if (failed(n.expectInputs(1, 1)))
    return failure();
  FailureOr<SmallVector<int64_t>> size = n.constInts(0, "size");
  if (failed(size))
    return failure();
  if (size->size() != 1 || (*size)[0] < 0 || (*size)[0] > (int64_t(1) << 24))
    return n.fail("size must be one length from 0 to 2^24");
  int64_t length = (*size)[0];
  Type element = elementTypeOf(
      static_cast<int32_t>(n.getInt("output_datatype", 1)), n.ctx);
  if (!element || !isa<FloatType>(element) || isNarrowType(element))
    return n.fail("output_datatype must be a float type");
  double denominator = n.getInt("periodic", 1) ? length : length - 1;
  SmallVector<double> values;
  for (int64_t i = 0; i < length; ++i) {
    double phase = denominator > 0 ? 2 * M_PI * i / denominator : 0;
    values.push_back(coefficients.a0 - coefficients.a1 * std::cos(phase) +
                     coefficients.a2 * std::cos(2 * phase));
  }
  auto type = RankedTensorType::get({length}, element);
  SmallVector<APFloat> elements;
  for (double value : values) {
    APFloat converted(value);
    bool lost;
    converted.convert(cast<FloatType>(element).getFloatSemantics(),
                      APFloat::rmNearestTiesToEven, &lost);
    elements.push_back(converted);
  }
  n.setOutput(0, n.constant(DenseElementsAttr::get(type, elements)));
  return success();
}

} // namespace

void kiln::onnx_import::registerSignalOps(OpImporterTable &t) {
  t["HannWindow"] = [](NodeContext &n) {
    return importWindow(n, {0.5, 0.5, 0});
  };
  t["HammingWindow"] = [](NodeContext &n) {
    return importWindow(n, {25.0 / 46, 21.0 / 46, 0});
  };
  t["BlackmanWindow"] = [](NodeContext &n) {
    return importWindow(n, {0.42, 0.5, 0.08});
  };
}
