//===- KilnDialect.td - the kiln dialect and its attributes -*- tablegen -*-===//

#ifndef KILN_DIALECT_TD
#define KILN_DIALECT_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def Kiln_Dialect : Dialect {
  let name = "kiln";
  let cppNamespace = "::kiln";
  let summary = "Tensor operations of Kiln's training compiler";
  let description = [{
    The `kiln` dialect holds the operations that models imported from ONNX are
    made of. Every value is a ranked tensor with a static shape; element types
    are f32, f16, bf16, f64, i64, i32, i16, i8, ui64, ui32, ui16, ui8 and i1.
    Unsigned integers divide, compare, extend and convert as unsigned numbers;
    convert-kiln-to-linalg picks those arith ops and then makes every type
    signless, as arith and LLVM want. Operations have value
    semantics. Broadcasting is always explicit (`kiln.broadcast`), so every
    elementwise operation sees operands of one shape; this keeps type
    inference, differentiation and fusion simple.

    Parameters (ONNX initializers) are module-level `kiln.param` symbols read
    with `kiln.get_param`; graph inputs and outputs are the arguments and
    results of `func.func` entry points, named by the `kiln.name` argument and
    result attribute.
  }];
  let hasConstantMaterializer = 1;
  let useDefaultAttributePrinterParser = 1;
}

class Kiln_Op<string mnemonic, list<Trait> traits = []>
    : Op<Kiln_Dialect, mnemonic, traits>;

//===----------------------------------------------------------------------===//
// Types accepted by kiln operations.
//===----------------------------------------------------------------------===//

def Kiln_Float : AnyTypeOf<[F32, F16, BF16, F64]>;
// Unsigned integers (ONNX's uint8 to uint64) keep their signedness in the
// type up to the lowering, which picks unsigned arithmetic for them and then
// makes every type signless.
def Kiln_Int : AnyTypeOf<[I64, I32, I16, I8, UI64, UI32, UI16, UI8]>;
def Kiln_Element : AnyTypeOf<[F32, F16, BF16, F64, I64, I32, I16, I8, UI64,
                               UI32, UI16, UI8, I1]>;

class Kiln_StaticTensorOf<list<Type> types>
    : TensorOf<types, [HasStaticShapePred], "statically shaped tensor">;

def Kiln_Tensor : Kiln_StaticTensorOf<[F32, F16, BF16, F64, I64, I32, I16, I8,
                                       UI64, UI32, UI16, UI8, I1]>;
def Kiln_FloatTensor : Kiln_StaticTensorOf<[F32, F16, BF16, F64]>;
def Kiln_IntTensor : Kiln_StaticTensorOf<[I64, I32, I16, I8, UI64, UI32, UI16,
                                          UI8]>;
def Kiln_IndexTensor : Kiln_StaticTensorOf<[I64, I32]>;
def Kiln_NumericTensor : Kiln_StaticTensorOf<[F32, F16, BF16, F64, I64, I32,
                                              I16, I8, UI64, UI32, UI16, UI8]>;
def Kiln_BoolTensor : Kiln_StaticTensorOf<[I1]>;
def Kiln_IntOrBoolTensor : Kiln_StaticTensorOf<[I64, I32, I16, I8, UI64, UI32,
                                                UI16, UI8, I1]>;
// The narrow types of ONNX (float8, float4, 4- and 2-bit integers) are for
// storage only: kiln.cast converts to and from them, nothing computes on
// them. A value of one travels in one byte per element (ml_dtypes' layout:
// the element's bits in the low bits of the byte); the lowering stores them
// as i8.
def Kiln_Narrow : AnyTypeOf<[F8E4M3FN, F8E4M3FNUZ, F8E5M2, F8E5M2FNUZ,
                             F8E8M0FNU, F4E2M1FN, I<4>, UI<4>, I<2>, UI<2>]>;
def Kiln_CastTensor : Kiln_StaticTensorOf<[F32, F16, BF16, F64, I64, I32, I16,
                                           I8, UI64, UI32, UI16, UI8, I1,
                                           Kiln_Narrow]>;
def Kiln_SeedTensor : Type<TensorRankOf<[I64], [0]>.predicate,
                            "tensor<i64> random seed", "::mlir::TensorType">,
    BuildableType<"::mlir::RankedTensorType::get({}, $_builder.getI64Type())">;

//===----------------------------------------------------------------------===//
// Enums.
//===----------------------------------------------------------------------===//

def Kiln_ComparePredicate : I32EnumAttr<"ComparePredicate",
    "elementwise comparison predicate", [
      I32EnumAttrCase<"eq", 0>, I32EnumAttrCase<"ne", 1>,
      I32EnumAttrCase<"lt", 2>, I32EnumAttrCase<"le", 3>,
      I32EnumAttrCase<"gt", 4>, I32EnumAttrCase<"ge", 5>]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::kiln";
}
def Kiln_ComparePredicateAttr
    : EnumAttr<Kiln_Dialect, Kiln_ComparePredicate, "compare"> {
  let assemblyFormat = "`<` $value `>`";
}

def Kiln_Reduction : I32EnumAttr<"Reduction",
    "how a loss or scatter combines values", [
      I32EnumAttrCase<"none", 0>, I32EnumAttrCase<"sum", 1>,
      I32EnumAttrCase<"mean", 2>, I32EnumAttrCase<"add", 3>,
      I32EnumAttrCase<"mul", 4>, I32EnumAttrCase<"max", 5>,
      I32EnumAttrCase<"min", 6>]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::kiln";
}
def Kiln_ReductionAttr : EnumAttr<Kiln_Dialect, Kiln_Reduction, "reduction"> {
  let assemblyFormat = "`<` $value `>`";
}

def Kiln_PadMode : I32EnumAttr<"PadMode", "padding mode", [
      I32EnumAttrCase<"constant", 0>, I32EnumAttrCase<"reflect", 1>,
      I32EnumAttrCase<"edge", 2>]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::kiln";
}
def Kiln_PadModeAttr : EnumAttr<Kiln_Dialect, Kiln_PadMode, "pad_mode"> {
  let assemblyFormat = "`<` $value `>`";
}

def Kiln_GeluApproximation : I32EnumAttr<"GeluApproximation",
    "GELU approximation", [
      I32EnumAttrCase<"none", 0>, I32EnumAttrCase<"tanh", 1>]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::kiln";
}
def Kiln_GeluApproximationAttr
    : EnumAttr<Kiln_Dialect, Kiln_GeluApproximation, "gelu_approximation"> {
  let assemblyFormat = "`<` $value `>`";
}

#endif // KILN_DIALECT_TD

def Kiln_ResizeMode : I32EnumAttr<"ResizeMode", "resize interpolation", [
      I32EnumAttrCase<"nearest", 0>, I32EnumAttrCase<"linear", 1>,
      I32EnumAttrCase<"cubic", 2>]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::kiln";
}
def Kiln_ResizeModeAttr : EnumAttr<Kiln_Dialect, Kiln_ResizeMode, "resize_mode"> {
  let assemblyFormat = "`<` $value `>`";
}

def Kiln_CoordinateMode : I32EnumAttr<"CoordinateMode",
    "how resized coordinates map back to input coordinates", [
      I32EnumAttrCase<"half_pixel", 0>, I32EnumAttrCase<"pytorch_half_pixel", 1>,
      I32EnumAttrCase<"align_corners", 2>, I32EnumAttrCase<"asymmetric", 3>,
      I32EnumAttrCase<"tf_half_pixel_for_nn", 4>]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::kiln";
}
def Kiln_CoordinateModeAttr
    : EnumAttr<Kiln_Dialect, Kiln_CoordinateMode, "coordinate_mode"> {
  let assemblyFormat = "`<` $value `>`";
}

def Kiln_NearestMode : I32EnumAttr<"NearestMode",
    "rounding of nearest-neighbour resizing", [
      I32EnumAttrCase<"round_prefer_floor", 0>,
      I32EnumAttrCase<"round_prefer_ceil", 1>, I32EnumAttrCase<"floor", 2>,
      I32EnumAttrCase<"ceil", 3>]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::kiln";
}
def Kiln_NearestModeAttr
    : EnumAttr<Kiln_Dialect, Kiln_NearestMode, "nearest_mode"> {
  let assemblyFormat = "`<` $value `>`";
}

def Kiln_RoundMode : I32EnumAttr<"RoundMode",
    "rounding of a cast to the exponent-only f8E8M0FNU", [
      I32EnumAttrCase<"up", 0>, I32EnumAttrCase<"down", 1>,
      I32EnumAttrCase<"nearest", 2>]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::kiln";
}
def Kiln_RoundModeAttr
    : EnumAttr<Kiln_Dialect, Kiln_RoundMode, "round_mode"> {
  let assemblyFormat = "`<` $value `>`";
}

//===----------------------------------------------------------------------===//
// Result type inference from an op adaptor.
//===----------------------------------------------------------------------===//

include "mlir/Interfaces/InferTypeOpInterface.td"

// Like upstream's InferTypeOpAdaptor, but the adaptor also sees attributes
// that the parser has not yet moved into properties (with the defaults of
// omitted ones), and it is verified (required attributes present) before the
// op's inference runs.
def Kiln_InferTypeOpAdaptor : TraitList<[
    DeclareOpInterfaceMethods<InferTypeOpInterface>,
    NativeOpTrait<"InferTypeOpAdaptor", [], [{
      static ::llvm::LogicalResult
      inferReturnTypes(::mlir::MLIRContext *context,
                       std::optional<::mlir::Location> location,
                       Adaptor adaptor,
                       ::llvm::SmallVectorImpl<::mlir::Type> &inferredReturnTypes);
    }], [{
      ::llvm::LogicalResult
      $cppClass::inferReturnTypes(::mlir::MLIRContext *context,
          std::optional<::mlir::Location> location, ::mlir::ValueRange operands,
          ::mlir::DictionaryAttr attributes, ::mlir::OpaqueProperties properties,
          ::mlir::RegionRange regions,
          ::llvm::SmallVectorImpl<::mlir::Type> &inferredReturnTypes) {
        ::mlir::Location loc =
            location ? *location : ::mlir::UnknownLoc::get(context);
        $cppClass::Properties parsed;
        if (!properties) {
          if (attributes && ::mlir::failed($cppClass::setPropertiesFromAttr(
                  parsed, attributes,
                  [&] { return ::mlir::emitError(loc); })))
            return ::mlir::failure();
          // The parser has not filled in omitted default-valued attributes.
          $cppClass::populateDefaultProperties(
              ::mlir::OperationName($cppClass::getOperationName(), context),
              parsed);
          properties = ::mlir::OpaqueProperties(&parsed);
        }
        $cppClass::Adaptor adaptor(operands, attributes, properties, regions);
        if (::mlir::failed(adaptor.verify(loc)))
          return ::mlir::failure();
        return $cppClass::inferReturnTypes(context, location, adaptor,
                                           inferredReturnTypes);
      }
    }]>
  ]>;
