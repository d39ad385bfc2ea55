//===- KilnOps.td - operations of the kiln dialect ---------*- tablegen -*-===//

#ifndef KILN_OPS_TD
#define KILN_OPS_TD

include "kiln/KilnDialect.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// Constants and parameters.
//===----------------------------------------------------------------------===//

def Kiln_ConstantOp : Kiln_Op<"constant", [ConstantLike, Pure,
    AllTypesMatch<["value", "result"]>]> {
  let summary = "a tensor constant";
  let description = [{
    A tensor whose value is known at compile time; of any type kiln.cast
    takes, the narrow ones included.

    ```mlir
    %c = kiln.constant dense<[1, 2]> : tensor<2xi64>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs Kiln_CastTensor:$result);
  let assemblyFormat = "attr-dict $value";
  let hasFolder = 1;
}

def Kiln_ParamOp : Kiln_Op<"param", [Symbol, HasParent<"::mlir::ModuleOp">]> {
  let summary = "a named model parameter";
  let description = [{
    A parameter of the model (an ONNX initializer), named as in the ONNX
    file. `initial_value` holds the value the training run starts from.

    ```mlir
    kiln.param @fc.weight : tensor<4x2xf32> = dense<0.5> : tensor<4x2xf32>
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, TypeAttrOf<Kiln_Tensor>:$type,
                       OptionalAttr<ElementsAttr>:$initial_value);
  let assemblyFormat =
      "$sym_name `:` $type (`=` $initial_value^)? attr-dict";
  let hasVerifier = 1;
}

def Kiln_GetParamOp : Kiln_Op<"get_param", [Pure,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "reads a model parameter";
  let description = [{
    The current value of the parameter `name`.

    ```mlir
    %w = kiln.get_param @fc.weight : tensor<4x2xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$name);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
}

//===----------------------------------------------------------------------===//
// Elementwise operations.
//===----------------------------------------------------------------------===//

class Kiln_UnaryOp<string mnemonic, Type operandType, string formula,
                   list<Trait> traits = []>
    : Kiln_Op<mnemonic, !listconcat(traits,
          [Pure, Elementwise, SameOperandsAndResultType])> {
  let summary = "elementwise " # formula;
  let description = "Computes `" # formula # "` for every element.\n\n"
      "```mlir\n%y = kiln." # mnemonic # " %x : tensor<2x3xf32>\n```";
  let arguments = (ins operandType:$input);
  let results = (outs operandType:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasFolder = 1;
}

class Kiln_UnaryFloatOp<string mnemonic, string formula>
    : Kiln_UnaryOp<mnemonic, Kiln_FloatTensor, formula>;
class Kiln_UnaryNumericOp<string mnemonic, string formula>
    : Kiln_UnaryOp<mnemonic, Kiln_NumericTensor, formula>;

def Kiln_NegOp : Kiln_UnaryNumericOp<"neg", "-x">;
def Kiln_AbsOp : Kiln_UnaryNumericOp<"abs", "|x|">;
def Kiln_SignOp : Kiln_UnaryNumericOp<"sign", "sign(x)">;
def Kiln_ReluOp : Kiln_UnaryNumericOp<"relu", "max(x, 0)">;
def Kiln_ExpOp : Kiln_UnaryFloatOp<"exp", "e^x">;
def Kiln_LogOp : Kiln_UnaryFloatOp<"log", "ln(x)">;
def Kiln_SqrtOp : Kiln_UnaryFloatOp<"sqrt", "sqrt(x)">;
def Kiln_RsqrtOp : Kiln_UnaryFloatOp<"rsqrt", "1 / sqrt(x)">;
def Kiln_ReciprocalOp : Kiln_UnaryFloatOp<"reciprocal", "1 / x">;
def Kiln_TanhOp : Kiln_UnaryFloatOp<"tanh", "tanh(x)">;
def Kiln_SigmoidOp : Kiln_UnaryFloatOp<"sigmoid", "1 / (1 + e^-x)">;
def Kiln_SoftplusOp : Kiln_UnaryFloatOp<"softplus", "ln(1 + e^x)">;
def Kiln_SoftsignOp : Kiln_UnaryFloatOp<"softsign", "x / (1 + |x|)">;
def Kiln_ErfOp : Kiln_UnaryFloatOp<"erf", "erf(x)">;
def Kiln_SinOp : Kiln_UnaryFloatOp<"sin", "sin(x)">;
def Kiln_CosOp : Kiln_UnaryFloatOp<"cos", "cos(x)">;
def Kiln_TanOp : Kiln_UnaryFloatOp<"tan", "tan(x)">;
def Kiln_AsinOp : Kiln_UnaryFloatOp<"asin", "asin(x)">;
def Kiln_AcosOp : Kiln_UnaryFloatOp<"acos", "acos(x)">;
def Kiln_AtanOp : Kiln_UnaryFloatOp<"atan", "atan(x)">;
def Kiln_SinhOp : Kiln_UnaryFloatOp<"sinh", "sinh(x)">;
def Kiln_CoshOp : Kiln_UnaryFloatOp<"cosh", "cosh(x)">;
def Kiln_AsinhOp : Kiln_UnaryFloatOp<"asinh", "asinh(x)">;
def Kiln_AcoshOp : Kiln_UnaryFloatOp<"acosh", "acosh(x)">;
def Kiln_AtanhOp : Kiln_UnaryFloatOp<"atanh", "atanh(x)">;
def Kiln_FloorOp : Kiln_UnaryFloatOp<"floor", "floor(x)">;
def Kiln_CeilOp : Kiln_UnaryFloatOp<"ceil", "ceil(x)">;
def Kiln_RoundOp : Kiln_UnaryFloatOp<"round", "round half to even(x)">;
def Kiln_HardSwishOp : Kiln_UnaryFloatOp<"hard_swish",
    "x * max(0, min(1, x / 6 + 1 / 2))">;
def Kiln_NotOp : Kiln_UnaryOp<"not", Kiln_IntOrBoolTensor,
    "!x (booleans), ~x (integers)">;

class Kiln_ParamUnaryOp<string mnemonic, string formula, dag params,
                        string example>
    : Kiln_Op<mnemonic, [Pure, Elementwise, SameOperandsAndResultType]> {
  let summary = "elementwise " # formula;
  let description = "Computes `" # formula # "` for every element.\n\n"
      "```mlir\n" # example # "\n```";
  let arguments = !con((ins Kiln_FloatTensor:$input), params);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasFolder = 1;
}

def Kiln_GeluOp : Kiln_ParamUnaryOp<"gelu",
    "x * Phi(x), exact or with the tanh approximation",
    (ins DefaultValuedAttr<Kiln_GeluApproximationAttr,
         "::kiln::GeluApproximation::none">:$approximate),
    "%y = kiln.gelu %x {approximate = #kiln.gelu_approximation<tanh>} : tensor<8xf32>">;
def Kiln_LeakyReluOp : Kiln_ParamUnaryOp<"leaky_relu",
    "x >= 0 ? x : alpha * x", (ins DefaultValuedAttr<F64Attr, "0.01">:$alpha),
    "%y = kiln.leaky_relu %x {alpha = 0.1 : f64} : tensor<8xf32>">;
def Kiln_EluOp : Kiln_ParamUnaryOp<"elu",
    "x > 0 ? x : alpha * (e^x - 1)", (ins DefaultValuedAttr<F64Attr, "1.0">:$alpha),
    "%y = kiln.elu %x {alpha = 1.0 : f64} : tensor<8xf32>">;
def Kiln_CeluOp : Kiln_ParamUnaryOp<"celu",
    "max(0, x) + min(0, alpha * (e^(x / alpha) - 1))",
    (ins DefaultValuedAttr<F64Attr, "1.0">:$alpha),
    "%y = kiln.celu %x {alpha = 2.0 : f64} : tensor<8xf32>">;
def Kiln_SeluOp : Kiln_ParamUnaryOp<"selu",
    "gamma * (x > 0 ? x : alpha * (e^x - 1))",
    (ins DefaultValuedAttr<F64Attr, "1.67326319217681884765625">:$alpha,
         DefaultValuedAttr<F64Attr, "1.05070102214813232421875">:$gamma),
    "%y = kiln.selu %x : tensor<8xf32>">;
def Kiln_HardSigmoidOp : Kiln_ParamUnaryOp<"hard_sigmoid",
    "max(0, min(1, alpha * x + beta))",
    (ins DefaultValuedAttr<F64Attr, "0.2">:$alpha,
         DefaultValuedAttr<F64Attr, "0.5">:$beta),
    "%y = kiln.hard_sigmoid %x {alpha = 0.2 : f64, beta = 0.5 : f64} : tensor<8xf32>">;
def Kiln_ThresholdedReluOp : Kiln_ParamUnaryOp<"thresholded_relu",
    "x > alpha ? x : 0", (ins DefaultValuedAttr<F64Attr, "1.0">:$alpha),
    "%y = kiln.thresholded_relu %x {alpha = 2.0 : f64} : tensor<8xf32>">;

class Kiln_FloatPredicateOp<string mnemonic, string what>
    : Kiln_Op<mnemonic, [Pure, Elementwise, Kiln_InferTypeOpAdaptor]> {
  let summary = "elementwise test for " # what;
  let description = "True where the element is " # what # ".\n\n"
      "```mlir\n%m = kiln." # mnemonic # " %x : tensor<4xf32>\n```";
  let arguments = (ins Kiln_FloatTensor:$input);
  let results = (outs Kiln_BoolTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}
def Kiln_IsNanOp : Kiln_FloatPredicateOp<"is_nan", "NaN">;
def Kiln_IsInfOp : Kiln_FloatPredicateOp<"is_inf", "+inf or -inf">;

class Kiln_BinaryOp<string mnemonic, Type type, string formula,
                    list<Trait> traits = []>
    : Kiln_Op<mnemonic, !listconcat(traits,
          [Pure, Elementwise, SameOperandsAndResultType])> {
  let summary = "elementwise " # formula;
  let description = "Computes `" # formula # "` for every pair of elements. "
      "Both operands have the same type; broadcasting is explicit "
      "(`kiln.broadcast`).\n\n"
      "```mlir\n%z = kiln." # mnemonic # " %x, %y : tensor<2x3xf32>\n```";
  let arguments = (ins type:$lhs, type:$rhs);
  let results = (outs type:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($result)";
  let hasFolder = 1;
}

def Kiln_AddOp : Kiln_BinaryOp<"add", Kiln_NumericTensor, "x + y", [Commutative]>;
def Kiln_SubOp : Kiln_BinaryOp<"sub", Kiln_NumericTensor, "x - y">;
def Kiln_MulOp : Kiln_BinaryOp<"mul", Kiln_NumericTensor, "x * y", [Commutative]>;
def Kiln_DivOp : Kiln_BinaryOp<"div", Kiln_NumericTensor,
    "x / y (integers truncate toward zero)">;
def Kiln_PowOp : Kiln_BinaryOp<"pow", Kiln_NumericTensor, "x ^ y">;
def Kiln_MaxOp : Kiln_BinaryOp<"max", Kiln_NumericTensor, "max(x, y)", [Commutative]>;
def Kiln_MinOp : Kiln_BinaryOp<"min", Kiln_NumericTensor, "min(x, y)", [Commutative]>;
def Kiln_AndOp : Kiln_BinaryOp<"and", Kiln_IntOrBoolTensor, "x & y (bitwise)",
    [Commutative]>;
def Kiln_OrOp : Kiln_BinaryOp<"or", Kiln_IntOrBoolTensor, "x | y (bitwise)",
    [Commutative]>;
def Kiln_XorOp : Kiln_BinaryOp<"xor", Kiln_IntOrBoolTensor, "x ^ y (bitwise)",
    [Commutative]>;
def Kiln_ShiftLeftOp : Kiln_BinaryOp<"shift_left", Kiln_IntTensor,
    "x << y (0 where y < 0 or y >= the bit width)">;
def Kiln_ShiftRightOp : Kiln_BinaryOp<"shift_right", Kiln_IntTensor,
    "x >> y (arithmetic for signed x; a shift by y < 0 or y >= the bit width "
    "shifts by the width: 0, or -1 for negative signed x)">;

def Kiln_RemOp : Kiln_Op<"rem", [Pure, Elementwise, SameOperandsAndResultType]> {
  let summary = "elementwise remainder";
  let description = [{
    The remainder of `lhs / rhs`. With `fmod` the result takes the sign of
    the dividend (C `fmod`); without it, the sign of the divisor (Python `%`).

    ```mlir
    %r = kiln.rem %x, %y {fmod} : tensor<4xf32>
    ```
  }];
  let arguments = (ins Kiln_NumericTensor:$lhs, Kiln_NumericTensor:$rhs,
                       UnitAttr:$fmod);
  let results = (outs Kiln_NumericTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($result)";
  let hasFolder = 1;
}

def Kiln_CompareOp : Kiln_Op<"compare", [Pure, Elementwise,
    Kiln_InferTypeOpAdaptor, AllTypesMatch<["lhs", "rhs"]>]> {
  let summary = "elementwise comparison";
  let description = [{
    Compares two tensors of one type element by element; the result is a
    boolean tensor of the same shape.

    ```mlir
    %m = kiln.compare <lt>, %x, %y : tensor<4xf32>
    ```
  }];
  let arguments = (ins Kiln_ComparePredicateAttr:$predicate,
                       Kiln_Tensor:$lhs, Kiln_Tensor:$rhs);
  let results = (outs Kiln_BoolTensor:$result);
  let assemblyFormat = "$predicate `,` $lhs `,` $rhs attr-dict `:` type($lhs)";
  let hasFolder = 1;
}

def Kiln_SelectOp : Kiln_Op<"select", [Pure, Elementwise,
    AllTypesMatch<["on_true", "on_false", "result"]>]> {
  let summary = "elementwise choice";
  let description = [{
    `cond ? on_true : on_false` for every element. `cond` has the shape of
    the other operands.

    ```mlir
    %z = kiln.select %m, %x, %y : tensor<4xi1>, tensor<4xf32>
    ```
  }];
  let arguments = (ins Kiln_BoolTensor:$cond, Kiln_Tensor:$on_true,
                       Kiln_Tensor:$on_false);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat =
      "$cond `,` $on_true `,` $on_false attr-dict `:` type($cond) `,` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Kiln_CastOp : Kiln_Op<"cast", [Pure, Elementwise]> {
  let summary = "elementwise conversion of the element type";
  let description = [{
    Converts every element to the result's element type. Floats convert to
    integers by truncation toward zero; any non-zero value converts to true.

    The narrow types (float8, float4, 4- and 2-bit integers) are converted
    as ONNX's Cast converts them: to a narrow float by rounding to nearest
    even, where `saturate` (the default) clamps values beyond the largest
    finite one (infinities included) to it, and without it they become
    infinity or NaN as the type has them; to f8E8M0FNU by `round_mode`
    (`up`, the default, `down` or `nearest`); floats to a narrow integer by
    truncation toward zero, a value out of its range (or NaN) giving 0.

    ```mlir
    %i = kiln.cast %x : tensor<4xf32> to tensor<4xi64>
    %q = kiln.cast %x {saturate = false} : tensor<4xf32> to tensor<4xf8E5M2>
    ```
  }];
  let arguments = (ins Kiln_CastTensor:$input,
                   DefaultValuedAttr<BoolAttr, "true">:$saturate,
                   DefaultValuedAttr<Kiln_RoundModeAttr,
                                     "::kiln::RoundMode::up">:$round_mode);
  let results = (outs Kiln_CastTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Kiln_BitcastOp : Kiln_Op<"bitcast", [Pure, Elementwise]> {
  let summary = "elementwise reinterpretation of the element bits";
  let description = [{
    Keeps every element's bits under the result's element type, of the same
    width (a boolean is the byte 0 or 1).

    ```mlir
    %i = kiln.bitcast %x : tensor<4xf32> to tensor<4xi32>
    ```
  }];
  let arguments = (ins Kiln_Tensor:$input);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Shape and data movement.
//===----------------------------------------------------------------------===//

def Kiln_ReshapeOp : Kiln_Op<"reshape", [Pure]> {
  let summary = "reinterprets a tensor with another shape";
  let description = [{
    Same elements in row-major order, another shape of the same size.

    ```mlir
    %y = kiln.reshape %x : tensor<2x3xf32> to tensor<6xf32>
    ```
  }];
  let arguments = (ins Kiln_Tensor:$input);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Kiln_BroadcastOp : Kiln_Op<"broadcast", [Pure]> {
  let summary = "numpy-style broadcast to a larger shape";
  let description = [{
    Aligns the operand's dimensions with the trailing dimensions of the
    result; each operand dimension is 1 or equal to the result's.

    ```mlir
    %y = kiln.broadcast %x : tensor<1x4xf32> to tensor<3x2x4xf32>
    ```
  }];
  let arguments = (ins Kiln_Tensor:$input);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Kiln_TransposeOp : Kiln_Op<"transpose", [Pure, Kiln_InferTypeOpAdaptor]> {
  let summary = "permutes dimensions";
  let description = [{
    Result dimension `i` is operand dimension `permutation[i]`.

    ```mlir
    %y = kiln.transpose %x {permutation = array<i64: 1, 0>} : tensor<2x3xf32>
    ```
  }];
  let arguments = (ins Kiln_Tensor:$input, DenseI64ArrayAttr:$permutation);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasFolder = 1;
  let hasCanonicalizer = 1;
}

def Kiln_SliceOp : Kiln_Op<"slice", [Pure, Kiln_InferTypeOpAdaptor]> {
  let summary = "a strided window of a tensor";
  let description = [{
    For each dimension the elements `start, start + stride, ...` below
    `limit`. Strides are positive (`kiln.reverse` flips a dimension).

    ```mlir
    %y = kiln.slice %x {start = array<i64: 0, 1>, limit = array<i64: 2, 3>,
                        stride = array<i64: 1, 1>} : tensor<4x4xf32>
    ```
  }];
  let arguments = (ins Kiln_Tensor:$input, DenseI64ArrayAttr:$start,
                       DenseI64ArrayAttr:$limit, DenseI64ArrayAttr:$stride);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasFolder = 1;
}

def Kiln_ReverseOp : Kiln_Op<"reverse", [Pure, SameOperandsAndResultType]> {
  let summary = "reverses the order of elements along dimensions";
  let description = [{
    ```mlir
    %y = kiln.reverse %x {dimensions = array<i64: 0>} : tensor<4x3xf32>
    ```
  }];
  let arguments = (ins Kiln_Tensor:$input, DenseI64ArrayAttr:$dimensions);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Kiln_ConcatOp : Kiln_Op<"concat", [Pure, Kiln_InferTypeOpAdaptor]> {
  let summary = "joins tensors along a dimension";
  let description = [{
    ```mlir
    %y = kiln.concat %a, %b {axis = 0 : i64} : tensor<2x3xf32>, tensor<1x3xf32>
    ```
  }];
  let arguments = (ins Variadic<Kiln_Tensor>:$inputs, I64Attr:$axis);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = "$inputs attr-dict `:` type($inputs)";
  let hasFolder = 1;
}

def Kiln_SplitOp : Kiln_Op<"split", [Pure, Kiln_InferTypeOpAdaptor]> {
  let summary = "cuts a tensor into consecutive pieces along a dimension";
  let description = [{
    ```mlir
    %a, %b = kiln.split %x {axis = 1 : i64, sizes = array<i64: 2, 4>} : tensor<3x6xf32>
    ```
  }];
  let arguments = (ins Kiln_Tensor:$input, I64Attr:$axis,
                       DenseI64ArrayAttr:$sizes);
  let results = (outs Variadic<Kiln_Tensor>:$results);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Kiln_PadOp : Kiln_Op<"pad", [Pure, Kiln_InferTypeOpAdaptor]> {
  let summary = "pads a tensor";
  let description = [{
    Adds `low[i]` elements before and `high[i]` after dimension `i`, filled
    with `value` (constant mode), the mirrored interior (reflect) or the
    border element (edge).

    ```mlir
    %y = kiln.pad %x {low = array<i64: 0, 1>, high = array<i64: 0, 2>,
                      mode = #kiln.pad_mode<constant>, value = 0.0 : f64} : tensor<2x3xf32>
    ```
  }];
  let arguments = (ins Kiln_Tensor:$input, DenseI64ArrayAttr:$low,
                       DenseI64ArrayAttr:$high,
                       DefaultValuedAttr<Kiln_PadModeAttr,
                                         "::kiln::PadMode::constant">:$mode,
                       DefaultValuedAttr<F64Attr, "0.0">:$value);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Kiln_TileOp : Kiln_Op<"tile", [Pure, Kiln_InferTypeOpAdaptor]> {
  let summary = "repeats a tensor along each dimension";
  let description = [{
    ```mlir
    %y = kiln.tile %x {multiples = array<i64: 2, 1>} : tensor<2x3xf32>
    ```
  }];
  let arguments = (ins Kiln_Tensor:$input, DenseI64ArrayAttr:$multiples);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Kiln_IotaOp : Kiln_Op<"iota", [Pure]> {
  let summary = "counts along one dimension";
  let description = [{
    Element `[i0, ..., in]` is `i_dimension * step + start`.

    ```mlir
    %r = kiln.iota {dimension = 0 : i64} : tensor<5xi64>
    ```
  }];
  let arguments = (ins I64Attr:$dimension,
                       DefaultValuedAttr<F64Attr, "0.0">:$start,
                       DefaultValuedAttr<F64Attr, "1.0">:$step);
  let results = (outs Kiln_NumericTensor:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Kiln_GatherOp : Kiln_Op<"gather", [Pure, Kiln_InferTypeOpAdaptor]> {
  let summary = "takes slices of a tensor at indices along one axis";
  let description = [{
    ONNX `Gather`: the result shape is `input[:axis] + indices + input[axis+1:]`.
    Negative indices count from the end.

    ```mlir
    %y = kiln.gather %table, %ids {axis = 0 : i64} : tensor<100x16xf32>, tensor<4x8xi64>
    ```
  }];
  let arguments = (ins Kiln_Tensor:$input, Kiln_IndexTensor:$indices,
                       I64Attr:$axis);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = "$input `,` $indices attr-dict `:` type($input) `,` type($indices)";
  let hasFolder = 1;
}

def Kiln_GatherElementsOp : Kiln_Op<"gather_elements",
    [Pure, Kiln_InferTypeOpAdaptor]> {
  let summary = "takes elements at indices along one axis";
  let description = [{
    ONNX `GatherElements`: `out[i][j] = input[indices[i][j]][j]` for axis 0;
    the result has the shape of `indices`.

    ```mlir
    %y = kiln.gather_elements %x, %i {axis = 1 : i64} : tensor<3x4xf32>, tensor<3x2xi64>
    ```
  }];
  let arguments = (ins Kiln_Tensor:$input, Kiln_IndexTensor:$indices,
                       I64Attr:$axis);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = "$input `,` $indices attr-dict `:` type($input) `,` type($indices)";
}

def Kiln_GatherNdOp : Kiln_Op<"gather_nd", [Pure, Kiln_InferTypeOpAdaptor]> {
  let summary = "takes slices at multi-dimensional indices";
  let description = [{
    ONNX `GatherND` with `batch_dims`.

    ```mlir
    %y = kiln.gather_nd %x, %i {batch_dims = 0 : i64} : tensor<2x2xf32>, tensor<2x2xi64>
    ```
  }];
  let arguments = (ins Kiln_Tensor:$input, Kiln_IndexTensor:$indices,
                       DefaultValuedAttr<I64Attr, "0">:$batch_dims);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = "$input `,` $indices attr-dict `:` type($input) `,` type($indices)";
}

def Kiln_ScatterElementsOp : Kiln_Op<"scatter_elements", [Pure,
    AllTypesMatch<["input", "result"]>]> {
  let summary = "writes elements at indices along one axis";
  let description = [{
    ONNX `ScatterElements`: a copy of `input` with `updates` written (or
    combined with `reduction` add, mul, max or min) at `indices` along `axis`.

    ```mlir
    %y = kiln.scatter_elements %x, %i, %u {axis = 0 : i64, reduction = #kiln.reduction<none>}
        : tensor<3x3xf32>, tensor<2x3xi64>, tensor<2x3xf32>
    ```
  }];
  let arguments = (ins Kiln_Tensor:$input, Kiln_IndexTensor:$indices,
                       Kiln_Tensor:$updates, I64Attr:$axis,
                       DefaultValuedAttr<Kiln_ReductionAttr,
                                         "::kiln::Reduction::none">:$reduction);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = "$input `,` $indices `,` $updates attr-dict `:` "
      "type($input) `,` type($indices) `,` type($updates)";
  let hasVerifier = 1;
}

def Kiln_ScatterNdOp : Kiln_Op<"scatter_nd", [Pure,
    AllTypesMatch<["input", "result"]>]> {
  let summary = "writes slices at multi-dimensional indices";
  let description = [{
    ONNX `ScatterND`.

    ```mlir
    %y = kiln.scatter_nd %x, %i, %u {reduction = #kiln.reduction<none>}
        : tensor<8xf32>, tensor<4x1xi64>, tensor<4xf32>
    ```
  }];
  let arguments = (ins Kiln_Tensor:$input, Kiln_IndexTensor:$indices,
                       Kiln_Tensor:$updates,
                       DefaultValuedAttr<Kiln_ReductionAttr,
                                         "::kiln::Reduction::none">:$reduction);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = "$input `,` $indices `,` $updates attr-dict `:` "
      "type($input) `,` type($indices) `,` type($updates)";
  let hasVerifier = 1;
}

def Kiln_TriluOp : Kiln_Op<"trilu", [Pure, SameOperandsAndResultType]> {
  let summary = "keeps the upper or lower triangle of the last two dimensions";
  let description = [{
    With `upper`, keeps elements with `col - row >= diagonal` (triu);
    otherwise those with `col - row <= diagonal` (tril); zeros elsewhere.

    ```mlir
    %y = kiln.trilu %x {upper, diagonal = 1 : i64} : tensor<4x4xf32>
    ```
  }];
  let arguments = (ins Kiln_Tensor:$input, UnitAttr:$upper,
                       DefaultValuedAttr<I64Attr, "0">:$diagonal);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Kiln_CumsumOp : Kiln_Op<"cumsum", [Pure, SameOperandsAndResultType]> {
  let summary = "cumulative sum along a dimension";
  let description = [{
    ```mlir
    %y = kiln.cumsum %x {axis = 1 : i64, exclusive, reverse} : tensor<2x5xf32>
    ```
  }];
  let arguments = (ins Kiln_NumericTensor:$input, I64Attr:$axis,
                       UnitAttr:$exclusive, UnitAttr:$reverse);
  let results = (outs Kiln_NumericTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Kiln_CumprodOp : Kiln_Op<"cumprod", [Pure, SameOperandsAndResultType]> {
  let summary = "cumulative product along a dimension";
  let description = [{
    As `kiln.cumsum`, with products (an exclusive product starts at 1).
    It has no gradient rule yet.

    ```mlir
    %y = kiln.cumprod %x {axis = 1 : i64, exclusive, reverse} : tensor<2x5xf32>
    ```
  }];
  let arguments = (ins Kiln_NumericTensor:$input, I64Attr:$axis,
                       UnitAttr:$exclusive, UnitAttr:$reverse);
  let results = (outs Kiln_NumericTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Kiln_TopKOp : Kiln_Op<"top_k", [Pure, Kiln_InferTypeOpAdaptor]> {
  let summary = "the k largest or smallest elements along an axis";
  let description = [{
    Values and i64 indices, sorted (ties keep the lower index first).

    ```mlir
    %v, %i = kiln.top_k %x {k = 2 : i64, axis = 1 : i64, largest} : tensor<3x4xf32>
    ```
  }];
  let arguments = (ins Kiln_NumericTensor:$input, I64Attr:$k, I64Attr:$axis,
                       UnitAttr:$largest);
  let results = (outs Kiln_NumericTensor:$values, TensorOf<[I64]>:$indices);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

class Kiln_ArgOp<string mnemonic, string what>
    : Kiln_Op<mnemonic, [Pure, Kiln_InferTypeOpAdaptor]> {
  let summary = "index of the " # what # " element along an axis";
  let description = "i64 index of the " # what # " element; the first one "
      "unless `select_last_index`.\n\n```mlir\n%i = kiln." # mnemonic #
      " %x {axis = 1 : i64, keepdims} : tensor<3x4xf32>\n```";
  let arguments = (ins Kiln_NumericTensor:$input, I64Attr:$axis,
                       UnitAttr:$keepdims, UnitAttr:$select_last_index);
  let results = (outs TensorOf<[I64]>:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}
def Kiln_ArgMaxOp : Kiln_ArgOp<"argmax", "largest">;
def Kiln_ArgMinOp : Kiln_ArgOp<"argmin", "smallest">;

//===----------------------------------------------------------------------===//
// Reductions.
//===----------------------------------------------------------------------===//

class Kiln_ReduceOp<string mnemonic, string what, Type type = Kiln_NumericTensor>
    : Kiln_Op<mnemonic, [Pure, Kiln_InferTypeOpAdaptor]> {
  let summary = what # " over dimensions";
  let description = "Reduces `dimensions` (sorted, distinct) to their " # what #
      "; with `keepdims` they stay as size 1.\n\n```mlir\n%s = kiln." #
      mnemonic # " %x {dimensions = array<i64: 1>} : tensor<3x4xf32>\n```";
  let arguments = (ins type:$input, DenseI64ArrayAttr:$dimensions,
                       UnitAttr:$keepdims);
  let results = (outs type:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasFolder = 1;
}
def Kiln_ReduceSumOp : Kiln_ReduceOp<"reduce_sum", "sum">;
def Kiln_ReduceMeanOp : Kiln_ReduceOp<"reduce_mean", "mean", Kiln_FloatTensor>;
// Of booleans: any and all.
def Kiln_ReduceMaxOp : Kiln_ReduceOp<"reduce_max", "maximum", Kiln_Tensor>;
def Kiln_ReduceMinOp : Kiln_ReduceOp<"reduce_min", "minimum", Kiln_Tensor>;
def Kiln_ReduceProdOp : Kiln_ReduceOp<"reduce_prod", "product">;
def Kiln_ReduceL2Op : Kiln_ReduceOp<"reduce_l2", "Euclidean norm", Kiln_FloatTensor>;
def Kiln_ReduceLogSumExpOp : Kiln_ReduceOp<"reduce_logsumexp",
    "log of the sum of exponentials", Kiln_FloatTensor>;

//===----------------------------------------------------------------------===//
// Neural network operations.
//===----------------------------------------------------------------------===//

def Kiln_MatmulOp : Kiln_Op<"matmul", [Pure, Kiln_InferTypeOpAdaptor]> {
  let summary = "matrix product, batched over leading dimensions";
  let description = [{
    `lhs` is `[B..., M, K]` (or `[B..., K, M]` with `transpose_lhs`) and `rhs`
    is `[B..., K, N]` (or `[B..., N, K]` with `transpose_rhs`); both have the
    same rank and batch dimensions. The result is `[B..., M, N]`.

    ```mlir
    %y = kiln.matmul %a, %b {transpose_rhs} : tensor<8x16xf32>, tensor<32x16xf32>
    ```
  }];
  let arguments = (ins Kiln_NumericTensor:$lhs, Kiln_NumericTensor:$rhs,
                       UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs);
  let results = (outs Kiln_NumericTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs)";
  let hasCanonicalizer = 1;
}

def Kiln_ConvOp : Kiln_Op<"conv", [Pure, Kiln_InferTypeOpAdaptor]> {
  let summary = "N-dimensional grouped convolution (NCHW)";
  let description = [{
    `input` is `[N, C, D...]`, `filter` is `[F, C / groups, K...]`; `padding`
    holds the begin paddings of every spatial dimension, then the end ones.

    ```mlir
    %y = kiln.conv %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>,
                           dilations = array<i64: 1, 1>, groups = 1 : i64}
        : tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, Kiln_FloatTensor:$filter,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$padding,
                       DenseI64ArrayAttr:$dilations,
                       DefaultValuedAttr<I64Attr, "1">:$groups);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = "$input `,` $filter attr-dict `:` type($input) `,` type($filter)";
}

def Kiln_ConvTransposeOp : Kiln_Op<"conv_transpose", [Pure, Kiln_InferTypeOpAdaptor]> {
  let summary = "N-dimensional transposed convolution (NCHW)";
  let description = [{
    The gradient of `kiln.conv` with respect to its input. `filter` is
    `[C, F / groups, K...]`; output size per spatial dimension is
    `stride * (in - 1) + output_padding + (K - 1) * dilation + 1 - pad_begin - pad_end`.

    ```mlir
    %y = kiln.conv_transpose %x, %w {strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>,
                                     dilations = array<i64: 1, 1>, output_padding = array<i64: 0, 0>}
        : tensor<1x4x4x4xf32>, tensor<4x2x3x3xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, Kiln_FloatTensor:$filter,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$padding,
                       DenseI64ArrayAttr:$dilations,
                       DenseI64ArrayAttr:$output_padding,
                       DefaultValuedAttr<I64Attr, "1">:$groups);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = "$input `,` $filter attr-dict `:` type($input) `,` type($filter)";
}

class Kiln_PoolOp<string mnemonic, string what, dag extra>
    : Kiln_Op<mnemonic, [Pure, Kiln_InferTypeOpAdaptor]> {
  let summary = what # " pooling over the spatial dimensions (NCHW)";
  let description = "Windows of size `kernel` every `strides`, with begin "
      "then end `padding` per spatial dimension; `ceil_mode` rounds the "
      "output size up.\n\n```mlir\n%y = kiln." # mnemonic #
      " %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = "
      "array<i64: 0, 0, 0, 0>} : tensor<1x3x8x8xf32>\n```";
  let arguments = !con((ins Kiln_FloatTensor:$input, DenseI64ArrayAttr:$kernel,
                            DenseI64ArrayAttr:$strides,
                            DenseI64ArrayAttr:$padding, UnitAttr:$ceil_mode),
                       extra);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}
def Kiln_MaxPoolOp : Kiln_PoolOp<"max_pool", "maximum",
    (ins OptionalAttr<DenseI64ArrayAttr>:$dilations)>;
def Kiln_AvgPoolOp : Kiln_PoolOp<"avg_pool", "average",
    (ins UnitAttr:$count_include_pad,
         OptionalAttr<DenseI64ArrayAttr>:$dilations)> {
  let extraClassDeclaration = [{
    /// What each output position divides its window's sum by, as a constant
    /// of the result's spatial shape and element type: the window's taps
    /// inside the input and its padding (with count_include_pad) or inside
    /// the input alone, never the ceil-mode overhang (PyTorch's rule).
    ::mlir::DenseElementsAttr getDivisors();
    /// The dilation of each spatial dimension (1 where none is given).
    ::llvm::SmallVector<int64_t> getDilationsOrOnes();
  }];
}

def Kiln_ResizeOp : Kiln_Op<"resize", [Pure]> {
  let summary = "resizes a tensor by interpolation (ONNX Resize)";
  let description = [{
    Each output coordinate `x` of dimension `d` maps to the input coordinate
    given by `coordinate_mode` with the dimension's `scales[d]` (for
    `half_pixel`: `(x + 0.5) / scale - 0.5`); the value there is taken from
    the nearest element (rounded as `nearest_mode` says), or interpolated
    linearly or cubically (with `cubic_coeff_a`, and with `exclude_outside`
    dropping taps outside the input) from the neighbouring elements, the
    input's border repeating outside it.

    ```mlir
    %y = kiln.resize %x {mode = #kiln.resize_mode<linear>,
                         coordinate_mode = #kiln.coordinate_mode<half_pixel>,
                         scales = array<f64: 1.0, 1.0, 2.0, 2.0>}
        : tensor<1x3x4x4xf32> to tensor<1x3x8x8xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, Kiln_ResizeModeAttr:$mode,
                       Kiln_CoordinateModeAttr:$coordinate_mode,
                       DefaultValuedAttr<Kiln_NearestModeAttr,
                           "::kiln::NearestMode::round_prefer_floor">:$nearest_mode,
                       DenseF64ArrayAttr:$scales,
                       DefaultValuedAttr<F64Attr, "-0.75">:$cubic_coeff_a,
                       UnitAttr:$exclude_outside);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
  let hasVerifier = 1;
}

class Kiln_SoftmaxBase<string mnemonic, string what>
    : Kiln_Op<mnemonic, [Pure, SameOperandsAndResultType]> {
  let summary = what # " along one dimension";
  let description = "```mlir\n%y = kiln." # mnemonic #
      " %x {axis = 1 : i64} : tensor<4x10xf32>\n```";
  let arguments = (ins Kiln_FloatTensor:$input, I64Attr:$axis);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}
def Kiln_SoftmaxOp : Kiln_SoftmaxBase<"softmax", "softmax">;
def Kiln_LogSoftmaxOp : Kiln_SoftmaxBase<"log_softmax", "log of softmax">;

def Kiln_AttentionOp : Kiln_Op<"attention", [Pure, Kiln_InferTypeOpAdaptor]> {
  let summary = "scaled dot-product attention";
  let description = [{
    `softmax(query · keyᵀ · scale + mask) · value`, the softmax along the
    last dimension. `query` is `[B..., Sq, D]`, `key` `[B..., Sk, D]`,
    `value` `[B..., Sk, Dv]`, all with the same batch dimensions; the result
    is `[B..., Sq, Dv]`. The optional additive `mask` broadcasts (numpy
    style, from the right) to the scores `[B..., Sq, Sk]`: 0 keeps a score,
    -inf drops it.

    With `masked_fill` (which needs a mask), a mask value at most -2^100
    stands for a `masked_fill` of the score with that value rather than an
    addition: the forward is the same (such a value absorbs any score), but
    the scores it fills get no gradient (kiln.attention_grad). That is what
    differs where a row fills every score: its probabilities are uniform,
    and its scores get no gradient at all, as PyTorch's masked_fill gives
    them.

    With `causal_fill` (which needs a mask and as many queries as keys),
    the scores after each query's position are filled rather than added
    to: the mask there is the fill plus any mask added after it (as
    Hugging Face's GPT-2 writes `where(causal, scores, lowest) +
    padding`), and they get no gradient; the rest is as without it. That
    is what differs in a row whose kept keys are all masked: its
    probabilities are uniform over every score of the lowest value, and
    only those up to the query's position get a gradient.

    kiln-fuse-attention forms this op from the matmul, scale, mask, softmax
    and matmul chain, so that autodiff uses its own gradient: the backward
    recomputes the probabilities from `query` and `key` and needs nothing
    else of the forward. kiln-decompose expands it back into that chain.

    ```mlir
    %o = kiln.attention %q, %k, %v mask %m : tensor<1x1x16x16xf32> {scale = 0.25 : f64}
        : tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$query, Kiln_FloatTensor:$key,
                       Kiln_FloatTensor:$value,
                       Optional<Kiln_FloatTensor>:$mask,
                       DefaultValuedAttr<F64Attr, "1.0">:$scale,
                       UnitAttr:$masked_fill, UnitAttr:$causal_fill);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = "$query `,` $key `,` $value (`mask` $mask^ `:` "
      "type($mask))? attr-dict `:` type($query) `,` type($key) `,` "
      "type($value)";
  let hasVerifier = 1;
}

def Kiln_AttentionGradOp : Kiln_Op<"attention_grad", [Pure,
    AllTypesMatch<["query", "query_grad"]>, AllTypesMatch<["key", "key_grad"]>,
    AllTypesMatch<["value", "value_grad"]>, AllTypesMatch<["out", "grad"]>]> {
  let summary = "the gradients of kiln.attention's query, key and value";
  let description = [{
    Given a `kiln.attention`'s operands, its result `out` and the gradient
    `grad` of its result, the gradients of its query, key and value. With
    S = query · keyᵀ · scale + mask, P = softmax(S) and out = P · value:
    `value_grad = Pᵀ grad`, dP = grad · valueᵀ, dS = P (dP - rowsum(grad
    out)), `query_grad = dS · key · scale` and `key_grad = dSᵀ · query ·
    scale`. (rowsum(grad out) is rowsum(dP P).) With `masked_fill`, dS is
    0 where the mask is at most -2^100 (kiln.attention's `masked_fill`);
    with `causal_fill`, after each query's position.
    The mask's gradient, when needed, is not this op's: kiln-autodiff builds
    it from the expanded chain.

    kiln-autodiff builds this op for kiln.attention, so that a target can
    compute the backward pass without storing the probabilities
    (kiln-attention-kernel); kiln-decompose expands it into products and a
    softmax that recompute them.

    ```mlir
    %dq, %dk, %dv = kiln.attention_grad %q, %k, %v, %o, %do {scale = 0.25 : f64}
        : tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$query, Kiln_FloatTensor:$key,
                       Kiln_FloatTensor:$value, Kiln_FloatTensor:$out,
                       Kiln_FloatTensor:$grad,
                       Optional<Kiln_FloatTensor>:$mask,
                       DefaultValuedAttr<F64Attr, "1.0">:$scale,
                       UnitAttr:$masked_fill, UnitAttr:$causal_fill);
  let results = (outs Kiln_FloatTensor:$query_grad, Kiln_FloatTensor:$key_grad,
                      Kiln_FloatTensor:$value_grad);
  let assemblyFormat = "$query `,` $key `,` $value `,` $out `,` $grad "
      "(`mask` $mask^ `:` type($mask))? attr-dict `:` type($query) `,` "
      "type($key) `,` type($value) `,` type($out)";
  let hasVerifier = 1;
}

// A tensor (on tensors) or, after bufferization, a buffer.
def Kiln_FlashOperand : AnyTypeOf<[Kiln_FloatTensor, AnyStaticShapeMemRef]>;

def Kiln_FlashAttentionOp : Kiln_Op<"flash_attention",
    [AttrSizedOperandSegments]> {
  let summary = "attention on tensor cores, with each row's softmax statistics";
  let description = [{
    `softmax(query · keyᵀ · scale + mask) · value` as the CUDA target's
    tensor-core attention kernel computes it (runtime/src/cuda/
    FlashAttention.h), for the gradient to reuse. `query` is `[B, H, Sq, D]`,
    `key` and `value` `[B, H, Sk, D]`, all bf16 or all f16, with D 16, 32, 64
    or 128; the results are the f32 output `[B, H, Sq, D]` and the f32
    statistics `[B, H, Sq, 2]` of each row, which kiln.flash_attention_grad
    reads: the softmax's shift (the row's largest score, in base-2 units:
    scores times log2 e) and its denominator (the sum of 2^(score -
    shift)). With `cudnn`, cuDNN's fused attention computes it instead: the
    output is of the query's type, the statistics' first half holds each
    row's log-sum-exp, packed, and the key and value may have fewer heads
    than the query, a divisor of them (grouped-query attention: key head
    `h / (H / Hk)` serves query head `h`). The optional f32
    `mask` `[B or 1, H or 1, Sq or 1, Sk]` is
    added to the scores (a padding mask, or a causal mask held in a buffer;
    the kernels skip the tiles it drops whole); `causal` drops every key
    after the query's position (Sq = Sk) without reading a mask. A row that
    drops every key with -inf is NaN, as the softmax's is; one that a
    finite mask drops whole (Hugging Face's lowest float) has the softmax's
    uniform probabilities.

    kiln-flash-attention forms this op from kiln.attention where the CUDA
    target computes in bf16 or f16. After bufferization the op takes the
    buffers of its two results after its operands (`into`) and has none;
    the CUDA target makes it one command, and kiln-gpu-emulate a call into
    the runtime's host version.

    ```mlir
    %o, %stats = kiln.flash_attention %q, %k, %v {scale = 0.125 : f64, causal}
        : (tensor<2x4x128x64xbf16>, tensor<2x4x128x64xbf16>, tensor<2x4x128x64xbf16>)
        -> (tensor<2x4x128x64xf32>, tensor<2x4x128x2xf32>)
    ```
  }];
  let arguments = (ins Kiln_FlashOperand:$query, Kiln_FlashOperand:$key,
                       Kiln_FlashOperand:$value,
                       Optional<Kiln_FlashOperand>:$mask,
                       Variadic<AnyStaticShapeMemRef>:$outputs,
                       DefaultValuedAttr<F64Attr, "1.0">:$scale,
                       UnitAttr:$causal, UnitAttr:$cudnn);
  let results = (outs Variadic<Kiln_FloatTensor>:$results);
  let assemblyFormat = "$query `,` $key `,` $value (`mask` $mask^)? "
      "(`into` $outputs^)? attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Whether this is the buffer form (output buffers, no results).
    bool hasBufferSemantics() { return !getOutputs().empty(); }
    /// The output and the statistics: results, or output buffers.
    mlir::ValueRange getProduced() {
      return hasBufferSemantics() ? mlir::ValueRange(getOutputs())
                                  : mlir::ValueRange(getResults());
    }
  }];
}

def Kiln_FlashAttentionGradOp : Kiln_Op<"flash_attention_grad",
    [AttrSizedOperandSegments]> {
  let summary = "the gradients of kiln.flash_attention's query, key and value";
  let description = [{
    Given a kiln.flash_attention's operands, its output `out`, its
    statistics `stats` and the f32 gradient `grad` of its output, the f32
    gradients of its query, key and value, and each query row's
    rowsum(grad · out) (`[B, H, Sq]`, which the kernels share). With S =
    query · keyᵀ · scale + mask, P = softmax(S), recomputed from S and the
    statistics: `value_grad = Pᵀ grad`, dS = P (grad · valueᵀ - rowsum(grad
    out)), `query_grad = dS · key · scale`, `key_grad = dSᵀ · query ·
    scale`. With `masked_fill`, dS is 0 where the mask is at most -2^100
    (kiln.attention's `masked_fill`); with `causal_fill`, after each
    query's position. With `cudnn` (a forward's), cuDNN computes it: `out`,
    `grad` and the three input gradients are of the query's type, there is
    no masked_fill or causal_fill, and grouped key and value heads get
    their gradients summed over the query heads they serve.

    kiln-flash-attention forms this op from the kiln.attention_grad of an
    attention it made a kiln.flash_attention. The buffer form takes the
    four results' buffers after its operands.

    ```mlir
    %dq, %dk, %dv, %delta = kiln.flash_attention_grad %q, %k, %v, %o, %do, %stats {scale = 0.125 : f64, causal}
        : (tensor<2x4x128x64xbf16>, tensor<2x4x128x64xbf16>, tensor<2x4x128x64xbf16>,
           tensor<2x4x128x64xf32>, tensor<2x4x128x64xf32>, tensor<2x4x128x2xf32>)
        -> (tensor<2x4x128x64xf32>, tensor<2x4x128x64xf32>, tensor<2x4x128x64xf32>,
            tensor<2x4x128xf32>)
    ```
  }];
  let arguments = (ins Kiln_FlashOperand:$query, Kiln_FlashOperand:$key,
                       Kiln_FlashOperand:$value, Kiln_FlashOperand:$out,
                       Kiln_FlashOperand:$grad, Kiln_FlashOperand:$stats,
                       Optional<Kiln_FlashOperand>:$mask,
                       Variadic<AnyStaticShapeMemRef>:$outputs,
                       DefaultValuedAttr<F64Attr, "1.0">:$scale,
                       UnitAttr:$causal, UnitAttr:$masked_fill,
                       UnitAttr:$causal_fill, UnitAttr:$cudnn);
  let results = (outs Variadic<Kiln_FloatTensor>:$results);
  let assemblyFormat = "$query `,` $key `,` $value `,` $out `,` $grad `,` "
      "$stats (`mask` $mask^)? (`into` $outputs^)? attr-dict `:` "
      "functional-type(operands, results)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Whether this is the buffer form (output buffers, no results).
    bool hasBufferSemantics() { return !getOutputs().empty(); }
    /// dq, dk, dv and delta: results, or output buffers.
    mlir::ValueRange getProduced() {
      return hasBufferSemantics() ? mlir::ValueRange(getOutputs())
                                  : mlir::ValueRange(getResults());
    }
  }];
}

def Kiln_FusedLayerNormOp : Kiln_Op<"fused_layer_norm",
    [AttrSizedOperandSegments]> {
  let summary = "layer norm of each row, as the CUDA target's kernels do it";
  let description = [{
    kiln.layer_norm over the last dimension of an f32 `[rows, cols]` matrix,
    as the CUDA target's layer-norm kernels compute it (runtime/src/cuda/
    LayerNorm.h): `scale` and the optional `bias` are f32 `[cols]`, and the
    result `[rows, cols]` is f32, bf16 or f16 (the normalized value rounded
    to it, which spares a kernel that rounds it for a matrix product under
    `--amp`). With the optional `residual` `[rows, cols]` it normalizes
    `input + residual` (a residual connection's sum) and also returns that
    sum, f32: the kernel that added them is spared too. With a residual,
    `input` and `residual` may each be bf16 or f16 (a product stored them
    so, kiln-amp), widened exactly as read; the sum is f32. One more result,
    bf16 or f16 after an f32 result, is the result rounded to it: the copy
    the products read where the rest read the f32 result (kiln-amp adds it
    for a post-norm residual stream).

    kiln-fused-layer-norm forms this op from kiln.layer_norm for the CUDA
    target. After bufferization the op takes the buffer of its result after
    its operands (`into`) and has none; the CUDA target makes it one
    command, and kiln-gpu-emulate a call into the runtime's host version.

    ```mlir
    %y = kiln.fused_layer_norm %x, %g bias %b {epsilon = 1.0e-5 : f64}
        : (tensor<8x768xf32>, tensor<768xf32>, tensor<768xf32>) -> tensor<8x768xbf16>
    ```
  }];
  let arguments = (ins Kiln_FlashOperand:$input, Kiln_FlashOperand:$scale,
                       Optional<Kiln_FlashOperand>:$bias,
                       Optional<Kiln_FlashOperand>:$residual,
                       Variadic<AnyStaticShapeMemRef>:$outputs,
                       DefaultValuedAttr<F64Attr, "1.0e-5">:$epsilon);
  let results = (outs Variadic<Kiln_FloatTensor>:$results);
  let assemblyFormat = "$input `,` $scale (`bias` $bias^)? "
      "(`residual` $residual^)? (`into` $outputs^)? attr-dict `:` "
      "functional-type(operands, results)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Whether this is the buffer form (output buffers, no results).
    bool hasBufferSemantics() { return !getOutputs().empty(); }
    /// The result and, with a residual, the sum, then the copy if any:
    /// results, or output buffers.
    mlir::ValueRange getProduced() {
      return hasBufferSemantics() ? mlir::ValueRange(getOutputs())
                                  : mlir::ValueRange(getResults());
    }
    /// The result's 16-bit copy (a result or an output buffer), or null.
    mlir::Value getCopy() {
      mlir::ValueRange produced = getProduced();
      size_t copy = getResidual() ? 2 : 1;
      return produced.size() > copy ? produced[copy] : mlir::Value();
    }
  }];
}

def Kiln_FusedLayerNormGradOp : Kiln_Op<"fused_layer_norm_grad",
    [AttrSizedOperandSegments]> {
  let summary = "kiln.layer_norm_grad of each row, as the CUDA kernels do it";
  let description = [{
    kiln.layer_norm_grad over the last dimension of an f32 `[rows, cols]`
    matrix `input`, from the f32 gradient `grad` of the layer norm's
    result, as the CUDA target's kernels compute it: the results are the
    input's gradient `[rows, cols]`, the scale's and the bias's `[cols]`,
    and the kernels' scratch `[ceil(rows / 32), 2, cols]`, each block of 32
    rows' sums of `grad · x̂` and `grad`, which the two vector gradients
    add up. All f32, but `grad` and `accumulate`, which may be bf16 or f16
    (a product stored them so, kiln-amp), widened exactly as read. With the
    optional `accumulate` `[rows, cols]` the input's gradient is
    `accumulate` plus the layer norm's (a residual connection's gradient,
    summed with it). A fifth result, bf16 or f16,
    is the input's gradient rounded to it, for products under `--amp`
    (kiln-amp adds it).

    kiln-fused-layer-norm forms this op from kiln.layer_norm_grad for the
    CUDA target. The buffer form takes the four results' buffers after its
    operands.

    ```mlir
    %dx, %dg, %db, %partials = kiln.fused_layer_norm_grad %x, %g, %dy {epsilon = 1.0e-5 : f64}
        : (tensor<64x768xf32>, tensor<768xf32>, tensor<64x768xf32>)
        -> (tensor<64x768xf32>, tensor<768xf32>, tensor<768xf32>, tensor<2x2x768xf32>)
    ```
  }];
  let arguments = (ins Kiln_FlashOperand:$input, Kiln_FlashOperand:$scale,
                       Kiln_FlashOperand:$grad,
                       Optional<Kiln_FlashOperand>:$accumulate,
                       Variadic<AnyStaticShapeMemRef>:$outputs,
                       DefaultValuedAttr<F64Attr, "1.0e-5">:$epsilon);
  let results = (outs Variadic<Kiln_FloatTensor>:$results);
  let assemblyFormat = "$input `,` $scale `,` $grad "
      "(`accumulate` $accumulate^)? (`into` $outputs^)? attr-dict `:` "
      "functional-type(operands, results)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Blocks of 32 rows (the runtime's KILN_LAYER_NORM_PARTIAL_ROWS) whose
    /// sums the partials result holds, for `rows` rows.
    static int64_t partialBlocks(int64_t rows) { return (rows + 31) / 32; }
    /// Whether this is the buffer form (output buffers, no results).
    bool hasBufferSemantics() { return !getOutputs().empty(); }
    /// The input's, scale's and bias's gradients and the partial sums:
    /// results, or output buffers.
    mlir::ValueRange getProduced() {
      return hasBufferSemantics() ? mlir::ValueRange(getOutputs())
                                  : mlir::ValueRange(getResults());
    }
  }];
}

def Kiln_LayerNormOp : Kiln_Op<"layer_norm", [Pure,
    AllTypesMatch<["input", "result"]>]> {
  let summary = "layer normalization over the trailing dimensions";
  let description = [{
    Normalizes over dimensions `axis..rank-1` to zero mean and unit variance
    (biased), then applies `scale` and the optional `bias`, whose shape is
    those trailing dimensions.

    ```mlir
    %y = kiln.layer_norm %x, %g bias %b : tensor<16xf32> {axis = 1 : i64, epsilon = 1.0e-5 : f64}
        : tensor<4x16xf32>, tensor<16xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, Kiln_FloatTensor:$scale,
                       Optional<Kiln_FloatTensor>:$bias, I64Attr:$axis,
                       DefaultValuedAttr<F64Attr, "1.0e-5">:$epsilon);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = "$input `,` $scale (`bias` $bias^ `:` type($bias))? "
      "attr-dict `:` type($input) `,` type($scale)";
  let hasVerifier = 1;
}

def Kiln_LayerNormGradOp : Kiln_Op<"layer_norm_grad", [Pure,
    AllTypesMatch<["input", "grad", "input_grad"]>,
    AllTypesMatch<["scale", "scale_grad", "bias_grad"]>]> {
  let summary = "the gradients of kiln.layer_norm's input, scale and bias";
  let description = [{
    Given a `kiln.layer_norm`'s input and scale, its `axis` and `epsilon`,
    and the gradient `grad` of its result, the gradients of its input, its
    scale and its bias (whether it has one or not). Over the normalized
    dimensions `axis..rank-1` (n elements), with x̂ the normalized input,
    r = rsqrt(var + epsilon) and gs = grad · scale: `input_grad = r (gs -
    mean(gs) - x̂ mean(gs x̂))`; over the leading dimensions `0..axis-1`,
    `scale_grad = sum(grad x̂)` and `bias_grad = sum(grad)`.

    kiln-autodiff builds this op for kiln.layer_norm, so that a target can
    compute the backward pass from the input alone, one row at a time
    (kiln-fused-layer-norm); kiln-decompose expands it into core ops that
    recompute the statistics.

    ```mlir
    %dx, %dg, %db = kiln.layer_norm_grad %x, %g, %dy {axis = 1 : i64, epsilon = 1.0e-5 : f64}
        : tensor<4x16xf32>, tensor<16xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, Kiln_FloatTensor:$scale,
                       Kiln_FloatTensor:$grad, I64Attr:$axis,
                       DefaultValuedAttr<F64Attr, "1.0e-5">:$epsilon);
  let results = (outs Kiln_FloatTensor:$input_grad,
                      Kiln_FloatTensor:$scale_grad,
                      Kiln_FloatTensor:$bias_grad);
  let assemblyFormat = "$input `,` $scale `,` $grad attr-dict `:` "
      "type($input) `,` type($scale)";
  let hasVerifier = 1;
}

def Kiln_BatchNormOp : Kiln_Op<"batch_norm", [Pure,
    AllTypesMatch<["input", "result"]>,
    AllTypesMatch<["scale", "bias", "mean", "variance"]>]> {
  let summary = "batch normalization with given statistics (inference form)";
  let description = [{
    `(x - mean) / sqrt(variance + epsilon) * scale + bias` per channel
    (dimension 1).

    ```mlir
    %y = kiln.batch_norm %x, %s, %b, %m, %v {epsilon = 1.0e-5 : f64}
        : tensor<2x3x4x4xf32>, tensor<3xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, Kiln_FloatTensor:$scale,
                       Kiln_FloatTensor:$bias, Kiln_FloatTensor:$mean,
                       Kiln_FloatTensor:$variance,
                       DefaultValuedAttr<F64Attr, "1.0e-5">:$epsilon);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = "$input `,` $scale `,` $bias `,` $mean `,` $variance "
      "attr-dict `:` type($input) `,` type($scale)";
  let hasVerifier = 1;
}

def Kiln_BatchNormTrainOp : Kiln_Op<"batch_norm_train", [Pure,
    Kiln_InferTypeOpAdaptor, AllTypesMatch<["scale", "bias"]>]> {
  let summary = "batch normalization with statistics of the batch";
  let description = [{
    Normalizes with the mean and biased variance of the batch over every
    dimension but 1, and returns those statistics too.

    ```mlir
    %y, %m, %v = kiln.batch_norm_train %x, %s, %b {epsilon = 1.0e-5 : f64}
        : tensor<2x3x4x4xf32>, tensor<3xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, Kiln_FloatTensor:$scale,
                       Kiln_FloatTensor:$bias,
                       DefaultValuedAttr<F64Attr, "1.0e-5">:$epsilon);
  let results = (outs Kiln_FloatTensor:$result, Kiln_FloatTensor:$batch_mean,
                      Kiln_FloatTensor:$batch_variance);
  let assemblyFormat = "$input `,` $scale `,` $bias attr-dict `:` "
      "type($input) `,` type($scale)";
}

def Kiln_DropoutOp : Kiln_Op<"dropout", [Pure, Kiln_InferTypeOpAdaptor]> {
  let summary = "random dropout with an explicit seed";
  let description = [{
    Zeroes each element with probability `ratio` and scales the rest by
    `1 / (1 - ratio)`; returns the result and the keep mask. The random
    stream is a pure function of `seed`, so the op has no side effects.

    ```mlir
    %y, %mask = kiln.dropout %x, %seed {ratio = 0.1 : f64} : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, Kiln_SeedTensor:$seed,
                       F64Attr:$ratio);
  let results = (outs Kiln_FloatTensor:$result, Kiln_BoolTensor:$mask);
  let assemblyFormat = "$input `,` $seed attr-dict `:` type($input)";
}

def Kiln_CrossEntropyOp : Kiln_Op<"cross_entropy", [Pure,
    Kiln_InferTypeOpAdaptor]> {
  let summary = "softmax cross-entropy loss of logits against class labels";
  let description = [{
    `logits` is `[N, C]` or `[N, C, D...]`, `labels` holds class indices of
    shape `[N]` or `[N, D...]`. Labels equal to `ignore_index` contribute
    nothing; `label_smoothing` mixes the target with the uniform distribution
    as in PyTorch; `weight` (`[C]`) weighs classes. `reduction` is none, sum
    or mean (weighted mean over the non-ignored elements).

    ```mlir
    %l = kiln.cross_entropy %logits, %labels {reduction = #kiln.reduction<mean>}
        : tensor<8x10xf32>, tensor<8xi64>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$logits, Kiln_IndexTensor:$labels,
                       Optional<Kiln_FloatTensor>:$weight,
                       DefaultValuedAttr<Kiln_ReductionAttr,
                                         "::kiln::Reduction::mean">:$reduction,
                       OptionalAttr<I64Attr>:$ignore_index,
                       DefaultValuedAttr<F64Attr, "0.0">:$label_smoothing);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = "$logits `,` $labels (`weight` $weight^ `:` type($weight))? "
      "attr-dict `:` type($logits) `,` type($labels)";
}

def Kiln_CrossEntropyGradOp : Kiln_Op<"cross_entropy_grad", [Pure,
    AllTypesMatch<["logits", "logits_grad"]>]> {
  let summary = "the gradient of kiln.cross_entropy's logits";
  let description = [{
    Given a `kiln.cross_entropy`'s logits, labels, class weights and
    attributes, and the gradient `grad` of its result (a scalar, or `[N,
    D...]` for reduction none), the gradient of the logits. With p the
    softmax of the logits over the class dimension, w the class weights (1
    without them), W their sum, C the number of classes, s the label
    smoothing and y an element's label, the gradient of an element's logits
    is `r ((1 - s) w_y (p - onehot(y)) + s / C (W p - w))`, where r is
    `grad` (divided by the sum of the counted elements' w_y for the mean)
    and 0 for an element whose label is `ignore_index`.

    kiln-autodiff builds this op for kiln.cross_entropy, so that the
    backward pass reads the logits once instead of differentiating the
    log-softmax's expansion; kiln-decompose expands it into core ops that
    recompute the softmax's statistics, the same ops as the forward's
    expansion, so CSE computes them once.

    ```mlir
    %dx = kiln.cross_entropy_grad %logits, %labels, %g {ignore_index = -100 : i64}
        : tensor<8x10xf32>, tensor<8xi64>, tensor<f32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$logits, Kiln_IndexTensor:$labels,
                       Kiln_FloatTensor:$grad,
                       Optional<Kiln_FloatTensor>:$weight,
                       DefaultValuedAttr<Kiln_ReductionAttr,
                                         "::kiln::Reduction::mean">:$reduction,
                       OptionalAttr<I64Attr>:$ignore_index,
                       DefaultValuedAttr<F64Attr, "0.0">:$label_smoothing);
  let results = (outs Kiln_FloatTensor:$logits_grad);
  let assemblyFormat = "$logits `,` $labels `,` $grad "
      "(`weight` $weight^ `:` type($weight))? attr-dict `:` type($logits) `,` "
      "type($labels) `,` type($grad)";
  let hasVerifier = 1;
}

def Kiln_NllLossOp : Kiln_Op<"nll_loss", [Pure, Kiln_InferTypeOpAdaptor]> {
  let summary = "negative log-likelihood loss of log-probabilities";
  let description = [{
    ONNX `NegativeLogLikelihoodLoss`: `-input[n, labels[n], d...]`, weighted
    by the optional `weight` of the class and reduced as `reduction` says.
    Of a `kiln.log_softmax` over the class dimension (dimension 1) that
    nothing else reads, it canonicalizes to `kiln.cross_entropy` of the
    logits, the same loss, whose gradient reads the logits once.

    ```mlir
    %l = kiln.nll_loss %logp, %labels {reduction = #kiln.reduction<mean>}
        : tensor<8x10xf32>, tensor<8xi64>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, Kiln_IndexTensor:$labels,
                       Optional<Kiln_FloatTensor>:$weight,
                       DefaultValuedAttr<Kiln_ReductionAttr,
                                         "::kiln::Reduction::mean">:$reduction,
                       OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = "$input `,` $labels (`weight` $weight^ `:` type($weight))? "
      "attr-dict `:` type($input) `,` type($labels)";
  let hasCanonicalizer = 1;
}

def Kiln_AllReduceMeanOp : Kiln_Op<"all_reduce_mean",
    [DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "mean over all ranks, for data parallelism";
  let description = [{
    Every rank of a data-parallel run holds its own value of each operand;
    the op's results (tensor form) are the elementwise means over all
    ranks, so every rank continues with the same values. The number of
    ranks is known only when the bundle runs: one compiled step runs at any
    world size, and a single process is a world of one.

    kiln-train-step (with `data-parallel`) puts one of these after each
    bucket of parameter gradients, as soon as the last of them is computed,
    and one on the loss. After bufferization the op takes the buffers and
    has no results (buffer form): it averages them in place. The CPU target
    calls the runtime's collectives for each buffer there and waits for
    each just before its first reader, so the communication of a bucket
    overlaps the backward kernels that follow it.

    ```mlir
    %g0, %g1 = kiln.all_reduce_mean %a, %b : tensor<16x8xf32>, tensor<8xf32>
    kiln.all_reduce_mean %buf0, %buf1 : memref<16x8xf32>, memref<8xf32>
    ```
  }];
  let arguments = (ins Variadic<AnyTypeOf<[Kiln_FloatTensor,
                                           AnyStaticShapeMemRef]>>:$inputs);
  let results = (outs Variadic<Kiln_FloatTensor>:$results);
  let assemblyFormat = "$inputs attr-dict `:` type($inputs)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Whether this is the buffer form (memref operands, no results).
    bool hasBufferSemantics() { return getResults().empty(); }
  }];
}

// The three ops of a sharded optimizer (ZeRO-1). Each takes a 1-D f32 value
// and, after bufferization, also the 1-D buffer it writes. `ranks` is the
// world size the step is compiled for: the shards have static sizes.
class Kiln_ShardingOp<string mnemonic, string summaryText>
    : Kiln_Op<mnemonic> {
  let summary = summaryText;
  let arguments = (ins AnyTypeOf<[Kiln_FloatTensor,
                                  AnyStaticShapeMemRef]>:$input,
                       Optional<AnyStaticShapeMemRef>:$output,
                       ConfinedAttr<I64Attr, [IntPositive]>:$ranks);
  let results = (outs Optional<Kiln_FloatTensor>:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Whether this is the buffer form (input and output buffers, no
    /// result).
    bool hasBufferSemantics() { return getOutput() != nullptr; }
  }];
}

def Kiln_ReduceScatterMeanOp : Kiln_ShardingOp<"reduce_scatter_mean",
    "this rank's shard of the mean over all ranks"> {
  let description = [{
    The input (1-D, `ranks` times the result's size) holds this rank's
    values; the result is the mean over all ranks of the shard at
    `rank * size`. kiln-train-step (with `shard-optimizer`) averages each
    bucket of gradients with one, so each rank receives only the gradients
    its shard of the optimizer state updates. The CPU target starts it
    where the op is and waits just before the input or the result is
    touched again.

    ```mlir
    %s = kiln.reduce_scatter_mean %g {ranks = 2 : i64} : (tensor<8xf32>) -> tensor<4xf32>
    kiln.reduce_scatter_mean %in, %out {ranks = 2 : i64} : (memref<8xf32>, memref<4xf32>) -> ()
    ```
  }];
}

def Kiln_AllGatherOp : Kiln_ShardingOp<"all_gather",
    "every rank's shard, in rank order"> {
  let description = [{
    The result (1-D, `ranks` times the input's size) holds every rank's
    input, rank 0's first. kiln-train-step (with `shard-optimizer`) gathers
    the updated parameter shards with one per bucket.

    ```mlir
    %p = kiln.all_gather %s {ranks = 2 : i64} : (tensor<4xf32>) -> tensor<8xf32>
    ```
  }];
}

def Kiln_LocalShardOp : Kiln_ShardingOp<"local_shard",
    "this rank's shard of a value all ranks hold"> {
  let description = [{
    The elements `[rank * size, (rank + 1) * size)` of the input, where the
    input's size is `ranks` times the result's: the parameters a rank's
    shard of the optimizer state updates. No communication.

    ```mlir
    %s = kiln.local_shard %p {ranks = 2 : i64} : (tensor<8xf32>) -> tensor<4xf32>
    ```
  }];
}

#endif // KILN_OPS_TD
