//===- KilnOps.cpp - verifiers and type inference of kiln ops -------------===//

#include "kiln/KilnOps.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallSet.h"
#include "llvm/Support/InterleavedRange.h"

using namespace mlir;
using namespace kiln;

namespace {

/// The operand's statically shaped tensor type, or null when it has none
/// (possible while parsing invalid IR, before operand constraints are
/// verified); shape arithmetic on dynamic sizes would build invalid types.
RankedTensorType rankedTypeOf(Value value) {
  auto type = value ? dyn_cast<RankedTensorType>(value.getType()) : nullptr;
  return type && type.hasStaticShape() ? type : nullptr;
}

LogicalResult failInference(std::optional<Location> loc, const Twine &message) {
  return emitOptionalError(loc, message);
}

/// Checks that `dims` are distinct dimensions of a rank-`rank` tensor.
LogicalResult checkDimensions(std::optional<Location> loc,
                              ArrayRef<int64_t> dims, int64_t rank,
                              StringRef what) {
  llvm::SmallSet<int64_t, 8> seen;
  for (int64_t dim : dims) {
    if (dim < 0 || dim >= rank)
      return failInference(loc, what + " " + Twine(dim) +
                                    " is out of range for rank " + Twine(rank));
    if (!seen.insert(dim).second)
      return failInference(loc, what + " " + Twine(dim) + " appears twice");
  }
  return success();
}

LogicalResult checkAxis(std::optional<Location> loc, int64_t axis,
                        int64_t rank) {
  if (axis < 0 || axis >= rank)
    return failInference(loc, "axis " + Twine(axis) +
                                  " is out of range for rank " + Twine(rank));
  return success();
}

/// Element-wise indices along `axis` (gather_elements, scatter_elements)
/// address the input at their own position in every other dimension, so
/// those dimensions may not be larger than the input's.
LogicalResult checkIndicesFit(std::optional<Location> loc,
                              RankedTensorType indices, RankedTensorType input,
                              int64_t axis) {
  for (int64_t d = 0; d < input.getRank(); ++d)
    if (d != axis && indices.getDimSize(d) > input.getDimSize(d))
      return failInference(loc, "indices dimension " + Twine(d) + " of size " +
                                    Twine(indices.getDimSize(d)) +
                                    " exceeds the input's " +
                                    Twine(input.getDimSize(d)));
  return success();
}

} // namespace

//===----------------------------------------------------------------------===//
// Parameters.
//===----------------------------------------------------------------------===//

LogicalResult ParamOp::verify() {
  if (auto init = getInitialValueAttr())
    if (init.getType() != getType())
      return emitOpError("initial value type ")
             << init.getType() << " does not match parameter type "
             << getType();
  return success();
}

LogicalResult GetParamOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto param =
      symbolTable.lookupNearestSymbolFrom<ParamOp>(*this, getNameAttr());
  if (!param)
    return emitOpError("'") << getName() << "' is not a kiln.param";
  if (param.getType() != getType())
    return emitOpError("result type ")
           << getType() << " does not match parameter type " << param.getType();
  return success();
}

//===----------------------------------------------------------------------===//
// Elementwise.
//===----------------------------------------------------------------------===//

static LogicalResult inferBoolLike(Value input, SmallVectorImpl<Type> &inferred,
                                   std::optional<Location> loc) {
  auto type = rankedTypeOf(input);
  if (!type)
    return failInference(loc, "expected a statically shaped tensor operand");
  inferred.push_back(type.clone(IntegerType::get(type.getContext(), 1)));
  return success();
}

LogicalResult IsNanOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &inferred) {
  return inferBoolLike(adaptor.getInput(), inferred, loc);
}

LogicalResult IsInfOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &inferred) {
  return inferBoolLike(adaptor.getInput(), inferred, loc);
}

LogicalResult CompareOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &inferred) {
  return inferBoolLike(adaptor.getLhs(), inferred, loc);
}

LogicalResult SelectOp::verify() {
  if (getCond().getType().getShape() != getType().getShape())
    return emitOpError("condition shape does not match the result shape");
  return success();
}

bool kiln::isNarrowType(Type type) {
  if (auto integer = dyn_cast<IntegerType>(type))
    return integer.getWidth() == 4 || integer.getWidth() == 2;
  return isa<Float8E4M3FNType, Float8E4M3FNUZType, Float8E5M2Type,
             Float8E5M2FNUZType, Float8E8M0FNUType, Float4E2M1FNType>(type);
}

LogicalResult CastOp::verify() {
  if (getInput().getType().getShape() != getType().getShape())
    return emitOpError("cannot change the shape (")
           << getInput().getType() << " to " << getType() << ")";
  return success();
}

LogicalResult BitcastOp::verify() {
  auto inType = getInput().getType();
  auto outType = getType();
  if (inType.getShape() != outType.getShape())
    return emitOpError("cannot change the shape (")
           << inType << " to " << outType << ")";
  auto bits = [](Type element) {
    return element.isInteger(1) ? 8u : element.getIntOrFloatBitWidth();
  };
  if (bits(inType.getElementType()) != bits(outType.getElementType()))
    return emitOpError("needs element types of one width (")
           << inType.getElementType() << " to " << outType.getElementType()
           << ")";
  return success();
}

//===----------------------------------------------------------------------===//
// Shape and data movement.
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::verify() {
  auto inType = getInput().getType();
  auto outType = getType();
  if (inType.getElementType() != outType.getElementType())
    return emitOpError("cannot change the element type");
  if (inType.getNumElements() != outType.getNumElements())
    return emitOpError("element count changes from ")
           << inType.getNumElements() << " to " << outType.getNumElements();
  return success();
}

LogicalResult BroadcastOp::verify() {
  auto inType = getInput().getType();
  auto outType = getType();
  if (inType.getElementType() != outType.getElementType())
    return emitOpError("cannot change the element type");
  int64_t offset = outType.getRank() - inType.getRank();
  if (offset < 0)
    return emitOpError("result rank ")
           << outType.getRank() << " is below the operand rank "
           << inType.getRank();
  for (auto [i, dim] : llvm::enumerate(inType.getShape())) {
    int64_t target = outType.getDimSize(i + offset);
    if (dim != 1 && dim != target)
      return emitOpError("operand dimension ")
             << i << " of size " << dim << " cannot broadcast to " << target;
  }
  return success();
}

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  auto type = rankedTypeOf(adaptor.getInput());
  if (!type)
    return failInference(loc, "expected a statically shaped tensor operand");
  ArrayRef<int64_t> perm = adaptor.getPermutation();
  if (static_cast<int64_t>(perm.size()) != type.getRank())
    return failInference(loc, "permutation has " + Twine(perm.size()) +
                                  " entries for rank " + Twine(type.getRank()));
  if (failed(checkDimensions(loc, perm, type.getRank(), "permutation entry")))
    return failure();
  SmallVector<int64_t> shape;
  for (int64_t p : perm)
    shape.push_back(type.getDimSize(p));
  inferred.push_back(type.clone(shape));
  return success();
}

LogicalResult SliceOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &inferred) {
  auto type = rankedTypeOf(adaptor.getInput());
  if (!type)
    return failInference(loc, "expected a statically shaped tensor operand");
  ArrayRef<int64_t> start = adaptor.getStart(), limit = adaptor.getLimit(),
                    stride = adaptor.getStride();
  int64_t rank = type.getRank();
  if (static_cast<int64_t>(start.size()) != rank ||
      static_cast<int64_t>(limit.size()) != rank ||
      static_cast<int64_t>(stride.size()) != rank)
    return failInference(loc, "start, limit and stride need " + Twine(rank) +
                                  " entries each");
  SmallVector<int64_t> shape;
  for (int64_t i = 0; i < rank; ++i) {
    if (stride[i] < 1)
      return failInference(loc, "stride of dimension " + Twine(i) +
                                    " must be positive");
    if (start[i] < 0 || start[i] > limit[i] || limit[i] > type.getDimSize(i))
      return failInference(loc, "window [" + Twine(start[i]) + ", " +
                                    Twine(limit[i]) + ") of dimension " +
                                    Twine(i) + " is outside [0, " +
                                    Twine(type.getDimSize(i)) + "]");
    shape.push_back(llvm::divideCeil(limit[i] - start[i], stride[i]));
  }
  inferred.push_back(type.clone(shape));
  return success();
}

LogicalResult ReverseOp::verify() {
  return checkDimensions(getLoc(), getDimensions(), getType().getRank(),
                         "dimension");
}

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  auto inputs = adaptor.getInputs();
  if (inputs.empty())
    return failInference(loc, "needs at least one operand");
  auto first = rankedTypeOf(inputs.front());
  if (!first)
    return failInference(loc, "expected statically shaped tensor operands");
  int64_t axis = adaptor.getAxis();
  if (failed(checkAxis(loc, axis, first.getRank())))
    return failure();
  SmallVector<int64_t> shape(first.getShape());
  shape[axis] = 0;
  for (auto [index, input] : llvm::enumerate(inputs)) {
    auto type = rankedTypeOf(input);
    if (!type)
      return failInference(loc, "expected statically shaped tensor operands");
    if (type.getRank() != first.getRank() ||
        type.getElementType() != first.getElementType())
      return failInference(loc, "operand " + Twine(index) +
                                    " differs in rank or element type");
    for (int64_t d = 0; d < first.getRank(); ++d)
      if (d != axis && type.getDimSize(d) != first.getDimSize(d))
        return failInference(loc, "operand " + Twine(index) +
                                      " differs in dimension " + Twine(d));
    shape[axis] += type.getDimSize(axis);
  }
  inferred.push_back(first.clone(shape));
  return success();
}

LogicalResult SplitOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &inferred) {
  auto type = rankedTypeOf(adaptor.getInput());
  if (!type)
    return failInference(loc, "expected a statically shaped tensor operand");
  int64_t axis = adaptor.getAxis();
  if (failed(checkAxis(loc, axis, type.getRank())))
    return failure();
  int64_t total = 0;
  for (int64_t size : adaptor.getSizes()) {
    if (size < 0)
      return failInference(loc, "split sizes must not be negative");
    total += size;
    SmallVector<int64_t> shape(type.getShape());
    shape[axis] = size;
    inferred.push_back(type.clone(shape));
  }
  if (total != type.getDimSize(axis))
    return failInference(loc, "split sizes add up to " + Twine(total) +
                                  ", not to dimension size " +
                                  Twine(type.getDimSize(axis)));
  return success();
}

LogicalResult PadOp::inferReturnTypes(MLIRContext *,
                                      std::optional<Location> loc,
                                      Adaptor adaptor,
                                      SmallVectorImpl<Type> &inferred) {
  auto type = rankedTypeOf(adaptor.getInput());
  if (!type)
    return failInference(loc, "expected a statically shaped tensor operand");
  ArrayRef<int64_t> low = adaptor.getLow(), high = adaptor.getHigh();
  if (static_cast<int64_t>(low.size()) != type.getRank() ||
      static_cast<int64_t>(high.size()) != type.getRank())
    return failInference(loc, "low and high need one entry per dimension");
  SmallVector<int64_t> shape;
  for (int64_t i = 0; i < type.getRank(); ++i) {
    if (low[i] < 0 || high[i] < 0)
      return failInference(loc, "padding must not be negative");
    if (adaptor.getMode() == PadMode::reflect &&
        (low[i] >= type.getDimSize(i) || high[i] >= type.getDimSize(i)))
      return failInference(loc, "reflect padding of dimension " + Twine(i) +
                                    " must be smaller than its size");
    if (adaptor.getMode() == PadMode::edge && type.getDimSize(i) == 0 &&
        low[i] + high[i] > 0)
      return failInference(loc, "edge padding of an empty dimension");
    shape.push_back(type.getDimSize(i) + low[i] + high[i]);
  }
  inferred.push_back(type.clone(shape));
  return success();
}

LogicalResult TileOp::inferReturnTypes(MLIRContext *,
                                       std::optional<Location> loc,
                                       Adaptor adaptor,
                                       SmallVectorImpl<Type> &inferred) {
  auto type = rankedTypeOf(adaptor.getInput());
  if (!type)
    return failInference(loc, "expected a statically shaped tensor operand");
  ArrayRef<int64_t> multiples = adaptor.getMultiples();
  if (static_cast<int64_t>(multiples.size()) != type.getRank())
    return failInference(loc, "multiples need one entry per dimension");
  SmallVector<int64_t> shape;
  for (auto [dim, times] : llvm::zip(type.getShape(), multiples)) {
    if (times < 0)
      return failInference(loc, "multiples must not be negative");
    shape.push_back(dim * times);
  }
  inferred.push_back(type.clone(shape));
  return success();
}

LogicalResult IotaOp::verify() {
  if (failed(checkAxis(getLoc(), getDimension(), getType().getRank())))
    return failure();
  return success();
}

LogicalResult GatherOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  auto type = rankedTypeOf(adaptor.getInput());
  auto indices = rankedTypeOf(adaptor.getIndices());
  if (!type || !indices)
    return failInference(loc, "expected statically shaped tensor operands");
  int64_t axis = adaptor.getAxis();
  if (failed(checkAxis(loc, axis, type.getRank())))
    return failure();
  SmallVector<int64_t> shape(type.getShape().take_front(axis));
  llvm::append_range(shape, indices.getShape());
  llvm::append_range(shape, type.getShape().drop_front(axis + 1));
  inferred.push_back(type.clone(shape));
  return success();
}

LogicalResult
GatherElementsOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                   Adaptor adaptor,
                                   SmallVectorImpl<Type> &inferred) {
  auto type = rankedTypeOf(adaptor.getInput());
  auto indices = rankedTypeOf(adaptor.getIndices());
  if (!type || !indices)
    return failInference(loc, "expected statically shaped tensor operands");
  if (type.getRank() != indices.getRank())
    return failInference(loc, "indices rank " + Twine(indices.getRank()) +
                                  " differs from input rank " +
                                  Twine(type.getRank()));
  if (failed(checkAxis(loc, adaptor.getAxis(), type.getRank())))
    return failure();
  if (failed(checkIndicesFit(loc, indices, type, adaptor.getAxis())))
    return failure();
  inferred.push_back(type.clone(indices.getShape()));
  return success();
}

LogicalResult GatherNdOp::inferReturnTypes(MLIRContext *,
                                           std::optional<Location> loc,
                                           Adaptor adaptor,
                                           SmallVectorImpl<Type> &inferred) {
  auto type = rankedTypeOf(adaptor.getInput());
  auto indices = rankedTypeOf(adaptor.getIndices());
  if (!type || !indices)
    return failInference(loc, "expected statically shaped tensor operands");
  int64_t batch = adaptor.getBatchDims();
  if (indices.getRank() < 1 || batch < 0 || batch >= indices.getRank() ||
      batch >= type.getRank())
    return failInference(loc, "batch_dims " + Twine(batch) +
                                  " does not fit the operand ranks");
  int64_t depth = indices.getShape().back();
  if (depth < 1 || batch + depth > type.getRank())
    return failInference(loc, "index depth " + Twine(depth) +
                                  " exceeds the input rank");
  for (int64_t i = 0; i < batch; ++i)
    if (type.getDimSize(i) != indices.getDimSize(i))
      return failInference(loc, "batch dimension " + Twine(i) + " differs");
  SmallVector<int64_t> shape(indices.getShape().drop_back());
  llvm::append_range(shape, type.getShape().drop_front(batch + depth));
  inferred.push_back(type.clone(shape));
  return success();
}

LogicalResult ScatterElementsOp::verify() {
  auto type = getInput().getType();
  auto indices = getIndices().getType();
  if (indices.getRank() != type.getRank())
    return emitOpError("indices rank differs from the input rank");
  if (indices.getShape() != getUpdates().getType().getShape())
    return emitOpError("updates shape differs from the indices shape");
  if (getUpdates().getType().getElementType() != type.getElementType())
    return emitOpError("updates element type differs from the input's");
  if (failed(checkAxis(getLoc(), getAxis(), type.getRank())))
    return failure();
  return checkIndicesFit(getLoc(), cast<RankedTensorType>(indices),
                         cast<RankedTensorType>(type), getAxis());
}

LogicalResult ScatterNdOp::verify() {
  auto type = getInput().getType();
  auto indices = getIndices().getType();
  if (indices.getRank() < 1)
    return emitOpError("indices must have rank 1 or more");
  int64_t depth = indices.getShape().back();
  if (depth < 1 || depth > type.getRank())
    return emitOpError("index depth ") << depth << " exceeds the input rank";
  SmallVector<int64_t> expected(indices.getShape().drop_back());
  llvm::append_range(expected, type.getShape().drop_front(depth));
  if (getUpdates().getType().getShape() != ArrayRef<int64_t>(expected))
    return emitOpError("updates shape does not match indices and input");
  if (getUpdates().getType().getElementType() != type.getElementType())
    return emitOpError("updates element type differs from the input's");
  return success();
}

LogicalResult TriluOp::verify() {
  if (getType().getRank() < 2)
    return emitOpError("needs a tensor of rank 2 or more");
  return success();
}

LogicalResult CumsumOp::verify() {
  return checkAxis(getLoc(), getAxis(), getType().getRank());
}

LogicalResult CumprodOp::verify() {
  return checkAxis(getLoc(), getAxis(), getType().getRank());
}

LogicalResult TopKOp::inferReturnTypes(MLIRContext *context,
                                       std::optional<Location> loc,
                                       Adaptor adaptor,
                                       SmallVectorImpl<Type> &inferred) {
  auto type = rankedTypeOf(adaptor.getInput());
  if (!type)
    return failInference(loc, "expected a statically shaped tensor operand");
  int64_t axis = adaptor.getAxis();
  if (failed(checkAxis(loc, axis, type.getRank())))
    return failure();
  int64_t k = adaptor.getK();
  if (k < 0 || k > type.getDimSize(axis))
    return failInference(loc, "k = " + Twine(k) + " exceeds dimension size " +
                                  Twine(type.getDimSize(axis)));
  SmallVector<int64_t> shape(type.getShape());
  shape[axis] = k;
  inferred.push_back(type.clone(shape));
  inferred.push_back(type.clone(shape, IntegerType::get(context, 64)));
  return success();
}

template <typename ArgOpAdaptor>
static LogicalResult
inferArgReduce(MLIRContext *context, std::optional<Location> loc,
               ArgOpAdaptor adaptor, SmallVectorImpl<Type> &inferred) {
  auto type = rankedTypeOf(adaptor.getInput());
  if (!type)
    return failInference(loc, "expected a statically shaped tensor operand");
  int64_t axis = adaptor.getAxis();
  if (failed(checkAxis(loc, axis, type.getRank())))
    return failure();
  SmallVector<int64_t> shape(type.getShape());
  if (adaptor.getKeepdims())
    shape[axis] = 1;
  else
    shape.erase(shape.begin() + axis);
  inferred.push_back(type.clone(shape, IntegerType::get(context, 64)));
  return success();
}

LogicalResult ArgMaxOp::inferReturnTypes(MLIRContext *context,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  return inferArgReduce(context, loc, adaptor, inferred);
}

LogicalResult ArgMinOp::inferReturnTypes(MLIRContext *context,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  return inferArgReduce(context, loc, adaptor, inferred);
}

//===----------------------------------------------------------------------===//
// Reductions.
//===----------------------------------------------------------------------===//

template <typename ReduceAdaptor>
static LogicalResult inferReduce(std::optional<Location> loc,
                                 ReduceAdaptor adaptor,
                                 SmallVectorImpl<Type> &inferred) {
  auto type = rankedTypeOf(adaptor.getInput());
  if (!type)
    return failInference(loc, "expected a statically shaped tensor operand");
  ArrayRef<int64_t> dims = adaptor.getDimensions();
  if (failed(checkDimensions(loc, dims, type.getRank(), "dimension")))
    return failure();
  if (!llvm::is_sorted(dims))
    return failInference(loc, "dimensions must be sorted");
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < type.getRank(); ++d) {
    if (!llvm::is_contained(dims, d))
      shape.push_back(type.getDimSize(d));
    else if (adaptor.getKeepdims())
      shape.push_back(1);
  }
  inferred.push_back(type.clone(shape));
  return success();
}

#define KILN_REDUCE_INFERENCE(OP)                                              \
  LogicalResult OP::inferReturnTypes(                                          \
      MLIRContext *, std::optional<Location> loc, Adaptor adaptor,             \
      SmallVectorImpl<Type> &inferred) {                                       \
    return inferReduce(loc, adaptor, inferred);                                \
  }
KILN_REDUCE_INFERENCE(ReduceSumOp)
KILN_REDUCE_INFERENCE(ReduceMeanOp)
KILN_REDUCE_INFERENCE(ReduceMaxOp)
KILN_REDUCE_INFERENCE(ReduceMinOp)
KILN_REDUCE_INFERENCE(ReduceProdOp)
KILN_REDUCE_INFERENCE(ReduceL2Op)
KILN_REDUCE_INFERENCE(ReduceLogSumExpOp)
#undef KILN_REDUCE_INFERENCE

//===----------------------------------------------------------------------===//
// Neural network operations.
//===----------------------------------------------------------------------===//

LogicalResult MatmulOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  auto lhs = rankedTypeOf(adaptor.getLhs());
  auto rhs = rankedTypeOf(adaptor.getRhs());
  if (!lhs || !rhs)
    return failInference(loc, "expected statically shaped tensor operands");
  if (lhs.getRank() < 2 || lhs.getRank() != rhs.getRank())
    return failInference(loc, "operands need the same rank, 2 or more (got " +
                                  Twine(lhs.getRank()) + " and " +
                                  Twine(rhs.getRank()) + ")");
  if (lhs.getElementType() != rhs.getElementType())
    return failInference(loc, "operands differ in element type");
  int64_t rank = lhs.getRank();
  if (lhs.getShape().drop_back(2) != rhs.getShape().drop_back(2))
    return failInference(loc, "batch dimensions differ");
  int64_t m = lhs.getDimSize(rank - (adaptor.getTransposeLhs() ? 1 : 2));
  int64_t k = lhs.getDimSize(rank - (adaptor.getTransposeLhs() ? 2 : 1));
  int64_t k2 = rhs.getDimSize(rank - (adaptor.getTransposeRhs() ? 1 : 2));
  int64_t n = rhs.getDimSize(rank - (adaptor.getTransposeRhs() ? 2 : 1));
  if (k != k2)
    return failInference(loc, "contraction sizes differ: " + Twine(k) +
                                  " and " + Twine(k2));
  SmallVector<int64_t> shape(lhs.getShape().drop_back(2));
  shape.push_back(m);
  shape.push_back(n);
  inferred.push_back(lhs.clone(shape));
  return success();
}

LogicalResult AttentionOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  auto query = rankedTypeOf(adaptor.getQuery());
  auto key = rankedTypeOf(adaptor.getKey());
  auto value = rankedTypeOf(adaptor.getValue());
  if (!query || !key || !value)
    return failInference(loc, "expected statically shaped tensor operands");
  int64_t rank = query.getRank();
  if (rank < 2 || key.getRank() != rank || value.getRank() != rank)
    return failInference(loc, "query, key and value need the same rank, 2 or "
                              "more (got " +
                                  Twine(rank) + ", " + Twine(key.getRank()) +
                                  " and " + Twine(value.getRank()) + ")");
  if (key.getElementType() != query.getElementType() ||
      value.getElementType() != query.getElementType())
    return failInference(loc, "query, key and value differ in element type");
  ArrayRef<int64_t> batch = query.getShape().drop_back(2);
  if (key.getShape().drop_back(2) != batch ||
      value.getShape().drop_back(2) != batch)
    return failInference(loc, "batch dimensions differ");
  if (key.getDimSize(rank - 1) != query.getDimSize(rank - 1))
    return failInference(loc, "query and key rows differ in size: " +
                                  Twine(query.getDimSize(rank - 1)) + " and " +
                                  Twine(key.getDimSize(rank - 1)));
  if (value.getDimSize(rank - 2) != key.getDimSize(rank - 2))
    return failInference(loc, "key and value differ in sequence length: " +
                                  Twine(key.getDimSize(rank - 2)) + " and " +
                                  Twine(value.getDimSize(rank - 2)));
  SmallVector<int64_t> shape(batch);
  shape.push_back(query.getDimSize(rank - 2));
  shape.push_back(value.getDimSize(rank - 1));
  inferred.push_back(query.clone(shape));
  return success();
}

LogicalResult AllReduceMeanOp::inferReturnTypes(
    MLIRContext *, std::optional<Location>, ValueRange operands, DictionaryAttr,
    OpaqueProperties, RegionRange, SmallVectorImpl<Type> &inferred) {
  // The tensor form returns one result per operand; the buffer form none.
  for (Value operand : operands)
    if (isa<TensorType>(operand.getType()))
      inferred.push_back(operand.getType());
  return success();
}

LogicalResult AllReduceMeanOp::verify() {
  if (getInputs().empty())
    return emitOpError("needs at least one operand");
  bool tensors = isa<TensorType>(getInputs()[0].getType());
  for (Value input : getInputs()) {
    if (isa<TensorType>(input.getType()) != tensors)
      return emitOpError("takes only tensors or only buffers");
    // The runtime's collectives average f32.
    if (!mlir::getElementTypeOrSelf(input.getType()).isF32())
      return emitOpError("averages f32 values, not ")
             << mlir::getElementTypeOrSelf(input.getType());
  }
  return success();
}

/// The sharding ops: a 1-D f32 input and output (the result, or the output
/// buffer), one of them `ranks` shards of the other's size: the input of a
/// scatter or a local shard, the output of a gather.
static LogicalResult verifySharding(Operation *op, Value input, Value output,
                                    Value result, int64_t ranks, bool gathers) {
  if (!output == !result)
    return op->emitOpError(
        "takes a tensor and returns one, or takes two buffers");
  if (isa<MemRefType>(input.getType()) != static_cast<bool>(output))
    return op->emitOpError("takes two buffers or a tensor, not both");
  Value written = output ? output : result;
  auto in = cast<ShapedType>(input.getType());
  auto out = cast<ShapedType>(written.getType());
  for (ShapedType type : {in, out}) {
    if (type.getRank() != 1)
      return op->emitOpError("works on 1-D values, not ") << type;
    if (!type.getElementType().isF32())
      return op->emitOpError("works on f32 values, not ") << type;
  }
  int64_t whole = gathers ? out.getDimSize(0) : in.getDimSize(0);
  int64_t shard = gathers ? in.getDimSize(0) : out.getDimSize(0);
  if (whole != shard * ranks)
    return op->emitOpError("needs the whole value (")
           << whole << " elements) to be " << ranks << " shards of " << shard;
  return success();
}

LogicalResult ReduceScatterMeanOp::verify() {
  return verifySharding(*this, getInput(), getOutput(), getResult(), getRanks(),
                        /*gathers=*/false);
}

LogicalResult AllGatherOp::verify() {
  return verifySharding(*this, getInput(), getOutput(), getResult(), getRanks(),
                        /*gathers=*/true);
}

LogicalResult LocalShardOp::verify() {
  return verifySharding(*this, getInput(), getOutput(), getResult(), getRanks(),
                        /*gathers=*/false);
}

/// The checks of an attention's optional `mask` against its `query` and
/// `key`: the same element type, and a shape that broadcasts to the scores.
static LogicalResult verifyAttentionMask(Operation *op, Value query, Value key,
                                         Value mask) {
  if (!mask)
    return success();
  auto maskType = cast<RankedTensorType>(mask.getType());
  auto queryType = cast<RankedTensorType>(query.getType());
  if (maskType.getElementType() != queryType.getElementType())
    return op->emitOpError("mask element type ")
           << maskType.getElementType() << " differs from the query's "
           << queryType.getElementType();
  // The scores: [B..., Sq, Sk].
  int64_t rank = queryType.getRank();
  SmallVector<int64_t> scores(queryType.getShape().drop_back(1));
  scores.push_back(cast<RankedTensorType>(key.getType()).getDimSize(rank - 2));
  int64_t offset = rank - maskType.getRank();
  if (offset < 0)
    return op->emitOpError("mask rank ")
           << maskType.getRank() << " exceeds the scores' rank " << rank;
  for (auto [i, dim] : llvm::enumerate(maskType.getShape())) {
    int64_t target = scores[i + offset];
    if (dim != 1 && dim != target)
      return op->emitOpError("mask dimension ")
             << i << " of size " << dim << " cannot broadcast to " << target;
  }
  return success();
}

/// `masked_fill` and `causal_fill` say how the mask's fills take their
/// scores' gradient: there must be a mask (for causal_fill, unless
/// `causalFillNeedsNoMask`: the kernels' causal flag), and causal_fill needs
/// as many queries as keys.
static LogicalResult verifyFills(Operation *op, bool maskedFill,
                                 bool causalFill, Value mask, Value query,
                                 Value key,
                                 bool causalFillNeedsNoMask = false) {
  if (maskedFill && !mask)
    return op->emitOpError("is masked_fill without a mask");
  if (!causalFill)
    return success();
  if (!mask && !causalFillNeedsNoMask)
    return op->emitOpError("is causal_fill without a mask");
  auto q = cast<ShapedType>(query.getType());
  auto k = cast<ShapedType>(key.getType());
  if (q.getRank() < 2 || k.getRank() < 2)
    return op->emitOpError(
        "is causal_fill over a query or key of rank below 2");
  int64_t queries = q.getDimSize(q.getRank() - 2),
          keys = k.getDimSize(k.getRank() - 2);
  if (queries != keys)
    return op->emitOpError("is causal_fill over ")
           << queries << " queries and " << keys << " keys (they must match)";
  return success();
}

LogicalResult AttentionOp::verify() {
  if (failed(verifyFills(*this, getMaskedFill(), getCausalFill(), getMask(),
                         getQuery(), getKey())))
    return failure();
  return verifyAttentionMask(*this, getQuery(), getKey(), getMask());
}

LogicalResult AttentionGradOp::verify() {
  // The operands of a valid kiln.attention, whose result `out` is.
  SmallVector<Type> forward;
  AttentionOp::Adaptor adaptor(ValueRange{getQuery(), getKey(), getValue()});
  if (failed(AttentionOp::inferReturnTypes(getContext(), getLoc(), adaptor,
                                           forward)))
    return failure();
  if (forward.front() != getOut().getType())
    return emitOpError("out has type ")
           << getOut().getType() << ", not the attention's " << forward.front();
  if (failed(verifyFills(*this, getMaskedFill(), getCausalFill(), getMask(),
                         getQuery(), getKey())))
    return failure();
  return verifyAttentionMask(*this, getQuery(), getKey(), getMask());
}

/// The form of an op the CUDA runtime's own kernels compute (flash
/// attention, the fused layer norm): all tensors with `produced` results,
/// or all buffers, dense (the kernels and their host version address dense
/// tensors), with as many `outputs` and no result.
static LogicalResult verifyLibraryOpForm(Operation *op, bool tensors,
                                         ValueRange outputs, size_t produced) {
  for (Value operand : op->getOperands()) {
    if (isa<TensorType>(operand.getType()) != tensors)
      return op->emitOpError("takes only tensors or only buffers");
    auto buffer = dyn_cast<MemRefType>(operand.getType());
    if (buffer && !buffer.getLayout().isIdentity())
      return op->emitOpError("takes buffers with the identity layout, not ")
             << buffer;
  }
  bool counts = tensors
                    ? op->getNumResults() == produced && outputs.empty()
                    : op->getNumResults() == 0 && outputs.size() == produced;
  if (!counts)
    return op->emitOpError("has ")
           << produced
           << " results on tensors, or as many output buffers and none";
  return success();
}

/// The checks shared by kiln.flash_attention and its gradient: `query`,
/// `key` and `value` are [B, H, S, D] of one 16-bit float type with a head
/// size the kernels have; every other operand and everything produced
/// (results, or output buffers) has the f32 shape `expected` names, and
/// the op is all tensors or all buffers. For cuDNN (`cudnn`), the output,
/// its gradient and the input gradients are of the query's 16-bit type
/// instead, and the key and value may have fewer heads (grouped).
static LogicalResult
verifyFlash(Operation *op, Value query, Value key, Value value, Value mask,
            bool causal, bool cudnn,
            ArrayRef<std::pair<Value, StringRef>> f32Operands,
            ValueRange outputs, ArrayRef<StringRef> produced) {
  auto shapeOf = [](Value v) { return cast<ShapedType>(v.getType()); };
  ShapedType q = shapeOf(query), k = shapeOf(key), v = shapeOf(value);
  if (q.getRank() != 4 || k.getRank() != 4 || v.getRank() != 4)
    return op->emitOpError("takes [B, H, S, D] query, key and value");
  Type element = q.getElementType();
  if (!isa<BFloat16Type, Float16Type>(element) ||
      k.getElementType() != element || v.getElementType() != element)
    return op->emitOpError("takes bf16 or f16 query, key and value, not ")
           << q.getElementType() << ", " << k.getElementType() << ", "
           << v.getElementType();
  int64_t b = q.getDimSize(0), h = q.getDimSize(1), sq = q.getDimSize(2),
          sk = k.getDimSize(2), d = q.getDimSize(3);
  if (b < 1 || h < 1 || sq < 1 || sk < 1)
    return op->emitOpError("needs at least one batch, head, query and key");
  if (d != 16 && d != 32 && d != 64 && d != 128)
    return op->emitOpError("head size ") << d << " is not 16, 32, 64 or 128";
  // cuDNN takes grouped heads: each of the key's and value's hk heads
  // serves h / hk query heads.
  int64_t hk = k.getDimSize(1);
  if (hk < 1 || h % hk != 0 || (hk != h && !cudnn))
    return op->emitOpError("key has ")
           << hk << " heads for " << h << " query heads ("
           << (cudnn ? "a divisor of them" : "as many; cuDNN groups them")
           << " expected)";
  SmallVector<int64_t> rows{b, h, sq, d}, keys{b, hk, sk, d},
      stats{b, h, sq, 2}, delta{b, h, sq};
  if (k.getShape() != ArrayRef(keys) || v.getShape() != ArrayRef(keys))
    return op->emitOpError("key and value must be [")
           << b << ", " << hk << ", Sk, " << d << "] like the query";
  if (causal && sq != sk)
    return op->emitOpError("is causal over ")
           << sq << " queries and " << sk << " keys (they must match)";
  bool tensors = isa<TensorType>(q);
  auto check = [&](Value value, StringRef name) -> LogicalResult {
    ShapedType type = shapeOf(value);
    ArrayRef<int64_t> want = name == "stats"   ? ArrayRef(stats)
                             : name == "delta" ? ArrayRef(delta)
                             : name == "key_grad" || name == "value_grad"
                                 ? ArrayRef(keys)
                                 : ArrayRef(rows);
    bool narrow = cudnn && name != "stats" && name != "delta";
    Type wantElement = narrow ? element : Float32Type::get(op->getContext());
    if (type.getElementType() != wantElement || type.getShape() != want)
      return op->emitOpError(name)
             << " must be "
             << (!narrow            ? "f32"
                 : element.isBF16() ? "bf16"
                                    : "f16")
             << " of shape [" << llvm::interleaved(want) << "], not " << type;
    return success();
  };
  for (auto [value, name] : f32Operands)
    if (failed(check(value, name)))
      return failure();
  if (mask) {
    ShapedType m = shapeOf(mask);
    if (!m.getElementType().isF32() || m.getRank() != 4 ||
        (m.getDimSize(0) != 1 && m.getDimSize(0) != b) ||
        (m.getDimSize(1) != 1 && m.getDimSize(1) != h) ||
        (m.getDimSize(2) != 1 && m.getDimSize(2) != sq) ||
        m.getDimSize(3) != sk)
      return op->emitOpError(
                 "mask must be f32 [B or 1, H or 1, Sq or 1, Sk], not ")
             << m;
  }
  if (failed(verifyLibraryOpForm(op, tensors, outputs, produced.size())))
    return failure();
  ValueRange values = tensors ? ValueRange(op->getResults()) : outputs;
  for (auto [value, name] : llvm::zip(values, produced))
    if (failed(check(value, name)))
      return failure();
  return success();
}

LogicalResult FlashAttentionOp::verify() {
  return verifyFlash(*this, getQuery(), getKey(), getValue(), getMask(),
                     getCausal(), getCudnn(), {}, getOutputs(),
                     {"out", "stats"});
}

LogicalResult FlashAttentionGradOp::verify() {
  if (failed(verifyFills(*this, getMaskedFill(), getCausalFill(), getMask(),
                         getQuery(), getKey(), /*causalFillNeedsNoMask=*/true)))
    return failure();
  if (getCudnn() && (getCausalFill() || getMaskedFill()))
    return emitOpError("on cuDNN takes no causal_fill or masked_fill (its "
                       "mask is added to the scores)");
  return verifyFlash(
      *this, getQuery(), getKey(), getValue(), getMask(), getCausal(),
      getCudnn(),
      {{getOut(), "out"}, {getGrad(), "grad"}, {getStats(), "stats"}},
      getOutputs(), {"query_grad", "key_grad", "value_grad", "delta"});
}

/// An operand of kiln.fused_layer_norm or its gradient: its name, and
/// whether it may be bf16 or f16 (stored so by a product, kiln-amp).
struct LayerNormOperand {
  Value value;
  StringRef name;
  bool narrowable = false;
};

/// The checks shared by kiln.fused_layer_norm and its gradient: a
/// [rows, cols] input (f32, or bf16 or f16 where `input` is narrowable) and
/// every other operand f32 (or 16-bit where narrowable) of the shape its
/// name says, and so is what the op produces (`produced`, by name), except
/// entry `narrow` (if any), which may be f32, bf16 or f16 ("result") or
/// must be bf16 or f16 ("rounded_input_grad"); all tensors or all dense
/// buffers.
static LogicalResult verifyFusedLayerNorm(Operation *op,
                                          ArrayRef<LayerNormOperand> operands,
                                          ValueRange outputs,
                                          ArrayRef<StringRef> produced,
                                          std::optional<size_t> narrow) {
  Value input = operands.front().value;
  auto input2d = cast<ShapedType>(input.getType());
  if (input2d.getRank() != 2 || input2d.getDimSize(0) < 1 ||
      input2d.getDimSize(1) < 1)
    return op->emitOpError("takes a non-empty [rows, cols] input, not ")
           << input2d;
  int64_t rows = input2d.getDimSize(0), cols = input2d.getDimSize(1);
  int64_t blocks = FusedLayerNormGradOp::partialBlocks(rows);
  auto shapeFor = [&](StringRef name) -> SmallVector<int64_t> {
    if (name == "scale" || name == "bias" || name == "scale_grad" ||
        name == "bias_grad")
      return {cols};
    if (name == "partials")
      return {blocks, 2, cols};
    return {rows, cols};
  };
  auto check = [&](Value value, StringRef name, bool narrow) -> LogicalResult {
    auto type = cast<ShapedType>(value.getType());
    Type element = type.getElementType();
    bool only16 = name == "rounded_input_grad" || name == "copy";
    bool elementOk =
        (element.isF32() && !only16) ||
        ((narrow || only16) && isa<BFloat16Type, Float16Type>(element));
    if (!elementOk || type.getShape() != ArrayRef(shapeFor(name)))
      return op->emitOpError(name)
             << " must be "
             << (only16   ? "bf16 or f16"
                 : narrow ? "f32, bf16 or f16"
                          : "f32")
             << " of shape [" << llvm::interleaved(shapeFor(name)) << "], not "
             << type;
    return success();
  };
  for (const LayerNormOperand &operand : operands)
    if (operand.value &&
        failed(check(operand.value, operand.name, operand.narrowable)))
      return failure();
  bool tensors = isa<TensorType>(input.getType());
  if (failed(verifyLibraryOpForm(op, tensors, outputs, produced.size())))
    return failure();
  ValueRange values = tensors ? ValueRange(op->getResults()) : outputs;
  for (auto [index, value, name] : llvm::enumerate(values, produced))
    if (failed(check(value, name, narrow == index)))
      return failure();
  return success();
}

LogicalResult FusedLayerNormOp::verify() {
  // The result, the sum with a residual, and the result's 16-bit copy if
  // one more.
  SmallVector<StringRef, 3> produced = {"result"};
  if (getResidual())
    produced.push_back("sum");
  size_t count = hasBufferSemantics() ? getOutputs().size() : getNumResults();
  if (count > produced.size() + 1)
    return emitOpError("produces ")
           << count << " values, more than the result"
           << (getResidual() ? ", the sum" : "") << " and its copy";
  if (count == produced.size() + 1)
    produced.push_back("copy");
  // A 16-bit input or residual only with a residual: the kernels' later
  // passes read the f32 sum.
  bool residual = getResidual() != nullptr;
  if (failed(verifyFusedLayerNorm(*this,
                                  {{getInput(), "input", residual},
                                   {getScale(), "scale"},
                                   {getBias(), "bias"},
                                   {getResidual(), "residual", true}},
                                  getOutputs(), produced, 0)))
    return failure();
  Type result = getProduced().front().getType();
  if (getCopy() && !getElementTypeOrSelf(result).isF32())
    return emitOpError("with a copy, the result must be f32, not ") << result;
  return success();
}

LogicalResult FusedLayerNormGradOp::verify() {
  // Four results, or five with the input's gradient rounded too.
  SmallVector<StringRef, 5> produced = {"input_grad", "scale_grad", "bias_grad",
                                        "partials"};
  size_t count = hasBufferSemantics() ? getOutputs().size() : getNumResults();
  if (count == 5)
    produced.push_back("rounded_input_grad");
  return verifyFusedLayerNorm(*this,
                              {{getInput(), "input"},
                               {getScale(), "scale"},
                               {getGrad(), "grad", true},
                               {getAccumulate(), "accumulate", true}},
                              getOutputs(), produced, 4);
}

namespace {
/// The spatial attributes shared by convolutions and pooling.
struct WindowSpec {
  ArrayRef<int64_t> kernel, strides, padding, dilations;
};
} // namespace

static LogicalResult checkWindow(std::optional<Location> loc,
                                 const WindowSpec &window, int64_t spatial) {
  auto sized = [&](ArrayRef<int64_t> values, int64_t count) {
    return static_cast<int64_t>(values.size()) == count;
  };
  if (!sized(window.strides, spatial) || !sized(window.padding, 2 * spatial) ||
      !sized(window.dilations, spatial) || !sized(window.kernel, spatial))
    return failInference(loc, "strides, dilations and kernel need " +
                                  Twine(spatial) + " entries, padding " +
                                  Twine(2 * spatial));
  for (int64_t i = 0; i < spatial; ++i) {
    if (window.strides[i] < 1 || window.kernel[i] < 1 ||
        window.dilations[i] < 1)
      return failInference(loc, "strides, dilations and kernel sizes must be "
                                "positive");
    if (window.padding[i] < 0 || window.padding[i + spatial] < 0)
      return failInference(loc, "padding must not be negative");
  }
  return success();
}

/// Output size of a sliding window over one dimension.
static int64_t windowOutputSize(int64_t in, int64_t kernel, int64_t stride,
                                int64_t dilation, int64_t padBegin,
                                int64_t padEnd, bool ceilMode) {
  int64_t span = (kernel - 1) * dilation + 1;
  int64_t room = in + padBegin + padEnd - span;
  if (room < 0)
    return 0;
  int64_t out = (ceilMode ? llvm::divideCeil(room, stride) : room / stride) + 1;
  // A window may not start in the end padding (PyTorch and ONNX agree).
  if (ceilMode && (out - 1) * stride >= in + padBegin)
    --out;
  return out;
}

LogicalResult ConvOp::inferReturnTypes(MLIRContext *,
                                       std::optional<Location> loc,
                                       Adaptor adaptor,
                                       SmallVectorImpl<Type> &inferred) {
  auto input = rankedTypeOf(adaptor.getInput());
  auto filter = rankedTypeOf(adaptor.getFilter());
  if (!input || !filter)
    return failInference(loc, "expected statically shaped tensor operands");
  if (input.getRank() < 3 || filter.getRank() != input.getRank())
    return failInference(loc, "input and filter need the same rank, 3 or more");
  int64_t spatial = input.getRank() - 2;
  int64_t groups = adaptor.getGroups();
  WindowSpec window{filter.getShape().drop_front(2), adaptor.getStrides(),
                    adaptor.getPadding(), adaptor.getDilations()};
  if (failed(checkWindow(loc, window, spatial)))
    return failure();
  if (groups < 1 || input.getDimSize(1) % groups != 0 ||
      filter.getDimSize(0) % groups != 0)
    return failInference(loc, "groups " + Twine(groups) +
                                  " does not divide the channels");
  if (input.getDimSize(1) / groups != filter.getDimSize(1))
    return failInference(loc, "filter has " + Twine(filter.getDimSize(1)) +
                                  " input channels, expected " +
                                  Twine(input.getDimSize(1) / groups));
  SmallVector<int64_t> shape{input.getDimSize(0), filter.getDimSize(0)};
  for (int64_t i = 0; i < spatial; ++i) {
    int64_t out = windowOutputSize(
        input.getDimSize(i + 2), window.kernel[i], window.strides[i],
        window.dilations[i], window.padding[i], window.padding[i + spatial],
        /*ceilMode=*/false);
    if (out < 1)
      return failInference(loc, "filter is larger than the padded input");
    shape.push_back(out);
  }
  inferred.push_back(input.clone(shape));
  return success();
}

LogicalResult
ConvTransposeOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                  Adaptor adaptor,
                                  SmallVectorImpl<Type> &inferred) {
  auto input = rankedTypeOf(adaptor.getInput());
  auto filter = rankedTypeOf(adaptor.getFilter());
  if (!input || !filter)
    return failInference(loc, "expected statically shaped tensor operands");
  if (input.getRank() < 3 || filter.getRank() != input.getRank())
    return failInference(loc, "input and filter need the same rank, 3 or more");
  int64_t spatial = input.getRank() - 2;
  int64_t groups = adaptor.getGroups();
  WindowSpec window{filter.getShape().drop_front(2), adaptor.getStrides(),
                    adaptor.getPadding(), adaptor.getDilations()};
  if (failed(checkWindow(loc, window, spatial)))
    return failure();
  ArrayRef<int64_t> outputPadding = adaptor.getOutputPadding();
  if (static_cast<int64_t>(outputPadding.size()) != spatial)
    return failInference(loc,
                         "output_padding needs " + Twine(spatial) + " entries");
  if (groups < 1 || input.getDimSize(1) % groups != 0)
    return failInference(loc, "groups " + Twine(groups) +
                                  " does not divide the channels");
  if (filter.getDimSize(0) != input.getDimSize(1))
    return failInference(loc, "filter has " + Twine(filter.getDimSize(0)) +
                                  " input channels, expected " +
                                  Twine(input.getDimSize(1)));
  SmallVector<int64_t> shape{input.getDimSize(0),
                             filter.getDimSize(1) * groups};
  for (int64_t i = 0; i < spatial; ++i) {
    int64_t out = window.strides[i] * (input.getDimSize(i + 2) - 1) +
                  outputPadding[i] +
                  (window.kernel[i] - 1) * window.dilations[i] + 1 -
                  window.padding[i] - window.padding[i + spatial];
    if (out < 1)
      return failInference(loc, "output size of spatial dimension " + Twine(i) +
                                    " is not positive");
    shape.push_back(out);
  }
  inferred.push_back(input.clone(shape));
  return success();
}

/// `dilations` is nullopt for pools without them (all 1).
template <typename PoolAdaptor>
static LogicalResult inferPool(std::optional<Location> loc, PoolAdaptor adaptor,
                               std::optional<ArrayRef<int64_t>> dilations,
                               SmallVectorImpl<Type> &inferred) {
  auto input = rankedTypeOf(adaptor.getInput());
  if (!input)
    return failInference(loc, "expected a statically shaped tensor operand");
  if (input.getRank() < 3)
    return failInference(loc, "expected a tensor of rank 3 or more");
  int64_t spatial = input.getRank() - 2;
  SmallVector<int64_t> unitDilations(spatial, 1);
  WindowSpec window{adaptor.getKernel(), adaptor.getStrides(),
                    adaptor.getPadding(),
                    dilations ? *dilations : ArrayRef<int64_t>(unitDilations)};
  if (failed(checkWindow(loc, window, spatial)))
    return failure();
  SmallVector<int64_t> shape(input.getShape().take_front(2));
  for (int64_t i = 0; i < spatial; ++i) {
    if (window.padding[i] >= window.kernel[i] ||
        window.padding[i + spatial] >= window.kernel[i])
      return failInference(loc, "padding must be smaller than the kernel");
    int64_t out = windowOutputSize(
        input.getDimSize(i + 2), window.kernel[i], window.strides[i],
        window.dilations[i], window.padding[i], window.padding[i + spatial],
        adaptor.getCeilMode());
    if (out < 1)
      return failInference(loc, "kernel is larger than the padded input");
    shape.push_back(out);
  }
  inferred.push_back(input.clone(shape));
  return success();
}

LogicalResult MaxPoolOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &inferred) {
  std::optional<ArrayRef<int64_t>> dilations;
  if (auto attr = adaptor.getDilationsAttr())
    dilations = attr.asArrayRef();
  return inferPool(loc, adaptor, dilations, inferred);
}

LogicalResult AvgPoolOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &inferred) {
  std::optional<ArrayRef<int64_t>> dilations;
  if (auto attr = adaptor.getDilationsAttr())
    dilations = attr.asArrayRef();
  return inferPool(loc, adaptor, dilations, inferred);
}

SmallVector<int64_t> AvgPoolOp::getDilationsOrOnes() {
  if (std::optional<ArrayRef<int64_t>> dilations = getDilations())
    return SmallVector<int64_t>(*dilations);
  return SmallVector<int64_t>(getKernel().size(), 1);
}

DenseElementsAttr AvgPoolOp::getDivisors() {
  auto in = cast<RankedTensorType>(getInput().getType());
  auto out = cast<RankedTensorType>(getType());
  ArrayRef<int64_t> kernel = getKernel(), strides = getStrides(),
                    padding = getPadding();
  SmallVector<int64_t> dilations = getDilationsOrOnes();
  int64_t spatial = kernel.size();
  ArrayRef<int64_t> outSpatial = out.getShape().drop_front(2);
  bool includePad = getCountIncludePad();
  auto element = cast<FloatType>(out.getElementType());
  SmallVector<APFloat> values;
  SmallVector<int64_t> position(spatial, 0);
  for (int64_t p = 0, e = out.getNumElements() /
                          (out.getDimSize(0) * out.getDimSize(1));
       p < e; ++p) {
    double count = 1;
    for (int64_t i = 0; i < spatial; ++i) {
      int64_t size = in.getDimSize(i + 2);
      int64_t lowest = includePad ? -padding[i] : 0;
      int64_t bound = includePad ? size + padding[i + spatial] : size;
      int64_t taps = 0;
      for (int64_t t = 0; t < kernel[i]; ++t) {
        int64_t at = position[i] * strides[i] - padding[i] + t * dilations[i];
        taps += at >= lowest && at < bound;
      }
      count *= std::max<int64_t>(taps, 1);
    }
    APFloat value(count);
    bool lost;
    value.convert(element.getFloatSemantics(), APFloat::rmNearestTiesToEven,
                  &lost);
    values.push_back(value);
    for (int64_t i = spatial - 1; i >= 0; --i) {
      if (++position[i] < outSpatial[i])
        break;
      position[i] = 0;
    }
  }
  return DenseElementsAttr::get(RankedTensorType::get(outSpatial, element),
                                values);
}

LogicalResult ResizeOp::verify() {
  auto inType = cast<RankedTensorType>(getInput().getType());
  auto outType = cast<RankedTensorType>(getType());
  if (inType.getElementType() != outType.getElementType() ||
      inType.getRank() != outType.getRank())
    return emitOpError("result must have the input's rank and element type");
  if (static_cast<int64_t>(getScales().size()) != inType.getRank())
    return emitOpError("scales need one entry per dimension");
  for (auto [d, scale] : llvm::enumerate(getScales())) {
    if (!(scale > 0))
      return emitOpError("scale of dimension ") << d << " must be positive";
    if (inType.getDimSize(d) == 0 && outType.getDimSize(d) != 0)
      return emitOpError("cannot resize the empty dimension ") << d;
  }
  return success();
}

LogicalResult SoftmaxOp::verify() {
  return checkAxis(getLoc(), getAxis(), getType().getRank());
}

LogicalResult LogSoftmaxOp::verify() {
  return checkAxis(getLoc(), getAxis(), getType().getRank());
}

/// The checks shared by kiln.layer_norm and its gradient: `axis` is a
/// dimension of `input`, and `scale` and `bias` (when there is one) have
/// the normalized dimensions and the input's element type.
static LogicalResult verifyLayerNorm(Operation *op, Value input, int64_t axis,
                                     Value scale, Value bias) {
  auto type = cast<RankedTensorType>(input.getType());
  if (failed(checkAxis(op->getLoc(), axis, type.getRank())))
    return failure();
  ArrayRef<int64_t> normalized = type.getShape().drop_front(axis);
  for (auto [operand, name] : {std::pair{scale, "scale"}, {bias, "bias"}}) {
    if (!operand)
      continue;
    auto operandType = cast<RankedTensorType>(operand.getType());
    if (operandType.getShape() != normalized ||
        operandType.getElementType() != type.getElementType())
      return op->emitOpError(name) << " must have the normalized shape and "
                                      "the input element type";
  }
  return success();
}

LogicalResult LayerNormOp::verify() {
  return verifyLayerNorm(*this, getInput(), getAxis(), getScale(), getBias());
}

LogicalResult LayerNormGradOp::verify() {
  return verifyLayerNorm(*this, getInput(), getAxis(), getScale(), Value());
}

static LogicalResult checkChannelOperands(Operation *op, RankedTensorType input,
                                          ArrayRef<Value> operands) {
  if (input.getRank() < 2)
    return op->emitOpError("input needs rank 2 or more");
  for (Value operand : operands) {
    auto type = cast<RankedTensorType>(operand.getType());
    if (type.getRank() != 1 || type.getDimSize(0) != input.getDimSize(1) ||
        type.getElementType() != input.getElementType())
      return op->emitOpError("per-channel operands must be ")
             << RankedTensorType::get({input.getDimSize(1)},
                                      input.getElementType());
  }
  return success();
}

LogicalResult BatchNormOp::verify() {
  return checkChannelOperands(
      getOperation(), cast<RankedTensorType>(getInput().getType()),
      SmallVector<Value>{getScale(), getBias(), getMean(), getVariance()});
}

LogicalResult
BatchNormTrainOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                   Adaptor adaptor,
                                   SmallVectorImpl<Type> &inferred) {
  auto input = rankedTypeOf(adaptor.getInput());
  if (!input)
    return failInference(loc, "expected a statically shaped tensor operand");
  if (input.getRank() < 2)
    return failInference(loc, "input needs rank 2 or more");
  for (Value operand : {adaptor.getScale(), adaptor.getBias()}) {
    auto type = rankedTypeOf(operand);
    if (!type || type.getRank() != 1 ||
        type.getDimSize(0) != input.getDimSize(1) ||
        type.getElementType() != input.getElementType())
      return failInference(loc, "scale and bias must be tensor<" +
                                    Twine(input.getDimSize(1)) +
                                    "x...> of "
                                    "the input element type");
  }
  auto channels = input.clone(ArrayRef<int64_t>{input.getDimSize(1)});
  inferred.push_back(input);
  inferred.push_back(channels);
  inferred.push_back(channels);
  return success();
}

LogicalResult DropoutOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &inferred) {
  auto input = rankedTypeOf(adaptor.getInput());
  if (!input)
    return failInference(loc, "expected a statically shaped tensor operand");
  double ratio = adaptor.getRatio().convertToDouble();
  if (!(ratio >= 0.0 && ratio < 1.0))
    return failInference(loc, "ratio must be in [0, 1)");
  inferred.push_back(input);
  inferred.push_back(input.clone(IntegerType::get(input.getContext(), 1)));
  return success();
}

/// Shared by the losses: `scores` is [N, C, D...], `labels` [N, D...].
static LogicalResult inferLoss(std::optional<Location> loc, Value scores,
                               Value labels, Value weight, Reduction reduction,
                               SmallVectorImpl<Type> &inferred) {
  auto scoreType = rankedTypeOf(scores);
  auto labelType = rankedTypeOf(labels);
  if (!scoreType || !labelType)
    return failInference(loc, "expected statically shaped tensor operands");
  if (scoreType.getRank() < 2)
    return failInference(loc, "scores need rank 2 or more ([N, C, ...])");
  SmallVector<int64_t> expected{scoreType.getDimSize(0)};
  llvm::append_range(expected, scoreType.getShape().drop_front(2));
  if (labelType.getShape() != ArrayRef<int64_t>(expected))
    return failInference(loc, "labels shape does not match the scores "
                              "without their class dimension");
  if (weight) {
    auto weightType = rankedTypeOf(weight);
    if (!weightType || weightType.getRank() != 1 ||
        weightType.getDimSize(0) != scoreType.getDimSize(1) ||
        weightType.getElementType() != scoreType.getElementType())
      return failInference(loc, "weight must hold one value per class");
  }
  if (reduction != Reduction::none && reduction != Reduction::sum &&
      reduction != Reduction::mean)
    return failInference(loc, "reduction must be none, sum or mean");
  if (reduction == Reduction::none)
    inferred.push_back(scoreType.clone(expected));
  else
    inferred.push_back(scoreType.clone(ArrayRef<int64_t>{}));
  return success();
}

LogicalResult
CrossEntropyOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                 Adaptor adaptor,
                                 SmallVectorImpl<Type> &inferred) {
  double smoothing = adaptor.getLabelSmoothing().convertToDouble();
  if (!(smoothing >= 0.0 && smoothing <= 1.0))
    return failInference(loc, "label_smoothing must be in [0, 1]");
  return inferLoss(loc, adaptor.getLogits(), adaptor.getLabels(),
                   adaptor.getWeight(), adaptor.getReduction(), inferred);
}

LogicalResult CrossEntropyGradOp::verify() {
  double smoothing = getLabelSmoothing().convertToDouble();
  if (!(smoothing >= 0.0 && smoothing <= 1.0))
    return emitOpError("label_smoothing must be in [0, 1]");
  SmallVector<Type, 1> loss;
  if (failed(inferLoss(getLoc(), getLogits(), getLabels(), getWeight(),
                       getReduction(), loss)))
    return failure();
  if (getGrad().getType() != loss.front())
    return emitOpError("grad must have the loss's type ")
           << loss.front() << ", not " << getGrad().getType();
  return success();
}

LogicalResult NllLossOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &inferred) {
  return inferLoss(loc, adaptor.getInput(), adaptor.getLabels(),
                   adaptor.getWeight(), adaptor.getReduction(), inferred);
}

#define GET_OP_CLASSES
#include "kiln/KilnOps.cpp.inc"
