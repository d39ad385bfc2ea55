// RUN: kiln-opt %s --canonicalize | FileCheck %s

// Folders of the kiln dialect. Expected values come from NumPy, PyTorch and
// Python's math module (float results to 6 significant digits), not from
// kiln-opt.

//===----------------------------------------------------------------------===//
// Unary elementwise.
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @exp(
// CHECK: %[[C:.*]] = kiln.constant dense<[1.64872{{[0-9]*}}, 0.367879{{[0-9]*}}, 7.38905{{[0-9]*}}]> : tensor<3xf32>
// CHECK-NEXT: return %[[C]] : tensor<3xf32>
func.func @exp() -> tensor<3xf32> {
  %x = kiln.constant dense<[0.5, -1.0, 2.0]> : tensor<3xf32>
  %y = kiln.exp %x : tensor<3xf32>
  return %y : tensor<3xf32>
}

// CHECK-LABEL: func.func @log(
// CHECK: %[[C:.*]] = kiln.constant dense<[-0.693147{{[0-9]*}}, 0.000000e+00, 2.30258{{[0-9]*}}]> : tensor<3xf32>
// CHECK-NEXT: return %[[C]] : tensor<3xf32>
func.func @log() -> tensor<3xf32> {
  %x = kiln.constant dense<[0.5, 1.0, 10.0]> : tensor<3xf32>
  %y = kiln.log %x : tensor<3xf32>
  return %y : tensor<3xf32>
}

// CHECK-LABEL: func.func @sqrt(
// CHECK: %[[C:.*]] = kiln.constant dense<[5.000000e-01, 1.41421{{[0-9]*}}, 3.000000e+00]> : tensor<3xf32>
// CHECK-NEXT: return %[[C]] : tensor<3xf32>
func.func @sqrt() -> tensor<3xf32> {
  %x = kiln.constant dense<[0.25, 2.0, 9.0]> : tensor<3xf32>
  %y = kiln.sqrt %x : tensor<3xf32>
  return %y : tensor<3xf32>
}

// CHECK-LABEL: func.func @rsqrt(
// CHECK: %[[C:.*]] = kiln.constant dense<[2.000000e+00, 0.707106{{[0-9]*}}, 5.000000e-01]> : tensor<3xf32>
// CHECK-NEXT: return %[[C]] : tensor<3xf32>
func.func @rsqrt() -> tensor<3xf32> {
  %x = kiln.constant dense<[0.25, 2.0, 4.0]> : tensor<3xf32>
  %y = kiln.rsqrt %x : tensor<3xf32>
  return %y : tensor<3xf32>
}

// CHECK-LABEL: func.func @reciprocal(
// CHECK: %[[C:.*]] = kiln.constant dense<[2.000000e+00, 0.333333{{[0-9]*}}, -2.500000e-01]> : tensor<3xf32>
// CHECK-NEXT: return %[[C]] : tensor<3xf32>
func.func @reciprocal() -> tensor<3xf32> {
  %x = kiln.constant dense<[0.5, 3.0, -4.0]> : tensor<3xf32>
  %y = kiln.reciprocal %x : tensor<3xf32>
  return %y : tensor<3xf32>
}

// CHECK-LABEL: func.func @tanh(
// CHECK: %[[C:.*]] = kiln.constant dense<[0.462117{{[0-9]*}}, -0.761594{{[0-9]*}}, 0.964027{{[0-9]*}}]> : tensor<3xf32>
// CHECK-NEXT: return %[[C]] : tensor<3xf32>
func.func @tanh() -> tensor<3xf32> {
  %x = kiln.constant dense<[0.5, -1.0, 2.0]> : tensor<3xf32>
  %y = kiln.tanh %x : tensor<3xf32>
  return %y : tensor<3xf32>
}

// CHECK-LABEL: func.func @sigmoid(
// CHECK: %[[C:.*]] = kiln.constant dense<[5.000000e-01, 0.731058{{[0-9]*}}, 0.119202{{[0-9]*}}]> : tensor<3xf32>
// CHECK-NEXT: return %[[C]] : tensor<3xf32>
func.func @sigmoid() -> tensor<3xf32> {
  %x = kiln.constant dense<[0.0, 1.0, -2.0]> : tensor<3xf32>
  %y = kiln.sigmoid %x : tensor<3xf32>
  return %y : tensor<3xf32>
}

// CHECK-LABEL: func.func @softplus(
// CHECK: %[[C:.*]] = kiln.constant dense<[0.693147{{[0-9]*}}, 1.31326{{[0-9]*}}, 0.126928{{[0-9]*}}, 1.000000e+03]> : tensor<4xf32>
// CHECK-NEXT: return %[[C]] : tensor<4xf32>
func.func @softplus() -> tensor<4xf32> {
  %x = kiln.constant dense<[0.0, 1.0, -2.0, 1000.0]> : tensor<4xf32>
  %y = kiln.softplus %x : tensor<4xf32>
  return %y : tensor<4xf32>
}

// CHECK-LABEL: func.func @softsign(
// CHECK: %[[C:.*]] = kiln.constant dense<[0.000000e+00, 5.000000e-01, -7.500000e-01]> : tensor<3xf32>
// CHECK-NEXT: return %[[C]] : tensor<3xf32>
func.func @softsign() -> tensor<3xf32> {
  %x = kiln.constant dense<[0.0, 1.0, -3.0]> : tensor<3xf32>
  %y = kiln.softsign %x : tensor<3xf32>
  return %y : tensor<3xf32>
}

// CHECK-LABEL: func.func @erf(
// CHECK: %[[C:.*]] = kiln.constant dense<[0.520499{{[0-9]*}}, -0.842700{{[0-9]*}}, 0.995322{{[0-9]*}}]> : tensor<3xf32>
// CHECK-NEXT: return %[[C]] : tensor<3xf32>
func.func @erf() -> tensor<3xf32> {
  %x = kiln.constant dense<[0.5, -1.0, 2.0]> : tensor<3xf32>
  %y = kiln.erf %x : tensor<3xf32>
  return %y : tensor<3xf32>
}

// CHECK-LABEL: func.func @sin(
// CHECK: %[[C:.*]] = kiln.constant dense<[0.479425{{[0-9]*}}, -0.841470{{[0-9]*}}, 0.909297{{[0-9]*}}]> : tensor<3xf32>
// CHECK-NEXT: return %[[C]] : tensor<3xf32>
func.func @sin() -> tensor<3xf32> {
  %x = kiln.constant dense<[0.5, -1.0, 2.0]> : tensor<3xf32>
  %y = kiln.sin %x : tensor<3xf32>
  return %y : tensor<3xf32>
}

// CHECK-LABEL: func.func @cos(
// CHECK: %[[C:.*]] = kiln.constant dense<[0.877582{{[0-9]*}}, 0.540302{{[0-9]*}}, -0.416146{{[0-9]*}}]> : tensor<3xf32>
// CHECK-NEXT: return %[[C]] : tensor<3xf32>
func.func @cos() -> tensor<3xf32> {
  %x = kiln.constant dense<[0.5, -1.0, 2.0]> : tensor<3xf32>
  %y = kiln.cos %x : tensor<3xf32>
  return %y : tensor<3xf32>
}

// CHECK-LABEL: func.func @tan(
// CHECK: %[[C:.*]] = kiln.constant dense<[0.546302{{[0-9]*}}, -1.55740{{[0-9]*}}, -2.18503{{[0-9]*}}]> : tensor<3xf32>
// CHECK-NEXT: return %[[C]] : tensor<3xf32>
func.func @tan() -> tensor<3xf32> {
  %x = kiln.constant dense<[0.5, -1.0, 2.0]> : tensor<3xf32>
  %y = kiln.tan %x : tensor<3xf32>
  return %y : tensor<3xf32>
}

// CHECK-LABEL: func.func @asin(
// CHECK: %[[C:.*]] = kiln.constant dense<[0.523598{{[0-9]*}}, -0.252680{{[0-9]*}}, 1.57079{{[0-9]*}}]> : tensor<3xf32>
// CHECK-NEXT: return %[[C]] : tensor<3xf32>
func.func @asin() -> tensor<3xf32> {
  %x = kiln.constant dense<[0.5, -0.25, 1.0]> : tensor<3xf32>
  %y = kiln.asin %x : tensor<3xf32>
  return %y : tensor<3xf32>
}

// CHECK-LABEL: func.func @acos(
// CHECK: %[[C:.*]] = kiln.constant dense<[1.04719{{[0-9]*}}, 1.82347{{[0-9]*}}, 0.000000e+00]> : tensor<3xf32>
// CHECK-NEXT: return %[[C]] : tensor<3xf32>
func.func @acos() -> tensor<3xf32> {
  %x = kiln.constant dense<[0.5, -0.25, 1.0]> : tensor<3xf32>
  %y = kiln.acos %x : tensor<3xf32>
  return %y : tensor<3xf32>
}

// CHECK-LABEL: func.func @atan(
// CHECK: %[[C:.*]] = kiln.constant dense<[0.463647{{[0-9]*}}, -0.785398{{[0-9]*}}, 1.10714{{[0-9]*}}]> : tensor<3xf32>
// CHECK-NEXT: return %[[C]] : tensor<3xf32>
func.func @atan() -> tensor<3xf32> {
  %x = kiln.constant dense<[0.5, -1.0, 2.0]> : tensor<3xf32>
  %y = kiln.atan %x : tensor<3xf32>
  return %y : tensor<3xf32>
}

// CHECK-LABEL: func.func @sinh(
// CHECK: %[[C:.*]] = kiln.constant dense<[0.521095{{[0-9]*}}, -1.17520{{[0-9]*}}, 3.62686{{[0-9]*}}]> : tensor<3xf32>
// CHECK-NEXT: return %[[C]] : tensor<3xf32>
func.func @sinh() -> tensor<3xf32> {
  %x = kiln.constant dense<[0.5, -1.0, 2.0]> : tensor<3xf32>
  %y = kiln.sinh %x : tensor<3xf32>
  return %y : tensor<3xf32>
}

// CHECK-LABEL: func.func @cosh(
// CHECK: %[[C:.*]] = kiln.constant dense<[1.12762{{[0-9]*}}, 1.54308{{[0-9]*}}, 3.76219{{[0-9]*}}]> : tensor<3xf32>
// CHECK-NEXT: return %[[C]] : tensor<3xf32>
func.func @cosh() -> tensor<3xf32> {
  %x = kiln.constant dense<[0.5, -1.0, 2.0]> : tensor<3xf32>
  %y = kiln.cosh %x : tensor<3xf32>
  return %y : tensor<3xf32>
}

// CHECK-LABEL: func.func @asinh(
// CHECK: %[[C:.*]] = kiln.constant dense<[0.481211{{[0-9]*}}, -0.881373{{[0-9]*}}, 1.44363{{[0-9]*}}]> : tensor<3xf32>
// CHECK-NEXT: return %[[C]] : tensor<3xf32>
func.func @asinh() -> tensor<3xf32> {
  %x = kiln.constant dense<[0.5, -1.0, 2.0]> : tensor<3xf32>
  %y = kiln.asinh %x : tensor<3xf32>
  return %y : tensor<3xf32>
}

// CHECK-LABEL: func.func @acosh(
// CHECK: %[[C:.*]] = kiln.constant dense<[0.000000e+00, 1.31695{{[0-9]*}}, 2.99322{{[0-9]*}}]> : tensor<3xf32>
// CHECK-NEXT: return %[[C]] : tensor<3xf32>
func.func @acosh() -> tensor<3xf32> {
  %x = kiln.constant dense<[1.0, 2.0, 10.0]> : tensor<3xf32>
  %y = kiln.acosh %x : tensor<3xf32>
  return %y : tensor<3xf32>
}

// CHECK-LABEL: func.func @atanh(
// CHECK: %[[C:.*]] = kiln.constant dense<[0.549306{{[0-9]*}}, -0.255412{{[0-9]*}}, 0.000000e+00]> : tensor<3xf32>
// CHECK-NEXT: return %[[C]] : tensor<3xf32>
func.func @atanh() -> tensor<3xf32> {
  %x = kiln.constant dense<[0.5, -0.25, 0.0]> : tensor<3xf32>
  %y = kiln.atanh %x : tensor<3xf32>
  return %y : tensor<3xf32>
}

// CHECK-LABEL: func.func @floor(
// CHECK: %[[C:.*]] = kiln.constant dense<[1.000000e+00, -2.000000e+00, 2.000000e+00]> : tensor<3xf32>
// CHECK-NEXT: return %[[C]] : tensor<3xf32>
func.func @floor() -> tensor<3xf32> {
  %x = kiln.constant dense<[1.5, -1.5, 2.0]> : tensor<3xf32>
  %y = kiln.floor %x : tensor<3xf32>
  return %y : tensor<3xf32>
}

// CHECK-LABEL: func.func @ceil(
// CHECK: %[[C:.*]] = kiln.constant dense<[2.000000e+00, -1.000000e+00, 2.000000e+00]> : tensor<3xf32>
// CHECK-NEXT: return %[[C]] : tensor<3xf32>
func.func @ceil() -> tensor<3xf32> {
  %x = kiln.constant dense<[1.5, -1.5, 2.0]> : tensor<3xf32>
  %y = kiln.ceil %x : tensor<3xf32>
  return %y : tensor<3xf32>
}

// CHECK-LABEL: func.func @round(
// CHECK: %[[C:.*]] = kiln.constant dense<[0.000000e+00, 2.000000e+00, 2.000000e+00, -0.000000e+00, -2.000000e+00]> : tensor<5xf32>
// CHECK-NEXT: return %[[C]] : tensor<5xf32>
func.func @round() -> tensor<5xf32> {
  %x = kiln.constant dense<[0.5, 1.5, 2.5, -0.5, -1.7]> : tensor<5xf32>
  %y = kiln.round %x : tensor<5xf32>
  return %y : tensor<5xf32>
}

// CHECK-LABEL: func.func @hard_swish(
// CHECK: %[[C:.*]] = kiln.constant dense<[-0.000000e+00, -0.333333{{[0-9]*}}, 0.666666{{[0-9]*}}, 4.000000e+00]> : tensor<4xf32>
// CHECK-NEXT: return %[[C]] : tensor<4xf32>
func.func @hard_swish() -> tensor<4xf32> {
  %x = kiln.constant dense<[-4.0, -1.0, 1.0, 4.0]> : tensor<4xf32>
  %y = kiln.hard_swish %x : tensor<4xf32>
  return %y : tensor<4xf32>
}

// CHECK-LABEL: func.func @gelu(
// CHECK: %[[C:.*]] = kiln.constant dense<[0.345731{{[0-9]*}}, -0.158655{{[0-9]*}}, 1.95449{{[0-9]*}}]> : tensor<3xf32>
// CHECK-NEXT: return %[[C]] : tensor<3xf32>
func.func @gelu() -> tensor<3xf32> {
  %x = kiln.constant dense<[0.5, -1.0, 2.0]> : tensor<3xf32>
  %y = kiln.gelu %x : tensor<3xf32>
  return %y : tensor<3xf32>
}

// CHECK-LABEL: func.func @gelu_tanh(
// CHECK: %[[C:.*]] = kiln.constant dense<[3.457140e-01, -0.158808{{[0-9]*}}, 1.95459{{[0-9]*}}]> : tensor<3xf32>
// CHECK-NEXT: return %[[C]] : tensor<3xf32>
func.func @gelu_tanh() -> tensor<3xf32> {
  %x = kiln.constant dense<[0.5, -1.0, 2.0]> : tensor<3xf32>
  %y = kiln.gelu %x {approximate = #kiln.gelu_approximation<tanh>} : tensor<3xf32>
  return %y : tensor<3xf32>
}

// CHECK-LABEL: func.func @leaky_relu(
// CHECK: %[[C:.*]] = kiln.constant dense<[-2.000000e-01, 3.000000e+00]> : tensor<2xf32>
// CHECK-NEXT: return %[[C]] : tensor<2xf32>
func.func @leaky_relu() -> tensor<2xf32> {
  %x = kiln.constant dense<[-2.0, 3.0]> : tensor<2xf32>
  %y = kiln.leaky_relu %x {alpha = 1.000000e-01 : f64} : tensor<2xf32>
  return %y : tensor<2xf32>
}

// CHECK-LABEL: func.func @leaky_relu_default(
// CHECK: %[[C:.*]] = kiln.constant dense<[-2.000000e-02, 3.000000e+00]> : tensor<2xf32>
// CHECK-NEXT: return %[[C]] : tensor<2xf32>
func.func @leaky_relu_default() -> tensor<2xf32> {
  %x = kiln.constant dense<[-2.0, 3.0]> : tensor<2xf32>
  %y = kiln.leaky_relu %x : tensor<2xf32>
  return %y : tensor<2xf32>
}

// CHECK-LABEL: func.func @elu(
// CHECK: %[[C:.*]] = kiln.constant dense<[-0.316060{{[0-9]*}}, 2.000000e+00]> : tensor<2xf32>
// CHECK-NEXT: return %[[C]] : tensor<2xf32>
func.func @elu() -> tensor<2xf32> {
  %x = kiln.constant dense<[-1.0, 2.0]> : tensor<2xf32>
  %y = kiln.elu %x {alpha = 5.000000e-01 : f64} : tensor<2xf32>
  return %y : tensor<2xf32>
}

// CHECK-LABEL: func.func @celu(
// CHECK: %[[C:.*]] = kiln.constant dense<[-0.786938{{[0-9]*}}, 2.000000e+00]> : tensor<2xf32>
// CHECK-NEXT: return %[[C]] : tensor<2xf32>
func.func @celu() -> tensor<2xf32> {
  %x = kiln.constant dense<[-1.0, 2.0]> : tensor<2xf32>
  %y = kiln.celu %x {alpha = 2.000000e+00 : f64} : tensor<2xf32>
  return %y : tensor<2xf32>
}

// CHECK-LABEL: func.func @selu(
// CHECK: %[[C:.*]] = kiln.constant dense<[-1.11133{{[0-9]*}}, 2.10140{{[0-9]*}}]> : tensor<2xf32>
// CHECK-NEXT: return %[[C]] : tensor<2xf32>
func.func @selu() -> tensor<2xf32> {
  %x = kiln.constant dense<[-1.0, 2.0]> : tensor<2xf32>
  %y = kiln.selu %x : tensor<2xf32>
  return %y : tensor<2xf32>
}

// CHECK-LABEL: func.func @hard_sigmoid(
// CHECK: %[[C:.*]] = kiln.constant dense<[0.000000e+00, 5.000000e-01, 0.699999{{[0-9]*}}, 1.000000e+00]> : tensor<4xf32>
// CHECK-NEXT: return %[[C]] : tensor<4xf32>
func.func @hard_sigmoid() -> tensor<4xf32> {
  %x = kiln.constant dense<[-3.0, 0.0, 1.0, 4.0]> : tensor<4xf32>
  %y = kiln.hard_sigmoid %x : tensor<4xf32>
  return %y : tensor<4xf32>
}

// CHECK-LABEL: func.func @thresholded_relu(
// CHECK: %[[C:.*]] = kiln.constant dense<[0.000000e+00, 2.000000e+00, 0.000000e+00]> : tensor<3xf32>
// CHECK-NEXT: return %[[C]] : tensor<3xf32>
func.func @thresholded_relu() -> tensor<3xf32> {
  %x = kiln.constant dense<[1.0, 2.0, 1.5]> : tensor<3xf32>
  %y = kiln.thresholded_relu %x {alpha = 1.500000e+00 : f64} : tensor<3xf32>
  return %y : tensor<3xf32>
}

// CHECK-LABEL: func.func @exp_f64(
// CHECK: %[[C:.*]] = kiln.constant dense<[1.64872{{[0-9]*}}, 0.367879{{[0-9]*}}]> : tensor<2xf64>
// CHECK-NEXT: return %[[C]] : tensor<2xf64>
func.func @exp_f64() -> tensor<2xf64> {
  %x = kiln.constant dense<[0.5, -1.0]> : tensor<2xf64>
  %y = kiln.exp %x : tensor<2xf64>
  return %y : tensor<2xf64>
}

// CHECK-LABEL: func.func @neg(
// CHECK: %[[C:.*]] = kiln.constant dense<[-1, 2, 0]> : tensor<3xi32>
// CHECK-NEXT: return %[[C]] : tensor<3xi32>
func.func @neg() -> tensor<3xi32> {
  %x = kiln.constant dense<[1, -2, 0]> : tensor<3xi32>
  %y = kiln.neg %x : tensor<3xi32>
  return %y : tensor<3xi32>
}

// CHECK-LABEL: func.func @neg_i8_wraps(
// CHECK: %[[C:.*]] = kiln.constant dense<[-128, -5]> : tensor<2xi8>
// CHECK-NEXT: return %[[C]] : tensor<2xi8>
func.func @neg_i8_wraps() -> tensor<2xi8> {
  %x = kiln.constant dense<[-128, 5]> : tensor<2xi8>
  %y = kiln.neg %x : tensor<2xi8>
  return %y : tensor<2xi8>
}

// CHECK-LABEL: func.func @abs(
// CHECK: %[[C:.*]] = kiln.constant dense<[3, 4]> : tensor<2xi32>
// CHECK-NEXT: return %[[C]] : tensor<2xi32>
func.func @abs() -> tensor<2xi32> {
  %x = kiln.constant dense<[-3, 4]> : tensor<2xi32>
  %y = kiln.abs %x : tensor<2xi32>
  return %y : tensor<2xi32>
}

// CHECK-LABEL: func.func @sign(
// CHECK: %[[C:.*]] = kiln.constant dense<[-1, 0, 1]> : tensor<3xi8>
// CHECK-NEXT: return %[[C]] : tensor<3xi8>
func.func @sign() -> tensor<3xi8> {
  %x = kiln.constant dense<[-5, 0, 7]> : tensor<3xi8>
  %y = kiln.sign %x : tensor<3xi8>
  return %y : tensor<3xi8>
}

// CHECK-LABEL: func.func @relu(
// CHECK: %[[C:.*]] = kiln.constant dense<[0, 0, 4]> : tensor<3xi64>
// CHECK-NEXT: return %[[C]] : tensor<3xi64>
func.func @relu() -> tensor<3xi64> {
  %x = kiln.constant dense<[-3, 0, 4]> : tensor<3xi64>
  %y = kiln.relu %x : tensor<3xi64>
  return %y : tensor<3xi64>
}

// CHECK-LABEL: func.func @neg_f32(
// CHECK: %[[C:.*]] = kiln.constant dense<[-1.500000e+00, 2.000000e+00]> : tensor<2xf32>
// CHECK-NEXT: return %[[C]] : tensor<2xf32>
func.func @neg_f32() -> tensor<2xf32> {
  %x = kiln.constant dense<[1.5, -2.0]> : tensor<2xf32>
  %y = kiln.neg %x : tensor<2xf32>
  return %y : tensor<2xf32>
}

// CHECK-LABEL: func.func @abs_f32(
// CHECK: %[[C:.*]] = kiln.constant dense<[1.500000e+00, 2.000000e+00]> : tensor<2xf32>
// CHECK-NEXT: return %[[C]] : tensor<2xf32>
func.func @abs_f32() -> tensor<2xf32> {
  %x = kiln.constant dense<[-1.5, 2.0]> : tensor<2xf32>
  %y = kiln.abs %x : tensor<2xf32>
  return %y : tensor<2xf32>
}

// CHECK-LABEL: func.func @sign_f32(
// CHECK: %[[C:.*]] = kiln.constant dense<[-1.000000e+00, 0.000000e+00, 1.000000e+00]> : tensor<3xf32>
// CHECK-NEXT: return %[[C]] : tensor<3xf32>
func.func @sign_f32() -> tensor<3xf32> {
  %x = kiln.constant dense<[-0.5, 0.0, 3.0]> : tensor<3xf32>
  %y = kiln.sign %x : tensor<3xf32>
  return %y : tensor<3xf32>
}

// CHECK-LABEL: func.func @relu_f32(
// CHECK: %[[C:.*]] = kiln.constant dense<[0.000000e+00, 0.000000e+00, 3.000000e+00]> : tensor<3xf32>
// CHECK-NEXT: return %[[C]] : tensor<3xf32>
func.func @relu_f32() -> tensor<3xf32> {
  %x = kiln.constant dense<[-0.5, 0.0, 3.0]> : tensor<3xf32>
  %y = kiln.relu %x : tensor<3xf32>
  return %y : tensor<3xf32>
}

// CHECK-LABEL: func.func @not(
// CHECK: %[[C:.*]] = kiln.constant dense<[false, true]> : tensor<2xi1>
// CHECK-NEXT: return %[[C]]
func.func @not() -> tensor<2xi1> {
  %x = kiln.constant dense<[true, false]> : tensor<2xi1>
  %y = kiln.not %x : tensor<2xi1>
  return %y : tensor<2xi1>
}

//===----------------------------------------------------------------------===//
// Binary elementwise.
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @add_i32(
// CHECK: %[[C:.*]] = kiln.constant dense<[9, -5, 5, -9]> : tensor<4xi32>
// CHECK-NEXT: return %[[C]] : tensor<4xi32>
func.func @add_i32() -> tensor<4xi32> {
  %a = kiln.constant dense<[7, -7, 7, -7]> : tensor<4xi32>
  %b = kiln.constant dense<[2, 2, -2, -2]> : tensor<4xi32>
  %y = kiln.add %a, %b : tensor<4xi32>
  return %y : tensor<4xi32>
}

// CHECK-LABEL: func.func @sub_i32(
// CHECK: %[[C:.*]] = kiln.constant dense<[5, -9, 9, -5]> : tensor<4xi32>
// CHECK-NEXT: return %[[C]] : tensor<4xi32>
func.func @sub_i32() -> tensor<4xi32> {
  %a = kiln.constant dense<[7, -7, 7, -7]> : tensor<4xi32>
  %b = kiln.constant dense<[2, 2, -2, -2]> : tensor<4xi32>
  %y = kiln.sub %a, %b : tensor<4xi32>
  return %y : tensor<4xi32>
}

// CHECK-LABEL: func.func @mul_i32(
// CHECK: %[[C:.*]] = kiln.constant dense<[14, -14, -14, 14]> : tensor<4xi32>
// CHECK-NEXT: return %[[C]] : tensor<4xi32>
func.func @mul_i32() -> tensor<4xi32> {
  %a = kiln.constant dense<[7, -7, 7, -7]> : tensor<4xi32>
  %b = kiln.constant dense<[2, 2, -2, -2]> : tensor<4xi32>
  %y = kiln.mul %a, %b : tensor<4xi32>
  return %y : tensor<4xi32>
}

// CHECK-LABEL: func.func @div_i32_truncates(
// CHECK: %[[C:.*]] = kiln.constant dense<[3, -3, -3, 3]> : tensor<4xi32>
// CHECK-NEXT: return %[[C]] : tensor<4xi32>
func.func @div_i32_truncates() -> tensor<4xi32> {
  %a = kiln.constant dense<[7, -7, 7, -7]> : tensor<4xi32>
  %b = kiln.constant dense<[2, 2, -2, -2]> : tensor<4xi32>
  %y = kiln.div %a, %b : tensor<4xi32>
  return %y : tensor<4xi32>
}

// Unsigned constants fold as unsigned values (NumPy's uint8 results).
// CHECK-LABEL: func.func @div_ui8_unsigned(
// CHECK: %[[C:.*]] = kiln.constant dense<[66, 15]> : tensor<2xui8>
// CHECK-NEXT: return %[[C]] : tensor<2xui8>
func.func @div_ui8_unsigned() -> tensor<2xui8> {
  %a = kiln.constant dense<[200, 255]> : tensor<2xui8>
  %b = kiln.constant dense<[3, 16]> : tensor<2xui8>
  %y = kiln.div %a, %b : tensor<2xui8>
  return %y : tensor<2xui8>
}

// CHECK-LABEL: func.func @compare_ui8_unsigned(
// CHECK: %[[C:.*]] = kiln.constant dense<[false, true]> : tensor<2xi1>
// CHECK-NEXT: return %[[C]] : tensor<2xi1>
func.func @compare_ui8_unsigned() -> tensor<2xi1> {
  %a = kiln.constant dense<[200, 100]> : tensor<2xui8>
  %b = kiln.constant dense<[100, 200]> : tensor<2xui8>
  %y = kiln.compare <lt>, %a, %b : tensor<2xui8>
  return %y : tensor<2xi1>
}

// CHECK-LABEL: func.func @cast_ui8_to_f32(
// CHECK: %[[C:.*]] = kiln.constant dense<[2.000000e+02, 2.550000e+02]> : tensor<2xf32>
// CHECK-NEXT: return %[[C]] : tensor<2xf32>
func.func @cast_ui8_to_f32() -> tensor<2xf32> {
  %a = kiln.constant dense<[200, 255]> : tensor<2xui8>
  %y = kiln.cast %a : tensor<2xui8> to tensor<2xf32>
  return %y : tensor<2xf32>
}

// uint64 values above 2^63 do not fit the folder's int64_t: left alone.
// CHECK-LABEL: func.func @div_ui64_not_folded(
// CHECK: kiln.div
func.func @div_ui64_not_folded() -> tensor<1xui64> {
  %a = kiln.constant dense<[18446744073709551615]> : tensor<1xui64>
  %b = kiln.constant dense<[2]> : tensor<1xui64>
  %y = kiln.div %a, %b : tensor<1xui64>
  return %y : tensor<1xui64>
}

// Shifts out of range give 0, or -1 for a negative signed value shifted
// right (ONNX BitShift); bitwise not flips every bit of an integer.
// CHECK-LABEL: func.func @shifts_and_not(
// CHECK-DAG: kiln.constant dense<[0, 16]> : tensor<2xui8>
// CHECK-DAG: kiln.constant dense<[-1, -32]> : tensor<2xi8>
// CHECK-DAG: kiln.constant dense<[-6, 5]> : tensor<2xi16>
func.func @shifts_and_not() -> (tensor<2xui8>, tensor<2xi8>, tensor<2xi16>) {
  %a = kiln.constant dense<[1, 1]> : tensor<2xui8>
  %s = kiln.constant dense<[8, 4]> : tensor<2xui8>
  %l = kiln.shift_left %a, %s : tensor<2xui8>
  %b = kiln.constant dense<[-128, -128]> : tensor<2xi8>
  %t = kiln.constant dense<[9, 2]> : tensor<2xi8>
  %r = kiln.shift_right %b, %t : tensor<2xi8>
  %c = kiln.constant dense<[5, -6]> : tensor<2xi16>
  %n = kiln.not %c : tensor<2xi16>
  return %l, %r, %n : tensor<2xui8>, tensor<2xi8>, tensor<2xi16>
}

// CHECK-LABEL: func.func @rem_i32_sign_of_divisor(
// CHECK: %[[C:.*]] = kiln.constant dense<[1, 1, -1, -1]> : tensor<4xi32>
// CHECK-NEXT: return %[[C]] : tensor<4xi32>
func.func @rem_i32_sign_of_divisor() -> tensor<4xi32> {
  %a = kiln.constant dense<[7, -7, 7, -7]> : tensor<4xi32>
  %b = kiln.constant dense<[2, 2, -2, -2]> : tensor<4xi32>
  %y = kiln.rem %a, %b : tensor<4xi32>
  return %y : tensor<4xi32>
}

// CHECK-LABEL: func.func @rem_i32_fmod(
// CHECK: %[[C:.*]] = kiln.constant dense<[1, -1, 1, -1]> : tensor<4xi32>
// CHECK-NEXT: return %[[C]] : tensor<4xi32>
func.func @rem_i32_fmod() -> tensor<4xi32> {
  %a = kiln.constant dense<[7, -7, 7, -7]> : tensor<4xi32>
  %b = kiln.constant dense<[2, 2, -2, -2]> : tensor<4xi32>
  %y = kiln.rem %a, %b {fmod} : tensor<4xi32>
  return %y : tensor<4xi32>
}

// CHECK-LABEL: func.func @max_i32(
// CHECK: %[[C:.*]] = kiln.constant dense<[7, 2, 7, -2]> : tensor<4xi32>
// CHECK-NEXT: return %[[C]] : tensor<4xi32>
func.func @max_i32() -> tensor<4xi32> {
  %a = kiln.constant dense<[7, -7, 7, -7]> : tensor<4xi32>
  %b = kiln.constant dense<[2, 2, -2, -2]> : tensor<4xi32>
  %y = kiln.max %a, %b : tensor<4xi32>
  return %y : tensor<4xi32>
}

// CHECK-LABEL: func.func @min_i32(
// CHECK: %[[C:.*]] = kiln.constant dense<[2, -7, -2, -7]> : tensor<4xi32>
// CHECK-NEXT: return %[[C]] : tensor<4xi32>
func.func @min_i32() -> tensor<4xi32> {
  %a = kiln.constant dense<[7, -7, 7, -7]> : tensor<4xi32>
  %b = kiln.constant dense<[2, 2, -2, -2]> : tensor<4xi32>
  %y = kiln.min %a, %b : tensor<4xi32>
  return %y : tensor<4xi32>
}

// CHECK-LABEL: func.func @pow_i32(
// CHECK: %[[C:.*]] = kiln.constant dense<[1024, 1, -8, 5]> : tensor<4xi32>
// CHECK-NEXT: return %[[C]] : tensor<4xi32>
func.func @pow_i32() -> tensor<4xi32> {
  %a = kiln.constant dense<[2, 3, -2, 5]> : tensor<4xi32>
  %b = kiln.constant dense<[10, 0, 3, 1]> : tensor<4xi32>
  %y = kiln.pow %a, %b : tensor<4xi32>
  return %y : tensor<4xi32>
}

// CHECK-LABEL: func.func @add_i8_wraps(
// CHECK: %[[C:.*]] = kiln.constant dense<[-56, 56]> : tensor<2xi8>
// CHECK-NEXT: return %[[C]] : tensor<2xi8>
func.func @add_i8_wraps() -> tensor<2xi8> {
  %a = kiln.constant dense<[100, -100]> : tensor<2xi8>
  %b = kiln.constant dense<[100, -100]> : tensor<2xi8>
  %y = kiln.add %a, %b : tensor<2xi8>
  return %y : tensor<2xi8>
}

// CHECK-LABEL: func.func @mul_i8_wraps(
// CHECK: %[[C:.*]] = kiln.constant dense<[0, 15]> : tensor<2xi8>
// CHECK-NEXT: return %[[C]] : tensor<2xi8>
func.func @mul_i8_wraps() -> tensor<2xi8> {
  %a = kiln.constant dense<[16, 3]> : tensor<2xi8>
  %b = kiln.constant dense<[16, 5]> : tensor<2xi8>
  %y = kiln.mul %a, %b : tensor<2xi8>
  return %y : tensor<2xi8>
}

// CHECK-LABEL: func.func @pow_i64_large_exponent(
// CHECK: %[[C:.*]] = kiln.constant dense<[4618737074498961409, 0]> : tensor<2xi64>
// CHECK-NEXT: return %[[C]] : tensor<2xi64>
func.func @pow_i64_large_exponent() -> tensor<2xi64> {
  %a = kiln.constant dense<[5, 2]> : tensor<2xi64>
  %b = kiln.constant dense<[1000000000000000000, 64]> : tensor<2xi64>
  %y = kiln.pow %a, %b : tensor<2xi64>
  return %y : tensor<2xi64>
}

// CHECK-LABEL: func.func @add_f32(
// CHECK: %[[C:.*]] = kiln.constant dense<[2.000000e+00, 2.000000e+00, 9.000000e+00, -5.000000e+00]> : tensor<4xf32>
// CHECK-NEXT: return %[[C]] : tensor<4xf32>
func.func @add_f32() -> tensor<4xf32> {
  %a = kiln.constant dense<[1.5, -2.0, 7.0, -7.0]> : tensor<4xf32>
  %b = kiln.constant dense<[0.5, 4.0, 2.0, 2.0]> : tensor<4xf32>
  %y = kiln.add %a, %b : tensor<4xf32>
  return %y : tensor<4xf32>
}

// CHECK-LABEL: func.func @sub_f32(
// CHECK: %[[C:.*]] = kiln.constant dense<[1.000000e+00, -6.000000e+00, 5.000000e+00, -9.000000e+00]> : tensor<4xf32>
// CHECK-NEXT: return %[[C]] : tensor<4xf32>
func.func @sub_f32() -> tensor<4xf32> {
  %a = kiln.constant dense<[1.5, -2.0, 7.0, -7.0]> : tensor<4xf32>
  %b = kiln.constant dense<[0.5, 4.0, 2.0, 2.0]> : tensor<4xf32>
  %y = kiln.sub %a, %b : tensor<4xf32>
  return %y : tensor<4xf32>
}

// CHECK-LABEL: func.func @mul_f32(
// CHECK: %[[C:.*]] = kiln.constant dense<[7.500000e-01, -8.000000e+00, 1.400000e+01, -1.400000e+01]> : tensor<4xf32>
// CHECK-NEXT: return %[[C]] : tensor<4xf32>
func.func @mul_f32() -> tensor<4xf32> {
  %a = kiln.constant dense<[1.5, -2.0, 7.0, -7.0]> : tensor<4xf32>
  %b = kiln.constant dense<[0.5, 4.0, 2.0, 2.0]> : tensor<4xf32>
  %y = kiln.mul %a, %b : tensor<4xf32>
  return %y : tensor<4xf32>
}

// CHECK-LABEL: func.func @div_f32(
// CHECK: %[[C:.*]] = kiln.constant dense<[3.000000e+00, -5.000000e-01, 3.500000e+00, -3.500000e+00]> : tensor<4xf32>
// CHECK-NEXT: return %[[C]] : tensor<4xf32>
func.func @div_f32() -> tensor<4xf32> {
  %a = kiln.constant dense<[1.5, -2.0, 7.0, -7.0]> : tensor<4xf32>
  %b = kiln.constant dense<[0.5, 4.0, 2.0, 2.0]> : tensor<4xf32>
  %y = kiln.div %a, %b : tensor<4xf32>
  return %y : tensor<4xf32>
}

// CHECK-LABEL: func.func @pow_f32(
// CHECK: %[[C:.*]] = kiln.constant dense<[1.22474{{[0-9]*}}, 1.600000e+01, 4.900000e+01, 4.900000e+01]> : tensor<4xf32>
// CHECK-NEXT: return %[[C]] : tensor<4xf32>
func.func @pow_f32() -> tensor<4xf32> {
  %a = kiln.constant dense<[1.5, -2.0, 7.0, -7.0]> : tensor<4xf32>
  %b = kiln.constant dense<[0.5, 4.0, 2.0, 2.0]> : tensor<4xf32>
  %y = kiln.pow %a, %b : tensor<4xf32>
  return %y : tensor<4xf32>
}

// CHECK-LABEL: func.func @rem_f32_sign_of_divisor(
// CHECK: %[[C:.*]] = kiln.constant dense<[1.500000e+00, 5.000000e-01, -5.000000e-01, -1.500000e+00]> : tensor<4xf32>
// CHECK-NEXT: return %[[C]] : tensor<4xf32>
func.func @rem_f32_sign_of_divisor() -> tensor<4xf32> {
  %a = kiln.constant dense<[5.5, -5.5, 5.5, -5.5]> : tensor<4xf32>
  %b = kiln.constant dense<[2.0, 2.0, -2.0, -2.0]> : tensor<4xf32>
  %y = kiln.rem %a, %b : tensor<4xf32>
  return %y : tensor<4xf32>
}

// CHECK-LABEL: func.func @rem_f32_fmod(
// CHECK: %[[C:.*]] = kiln.constant dense<[1.500000e+00, -1.500000e+00, 1.500000e+00, -1.500000e+00]> : tensor<4xf32>
// CHECK-NEXT: return %[[C]] : tensor<4xf32>
func.func @rem_f32_fmod() -> tensor<4xf32> {
  %a = kiln.constant dense<[5.5, -5.5, 5.5, -5.5]> : tensor<4xf32>
  %b = kiln.constant dense<[2.0, 2.0, -2.0, -2.0]> : tensor<4xf32>
  %y = kiln.rem %a, %b {fmod} : tensor<4xf32>
  return %y : tensor<4xf32>
}

// CHECK-LABEL: func.func @max_f32_propagates_nan(
// CHECK: %[[C:.*]] = kiln.constant dense<[2.000000e+00, 0x{{7FC00000|FFC00000}}, 0x{{7FC00000|FFC00000}}]> : tensor<3xf32>
// CHECK-NEXT: return %[[C]] : tensor<3xf32>
func.func @max_f32_propagates_nan() -> tensor<3xf32> {
  %a = kiln.constant dense<[1.0, 0x7FC00000, 3.0]> : tensor<3xf32>
  %b = kiln.constant dense<[2.0, 1.0, 0x7FC00000]> : tensor<3xf32>
  %y = kiln.max %a, %b : tensor<3xf32>
  return %y : tensor<3xf32>
}

// CHECK-LABEL: func.func @min_f32_propagates_nan(
// CHECK: %[[C:.*]] = kiln.constant dense<[1.000000e+00, 0x{{7FC00000|FFC00000}}, 0x{{7FC00000|FFC00000}}]> : tensor<3xf32>
// CHECK-NEXT: return %[[C]] : tensor<3xf32>
func.func @min_f32_propagates_nan() -> tensor<3xf32> {
  %a = kiln.constant dense<[1.0, 0x7FC00000, 3.0]> : tensor<3xf32>
  %b = kiln.constant dense<[2.0, 1.0, 0x7FC00000]> : tensor<3xf32>
  %y = kiln.min %a, %b : tensor<3xf32>
  return %y : tensor<3xf32>
}

// CHECK-LABEL: func.func @add_bf16(
// CHECK: %[[C:.*]] = kiln.constant dense<[1.750000e+00, -3.750000e-01]> : tensor<2xbf16>
// CHECK-NEXT: return %[[C]] : tensor<2xbf16>
func.func @add_bf16() -> tensor<2xbf16> {
  %a = kiln.constant dense<[1.5, -0.5]> : tensor<2xbf16>
  %b = kiln.constant dense<[0.25, 0.125]> : tensor<2xbf16>
  %y = kiln.add %a, %b : tensor<2xbf16>
  return %y : tensor<2xbf16>
}

// CHECK-LABEL: func.func @and(
// CHECK: %[[C:.*]] = kiln.constant dense<[true, false, false, false]> : tensor<4xi1>
// CHECK-NEXT: return %[[C]] : tensor<4xi1>
func.func @and() -> tensor<4xi1> {
  %a = kiln.constant dense<[true, true, false, false]> : tensor<4xi1>
  %b = kiln.constant dense<[true, false, true, false]> : tensor<4xi1>
  %y = kiln.and %a, %b : tensor<4xi1>
  return %y : tensor<4xi1>
}

// CHECK-LABEL: func.func @or(
// CHECK: %[[C:.*]] = kiln.constant dense<[true, true, true, false]> : tensor<4xi1>
// CHECK-NEXT: return %[[C]] : tensor<4xi1>
func.func @or() -> tensor<4xi1> {
  %a = kiln.constant dense<[true, true, false, false]> : tensor<4xi1>
  %b = kiln.constant dense<[true, false, true, false]> : tensor<4xi1>
  %y = kiln.or %a, %b : tensor<4xi1>
  return %y : tensor<4xi1>
}

// CHECK-LABEL: func.func @xor(
// CHECK: %[[C:.*]] = kiln.constant dense<[false, true, true, false]> : tensor<4xi1>
// CHECK-NEXT: return %[[C]] : tensor<4xi1>
func.func @xor() -> tensor<4xi1> {
  %a = kiln.constant dense<[true, true, false, false]> : tensor<4xi1>
  %b = kiln.constant dense<[true, false, true, false]> : tensor<4xi1>
  %y = kiln.xor %a, %b : tensor<4xi1>
  return %y : tensor<4xi1>
}

// CHECK-LABEL: func.func @compare_eq_f32(
// CHECK: %[[C:.*]] = kiln.constant dense<[false, true, false, false]> : tensor<4xi1>
// CHECK-NEXT: return %[[C]] : tensor<4xi1>
func.func @compare_eq_f32() -> tensor<4xi1> {
  %a = kiln.constant dense<[1.0, 2.0, 3.0, 0x7FC00000]> : tensor<4xf32>
  %b = kiln.constant dense<[2.0, 2.0, 2.0, 0x7FC00000]> : tensor<4xf32>
  %y = kiln.compare <eq>, %a, %b : tensor<4xf32>
  return %y : tensor<4xi1>
}

// CHECK-LABEL: func.func @compare_ne_f32(
// CHECK: %[[C:.*]] = kiln.constant dense<[true, false, true, true]> : tensor<4xi1>
// CHECK-NEXT: return %[[C]] : tensor<4xi1>
func.func @compare_ne_f32() -> tensor<4xi1> {
  %a = kiln.constant dense<[1.0, 2.0, 3.0, 0x7FC00000]> : tensor<4xf32>
  %b = kiln.constant dense<[2.0, 2.0, 2.0, 0x7FC00000]> : tensor<4xf32>
  %y = kiln.compare <ne>, %a, %b : tensor<4xf32>
  return %y : tensor<4xi1>
}

// CHECK-LABEL: func.func @compare_lt_f32(
// CHECK: %[[C:.*]] = kiln.constant dense<[true, false, false, false]> : tensor<4xi1>
// CHECK-NEXT: return %[[C]] : tensor<4xi1>
func.func @compare_lt_f32() -> tensor<4xi1> {
  %a = kiln.constant dense<[1.0, 2.0, 3.0, 0x7FC00000]> : tensor<4xf32>
  %b = kiln.constant dense<[2.0, 2.0, 2.0, 0x7FC00000]> : tensor<4xf32>
  %y = kiln.compare <lt>, %a, %b : tensor<4xf32>
  return %y : tensor<4xi1>
}

// CHECK-LABEL: func.func @compare_le_f32(
// CHECK: %[[C:.*]] = kiln.constant dense<[true, true, false, false]> : tensor<4xi1>
// CHECK-NEXT: return %[[C]] : tensor<4xi1>
func.func @compare_le_f32() -> tensor<4xi1> {
  %a = kiln.constant dense<[1.0, 2.0, 3.0, 0x7FC00000]> : tensor<4xf32>
  %b = kiln.constant dense<[2.0, 2.0, 2.0, 0x7FC00000]> : tensor<4xf32>
  %y = kiln.compare <le>, %a, %b : tensor<4xf32>
  return %y : tensor<4xi1>
}

// CHECK-LABEL: func.func @compare_gt_f32(
// CHECK: %[[C:.*]] = kiln.constant dense<[false, false, true, false]> : tensor<4xi1>
// CHECK-NEXT: return %[[C]] : tensor<4xi1>
func.func @compare_gt_f32() -> tensor<4xi1> {
  %a = kiln.constant dense<[1.0, 2.0, 3.0, 0x7FC00000]> : tensor<4xf32>
  %b = kiln.constant dense<[2.0, 2.0, 2.0, 0x7FC00000]> : tensor<4xf32>
  %y = kiln.compare <gt>, %a, %b : tensor<4xf32>
  return %y : tensor<4xi1>
}

// CHECK-LABEL: func.func @compare_ge_f32(
// CHECK: %[[C:.*]] = kiln.constant dense<[false, true, true, false]> : tensor<4xi1>
// CHECK-NEXT: return %[[C]] : tensor<4xi1>
func.func @compare_ge_f32() -> tensor<4xi1> {
  %a = kiln.constant dense<[1.0, 2.0, 3.0, 0x7FC00000]> : tensor<4xf32>
  %b = kiln.constant dense<[2.0, 2.0, 2.0, 0x7FC00000]> : tensor<4xf32>
  %y = kiln.compare <ge>, %a, %b : tensor<4xf32>
  return %y : tensor<4xi1>
}

// CHECK-LABEL: func.func @compare_lt_i64(
// CHECK: %[[C:.*]] = kiln.constant dense<[true, false, false]> : tensor<3xi1>
// CHECK-NEXT: return %[[C]] : tensor<3xi1>
func.func @compare_lt_i64() -> tensor<3xi1> {
  %a = kiln.constant dense<[-1, 0, 5]> : tensor<3xi64>
  %b = kiln.constant dense<[0, 0, -5]> : tensor<3xi64>
  %y = kiln.compare <lt>, %a, %b : tensor<3xi64>
  return %y : tensor<3xi1>
}

// CHECK-LABEL: func.func @compare_gt_i1(
// CHECK: %[[C:.*]] = kiln.constant dense<[true, false, false]> : tensor<3xi1>
// CHECK-NEXT: return %[[C]] : tensor<3xi1>
func.func @compare_gt_i1() -> tensor<3xi1> {
  %a = kiln.constant dense<[true, false, true]> : tensor<3xi1>
  %b = kiln.constant dense<[false, false, true]> : tensor<3xi1>
  %y = kiln.compare <gt>, %a, %b : tensor<3xi1>
  return %y : tensor<3xi1>
}

//===----------------------------------------------------------------------===//
// Select and cast.
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @select(
// CHECK: %[[C:.*]] = kiln.constant dense<[1.500000e+00, 5.000000e+00, 3.000000e+00]> : tensor<3xf32>
// CHECK-NEXT: return %[[C]] : tensor<3xf32>
func.func @select() -> tensor<3xf32> {
  %m = kiln.constant dense<[true, false, true]> : tensor<3xi1>
  %a = kiln.constant dense<[1.5, 2.0, 3.0]> : tensor<3xf32>
  %b = kiln.constant dense<[4.0, 5.0, 6.0]> : tensor<3xf32>
  %y = kiln.select %m, %a, %b : tensor<3xi1>, tensor<3xf32>
  return %y : tensor<3xf32>
}

// CHECK-LABEL: func.func @select_i64(
// CHECK: %[[C:.*]] = kiln.constant dense<{{\[\[}}1, 6], [7, 4]]> : tensor<2x2xi64>
// CHECK-NEXT: return %[[C]] : tensor<2x2xi64>
func.func @select_i64() -> tensor<2x2xi64> {
  %m = kiln.constant dense<[[true, false], [false, true]]> : tensor<2x2xi1>
  %a = kiln.constant dense<[[1, 2], [3, 4]]> : tensor<2x2xi64>
  %b = kiln.constant dense<[[5, 6], [7, 8]]> : tensor<2x2xi64>
  %y = kiln.select %m, %a, %b : tensor<2x2xi1>, tensor<2x2xi64>
  return %y : tensor<2x2xi64>
}

// CHECK-LABEL: func.func @cast_f32_to_i32_truncates(
// CHECK: %[[C:.*]] = kiln.constant dense<[-2, 2, 0, 100]> : tensor<4xi32>
// CHECK-NEXT: return %[[C]] : tensor<4xi32>
func.func @cast_f32_to_i32_truncates() -> tensor<4xi32> {
  %x = kiln.constant dense<[-2.7, 2.7, 0.0, 100.5]> : tensor<4xf32>
  %y = kiln.cast %x : tensor<4xf32> to tensor<4xi32>
  return %y : tensor<4xi32>
}

// CHECK-LABEL: func.func @cast_f32_to_i1(
// CHECK: %[[C:.*]] = kiln.constant dense<[false, true, false, true]> : tensor<4xi1>
// CHECK-NEXT: return %[[C]] : tensor<4xi1>
func.func @cast_f32_to_i1() -> tensor<4xi1> {
  %x = kiln.constant dense<[0.0, 0.5, -0.0, -3.0]> : tensor<4xf32>
  %y = kiln.cast %x : tensor<4xf32> to tensor<4xi1>
  return %y : tensor<4xi1>
}

// CHECK-LABEL: func.func @cast_i64_to_f32(
// CHECK: %[[C:.*]] = kiln.constant dense<[3.000000e+00, -1.000000e+00, 0x4B800000]> : tensor<3xf32>
// CHECK-NEXT: return %[[C]] : tensor<3xf32>
func.func @cast_i64_to_f32() -> tensor<3xf32> {
  %x = kiln.constant dense<[3, -1, 16777217]> : tensor<3xi64>
  %y = kiln.cast %x : tensor<3xi64> to tensor<3xf32>
  return %y : tensor<3xf32>
}

// CHECK-LABEL: func.func @cast_i32_to_i8_wraps(
// CHECK: %[[C:.*]] = kiln.constant dense<[44, 127, 5]> : tensor<3xi8>
// CHECK-NEXT: return %[[C]] : tensor<3xi8>
func.func @cast_i32_to_i8_wraps() -> tensor<3xi8> {
  %x = kiln.constant dense<[300, -129, 5]> : tensor<3xi32>
  %y = kiln.cast %x : tensor<3xi32> to tensor<3xi8>
  return %y : tensor<3xi8>
}

// CHECK-LABEL: func.func @cast_i8_to_i64_sign_extends(
// CHECK: %[[C:.*]] = kiln.constant dense<[-1, 127]> : tensor<2xi64>
// CHECK-NEXT: return %[[C]] : tensor<2xi64>
func.func @cast_i8_to_i64_sign_extends() -> tensor<2xi64> {
  %x = kiln.constant dense<[-1, 127]> : tensor<2xi8>
  %y = kiln.cast %x : tensor<2xi8> to tensor<2xi64>
  return %y : tensor<2xi64>
}

// CHECK-LABEL: func.func @cast_i1_to_i32(
// CHECK: %[[C:.*]] = kiln.constant dense<[1, 0]> : tensor<2xi32>
// CHECK-NEXT: return %[[C]] : tensor<2xi32>
func.func @cast_i1_to_i32() -> tensor<2xi32> {
  %x = kiln.constant dense<[true, false]> : tensor<2xi1>
  %y = kiln.cast %x : tensor<2xi1> to tensor<2xi32>
  return %y : tensor<2xi32>
}

// CHECK-LABEL: func.func @cast_i1_to_f32(
// CHECK: %[[C:.*]] = kiln.constant dense<[1.000000e+00, 0.000000e+00]> : tensor<2xf32>
// CHECK-NEXT: return %[[C]] : tensor<2xf32>
func.func @cast_i1_to_f32() -> tensor<2xf32> {
  %x = kiln.constant dense<[true, false]> : tensor<2xi1>
  %y = kiln.cast %x : tensor<2xi1> to tensor<2xf32>
  return %y : tensor<2xf32>
}

// CHECK-LABEL: func.func @cast_i32_to_i1(
// CHECK: %[[C:.*]] = kiln.constant dense<[false, true, true]> : tensor<3xi1>
// CHECK-NEXT: return %[[C]] : tensor<3xi1>
func.func @cast_i32_to_i1() -> tensor<3xi1> {
  %x = kiln.constant dense<[0, 2, -1]> : tensor<3xi32>
  %y = kiln.cast %x : tensor<3xi32> to tensor<3xi1>
  return %y : tensor<3xi1>
}

// CHECK-LABEL: func.func @cast_f32_to_f16(
// CHECK: %[[C:.*]] = kiln.constant dense<[9.997550e-02, 6.550400e+04, 0x7C00]> : tensor<3xf16>
// CHECK-NEXT: return %[[C]] : tensor<3xf16>
func.func @cast_f32_to_f16() -> tensor<3xf16> {
  %x = kiln.constant dense<[0.1, 65504.0, 100000.0]> : tensor<3xf32>
  %y = kiln.cast %x : tensor<3xf32> to tensor<3xf16>
  return %y : tensor<3xf16>
}

// CHECK-LABEL: func.func @cast_f64_to_f32(
// CHECK: %[[C:.*]] = kiln.constant dense<[1.000000e-01, 0x7F800000]> : tensor<2xf32>
// CHECK-NEXT: return %[[C]] : tensor<2xf32>
func.func @cast_f64_to_f32() -> tensor<2xf32> {
  %x = kiln.constant dense<[0.1, 1.0e+40]> : tensor<2xf64>
  %y = kiln.cast %x : tensor<2xf64> to tensor<2xf32>
  return %y : tensor<2xf32>
}

//===----------------------------------------------------------------------===//
// Shape and data movement.
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @reshape(
// CHECK: %[[C:.*]] = kiln.constant dense<{{\[\[}}1, 2], [3, 4], [5, 6]]> : tensor<3x2xi32>
// CHECK-NEXT: return %[[C]] : tensor<3x2xi32>
func.func @reshape() -> tensor<3x2xi32> {
  %x = kiln.constant dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi32>
  %y = kiln.reshape %x : tensor<2x3xi32> to tensor<3x2xi32>
  return %y : tensor<3x2xi32>
}

// CHECK-LABEL: func.func @broadcast_splat(
// CHECK: %[[C:.*]] = kiln.constant dense<2.500000e+00> : tensor<2x3xf32>
// CHECK-NEXT: return %[[C]] : tensor<2x3xf32>
func.func @broadcast_splat() -> tensor<2x3xf32> {
  %x = kiln.constant dense<[2.5]> : tensor<1xf32>
  %y = kiln.broadcast %x : tensor<1xf32> to tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}

// CHECK-LABEL: func.func @broadcast_row(
// CHECK: %[[C:.*]] = kiln.constant dense<{{\[\[}}1, 2, 3], [1, 2, 3]]> : tensor<2x3xi64>
// CHECK-NEXT: return %[[C]] : tensor<2x3xi64>
func.func @broadcast_row() -> tensor<2x3xi64> {
  %x = kiln.constant dense<[1, 2, 3]> : tensor<3xi64>
  %y = kiln.broadcast %x : tensor<3xi64> to tensor<2x3xi64>
  return %y : tensor<2x3xi64>
}

// CHECK-LABEL: func.func @broadcast_column(
// CHECK: %[[C:.*]] = kiln.constant dense<{{\[\[}}1, 1, 1], [2, 2, 2]]> : tensor<2x3xi64>
// CHECK-NEXT: return %[[C]] : tensor<2x3xi64>
func.func @broadcast_column() -> tensor<2x3xi64> {
  %x = kiln.constant dense<[[1], [2]]> : tensor<2x1xi64>
  %y = kiln.broadcast %x : tensor<2x1xi64> to tensor<2x3xi64>
  return %y : tensor<2x3xi64>
}

// CHECK-LABEL: func.func @broadcast_middle(
// CHECK: %[[C:.*]] = kiln.constant dense<{{\[\[\[\[}}1, 2, 3], [1, 2, 3]], {{\[\[}}4, 5, 6], [4, 5, 6]]], {{\[\[\[}}1, 2, 3], [1, 2, 3]], {{\[\[}}4, 5, 6], [4, 5, 6]]]]> : tensor<2x2x2x3xi32>
// CHECK-NEXT: return %[[C]] : tensor<2x2x2x3xi32>
func.func @broadcast_middle() -> tensor<2x2x2x3xi32> {
  %x = kiln.constant dense<[[[1, 2, 3]], [[4, 5, 6]]]> : tensor<2x1x3xi32>
  %y = kiln.broadcast %x : tensor<2x1x3xi32> to tensor<2x2x2x3xi32>
  return %y : tensor<2x2x2x3xi32>
}

// CHECK-LABEL: func.func @broadcast_scalar(
// CHECK: %[[C:.*]] = kiln.constant dense<7> : tensor<2x2xi8>
// CHECK-NEXT: return %[[C]] : tensor<2x2xi8>
func.func @broadcast_scalar() -> tensor<2x2xi8> {
  %x = kiln.constant dense<7> : tensor<i8>
  %y = kiln.broadcast %x : tensor<i8> to tensor<2x2xi8>
  return %y : tensor<2x2xi8>
}

// CHECK-LABEL: func.func @transpose(
// CHECK: %[[C:.*]] = kiln.constant dense<{{\[\[}}1, 4], [2, 5], [3, 6]]> : tensor<3x2xi32>
// CHECK-NEXT: return %[[C]] : tensor<3x2xi32>
func.func @transpose() -> tensor<3x2xi32> {
  %x = kiln.constant dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi32>
  %y = kiln.transpose %x {permutation = array<i64: 1, 0>} : tensor<2x3xi32>
  return %y : tensor<3x2xi32>
}

// CHECK-LABEL: func.func @transpose_rank3(
// CHECK: %[[C:.*]] = kiln.constant dense<{{\[\[\[}}0, 4, 8], [12, 16, 20]], {{\[\[}}1, 5, 9], [13, 17, 21]], {{\[\[}}2, 6, 10], [14, 18, 22]], {{\[\[}}3, 7, 11], [15, 19, 23]]]> : tensor<4x2x3xi64>
// CHECK-NEXT: return %[[C]] : tensor<4x2x3xi64>
func.func @transpose_rank3() -> tensor<4x2x3xi64> {
  %x = kiln.constant dense<[[[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]], [[12, 13, 14, 15], [16, 17, 18, 19], [20, 21, 22, 23]]]> : tensor<2x3x4xi64>
  %y = kiln.transpose %x {permutation = array<i64: 2, 0, 1>} : tensor<2x3x4xi64>
  return %y : tensor<4x2x3xi64>
}

// CHECK-LABEL: func.func @transpose_f32(
// CHECK: %[[C:.*]] = kiln.constant dense<{{\[\[\[}}0.000000e+00], [5.000000e-01], [1.000000e+00]], {{\[\[}}1.500000e+00], [2.000000e+00], [2.500000e+00]]]> : tensor<2x3x1xf32>
// CHECK-NEXT: return %[[C]] : tensor<2x3x1xf32>
func.func @transpose_f32() -> tensor<2x3x1xf32> {
  %x = kiln.constant dense<[[[0.0, 0.5, 1.0], [1.5, 2.0, 2.5]]]> : tensor<1x2x3xf32>
  %y = kiln.transpose %x {permutation = array<i64: 1, 2, 0>} : tensor<1x2x3xf32>
  return %y : tensor<2x3x1xf32>
}

// CHECK-LABEL: func.func @slice(
// CHECK: %[[C:.*]] = kiln.constant dense<{{\[\[}}5, 7, 9], [15, 17, 19]]> : tensor<2x3xi32>
// CHECK-NEXT: return %[[C]] : tensor<2x3xi32>
func.func @slice() -> tensor<2x3xi32> {
  %x = kiln.constant dense<[[0, 1, 2, 3, 4], [5, 6, 7, 8, 9], [10, 11, 12, 13, 14], [15, 16, 17, 18, 19]]> : tensor<4x5xi32>
  %y = kiln.slice %x {start = array<i64: 1, 0>, limit = array<i64: 4, 5>, stride = array<i64: 2, 2>} : tensor<4x5xi32>
  return %y : tensor<2x3xi32>
}

// CHECK-LABEL: func.func @slice_window(
// CHECK: %[[C:.*]] = kiln.constant dense<{{\[\[\[}}17, 19], [21, 23]]]> : tensor<1x2x2xi64>
// CHECK-NEXT: return %[[C]] : tensor<1x2x2xi64>
func.func @slice_window() -> tensor<1x2x2xi64> {
  %x = kiln.constant dense<[[[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]], [[12, 13, 14, 15], [16, 17, 18, 19], [20, 21, 22, 23]]]> : tensor<2x3x4xi64>
  %y = kiln.slice %x {start = array<i64: 1, 1, 1>, limit = array<i64: 2, 3, 4>, stride = array<i64: 1, 1, 2>} : tensor<2x3x4xi64>
  return %y : tensor<1x2x2xi64>
}

// CHECK-LABEL: func.func @slice_splat(
// CHECK: %[[C:.*]] = kiln.constant dense<1.500000e+00> : tensor<2x2xf32>
// CHECK-NEXT: return %[[C]] : tensor<2x2xf32>
func.func @slice_splat() -> tensor<2x2xf32> {
  %x = kiln.constant dense<[[1.5, 1.5, 1.5, 1.5], [1.5, 1.5, 1.5, 1.5], [1.5, 1.5, 1.5, 1.5], [1.5, 1.5, 1.5, 1.5]]> : tensor<4x4xf32>
  %y = kiln.slice %x {start = array<i64: 0, 1>, limit = array<i64: 4, 3>, stride = array<i64: 3, 1>} : tensor<4x4xf32>
  return %y : tensor<2x2xf32>
}

// CHECK-LABEL: func.func @reverse(
// CHECK: %[[C:.*]] = kiln.constant dense<{{\[\[}}3, 2, 1], [6, 5, 4]]> : tensor<2x3xi32>
// CHECK-NEXT: return %[[C]] : tensor<2x3xi32>
func.func @reverse() -> tensor<2x3xi32> {
  %x = kiln.constant dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi32>
  %y = kiln.reverse %x {dimensions = array<i64: 1>} : tensor<2x3xi32>
  return %y : tensor<2x3xi32>
}

// CHECK-LABEL: func.func @reverse_both(
// CHECK: %[[C:.*]] = kiln.constant dense<{{\[\[}}6, 5, 4], [3, 2, 1]]> : tensor<2x3xi32>
// CHECK-NEXT: return %[[C]] : tensor<2x3xi32>
func.func @reverse_both() -> tensor<2x3xi32> {
  %x = kiln.constant dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi32>
  %y = kiln.reverse %x {dimensions = array<i64: 0, 1>} : tensor<2x3xi32>
  return %y : tensor<2x3xi32>
}

// CHECK-LABEL: func.func @reverse_rank3(
// CHECK: %[[C:.*]] = kiln.constant dense<{{\[\[\[}}7, 6], [9, 8], [11, 10]], {{\[\[}}1, 0], [3, 2], [5, 4]]]> : tensor<2x3x2xi64>
// CHECK-NEXT: return %[[C]] : tensor<2x3x2xi64>
func.func @reverse_rank3() -> tensor<2x3x2xi64> {
  %x = kiln.constant dense<[[[0, 1], [2, 3], [4, 5]], [[6, 7], [8, 9], [10, 11]]]> : tensor<2x3x2xi64>
  %y = kiln.reverse %x {dimensions = array<i64: 0, 2>} : tensor<2x3x2xi64>
  return %y : tensor<2x3x2xi64>
}

// CHECK-LABEL: func.func @concat_axis0(
// CHECK: %[[C:.*]] = kiln.constant dense<{{\[\[}}1, 2], [3, 4], [5, 6]]> : tensor<3x2xi64>
// CHECK-NEXT: return %[[C]] : tensor<3x2xi64>
func.func @concat_axis0() -> tensor<3x2xi64> {
  %p0 = kiln.constant dense<[[1, 2]]> : tensor<1x2xi64>
  %p1 = kiln.constant dense<[[3, 4], [5, 6]]> : tensor<2x2xi64>
  %y = kiln.concat %p0, %p1 {axis = 0 : i64} : tensor<1x2xi64>, tensor<2x2xi64>
  return %y : tensor<3x2xi64>
}

// CHECK-LABEL: func.func @concat_axis1(
// CHECK: %[[C:.*]] = kiln.constant dense<{{\[\[}}1, 3, 4, 7], [2, 5, 6, 8]]> : tensor<2x4xi32>
// CHECK-NEXT: return %[[C]] : tensor<2x4xi32>
func.func @concat_axis1() -> tensor<2x4xi32> {
  %p0 = kiln.constant dense<[[1], [2]]> : tensor<2x1xi32>
  %p1 = kiln.constant dense<[[3, 4], [5, 6]]> : tensor<2x2xi32>
  %p2 = kiln.constant dense<[[7], [8]]> : tensor<2x1xi32>
  %y = kiln.concat %p0, %p1, %p2 {axis = 1 : i64} : tensor<2x1xi32>, tensor<2x2xi32>, tensor<2x1xi32>
  return %y : tensor<2x4xi32>
}

// CHECK-LABEL: func.func @concat_splat_part(
// CHECK: %[[C:.*]] = kiln.constant dense<{{\[\[}}1.500000e+00, 1.500000e+00], [2.000000e+00, 3.000000e+00]]> : tensor<2x2xf32>
// CHECK-NEXT: return %[[C]] : tensor<2x2xf32>
func.func @concat_splat_part() -> tensor<2x2xf32> {
  %p0 = kiln.constant dense<[[1.5, 1.5]]> : tensor<1x2xf32>
  %p1 = kiln.constant dense<[[2.0, 3.0]]> : tensor<1x2xf32>
  %y = kiln.concat %p0, %p1 {axis = 0 : i64} : tensor<1x2xf32>, tensor<1x2xf32>
  return %y : tensor<2x2xf32>
}

// CHECK-LABEL: func.func @concat_middle_axis(
// CHECK: %[[C:.*]] = kiln.constant dense<{{\[\[\[}}0, 1], [2, 3], [100, 101]], {{\[\[}}4, 5], [6, 7], [102, 103]]]> : tensor<2x3x2xi64>
// CHECK-NEXT: return %[[C]] : tensor<2x3x2xi64>
func.func @concat_middle_axis() -> tensor<2x3x2xi64> {
  %p0 = kiln.constant dense<[[[0, 1], [2, 3]], [[4, 5], [6, 7]]]> : tensor<2x2x2xi64>
  %p1 = kiln.constant dense<[[[100, 101]], [[102, 103]]]> : tensor<2x1x2xi64>
  %y = kiln.concat %p0, %p1 {axis = 1 : i64} : tensor<2x2x2xi64>, tensor<2x1x2xi64>
  return %y : tensor<2x3x2xi64>
}

// CHECK-LABEL: func.func @concat_i1(
// CHECK: %[[C:.*]] = kiln.constant dense<[true, false, false]> : tensor<3xi1>
// CHECK-NEXT: return %[[C]] : tensor<3xi1>
func.func @concat_i1() -> tensor<3xi1> {
  %p0 = kiln.constant dense<[true, false]> : tensor<2xi1>
  %p1 = kiln.constant dense<[false]> : tensor<1xi1>
  %y = kiln.concat %p0, %p1 {axis = 0 : i64} : tensor<2xi1>, tensor<1xi1>
  return %y : tensor<3xi1>
}

// CHECK-LABEL: func.func @iota(
// CHECK: %[[C:.*]] = kiln.constant dense<[0, 1, 2, 3, 4]> : tensor<5xi64>
// CHECK-NEXT: return %[[C]] : tensor<5xi64>
func.func @iota() -> tensor<5xi64> {
  %y = kiln.iota {dimension = 0 : i64} : tensor<5xi64>
  return %y : tensor<5xi64>
}

// CHECK-LABEL: func.func @iota_f32_start_step(
// CHECK: %[[C:.*]] = kiln.constant dense<{{\[\[}}1.000000e+00, 1.500000e+00, 2.000000e+00], [1.000000e+00, 1.500000e+00, 2.000000e+00]]> : tensor<2x3xf32>
// CHECK-NEXT: return %[[C]] : tensor<2x3xf32>
func.func @iota_f32_start_step() -> tensor<2x3xf32> {
  %y = kiln.iota {dimension = 1 : i64, start = 1.0 : f64, step = 0.5 : f64} : tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}

// CHECK-LABEL: func.func @iota_i32_dim0(
// CHECK: %[[C:.*]] = kiln.constant dense<{{\[\[}}-1, -1], [1, 1], [3, 3]]> : tensor<3x2xi32>
// CHECK-NEXT: return %[[C]] : tensor<3x2xi32>
func.func @iota_i32_dim0() -> tensor<3x2xi32> {
  %y = kiln.iota {dimension = 0 : i64, start = -1.0 : f64, step = 2.0 : f64} : tensor<3x2xi32>
  return %y : tensor<3x2xi32>
}

// CHECK-LABEL: func.func @gather(
// CHECK: %[[C:.*]] = kiln.constant dense<{{\[\[}}5, 6], [1, 2], [3, 4]]> : tensor<3x2xi64>
// CHECK-NEXT: return %[[C]] : tensor<3x2xi64>
func.func @gather() -> tensor<3x2xi64> {
  %x = kiln.constant dense<[[1, 2], [3, 4], [5, 6]]> : tensor<3x2xi64>
  %i = kiln.constant dense<[2, -3, 1]> : tensor<3xi64>
  %y = kiln.gather %x, %i {axis = 0 : i64} : tensor<3x2xi64>, tensor<3xi64>
  return %y : tensor<3x2xi64>
}

// CHECK-LABEL: func.func @gather_axis1_matrix_indices(
// CHECK: %[[C:.*]] = kiln.constant dense<{{\[\[\[}}2, 1], [1, 1]], {{\[\[}}4, 3], [3, 3]], {{\[\[}}6, 5], [5, 5]]]> : tensor<3x2x2xi32>
// CHECK-NEXT: return %[[C]] : tensor<3x2x2xi32>
func.func @gather_axis1_matrix_indices() -> tensor<3x2x2xi32> {
  %x = kiln.constant dense<[[1, 2], [3, 4], [5, 6]]> : tensor<3x2xi32>
  %i = kiln.constant dense<[[1, 0], [0, 0]]> : tensor<2x2xi32>
  %y = kiln.gather %x, %i {axis = 1 : i64} : tensor<3x2xi32>, tensor<2x2xi32>
  return %y : tensor<3x2x2xi32>
}

// CHECK-LABEL: func.func @gather_scalar_index(
// CHECK: %[[C:.*]] = kiln.constant dense<{{\[\[}}1.200000e+01, 1.350000e+01, 1.500000e+01, 1.650000e+01], [3.000000e+01, 3.150000e+01, 3.300000e+01, 3.450000e+01]]> : tensor<2x4xf32>
// CHECK-NEXT: return %[[C]] : tensor<2x4xf32>
func.func @gather_scalar_index() -> tensor<2x4xf32> {
  %x = kiln.constant dense<[[[0.0, 1.5, 3.0, 4.5], [6.0, 7.5, 9.0, 10.5], [12.0, 13.5, 15.0, 16.5]], [[18.0, 19.5, 21.0, 22.5], [24.0, 25.5, 27.0, 28.5], [30.0, 31.5, 33.0, 34.5]]]> : tensor<2x3x4xf32>
  %i = kiln.constant dense<-1> : tensor<i64>
  %y = kiln.gather %x, %i {axis = 1 : i64} : tensor<2x3x4xf32>, tensor<i64>
  return %y : tensor<2x4xf32>
}

// CHECK-LABEL: func.func @gather_rank3_axis1(
// CHECK: %[[C:.*]] = kiln.constant dense<{{\[\[\[\[}}8, 9, 10, 11], [0, 1, 2, 3]]], {{\[\[\[}}20, 21, 22, 23], [12, 13, 14, 15]]]]> : tensor<2x1x2x4xi64>
// CHECK-NEXT: return %[[C]] : tensor<2x1x2x4xi64>
func.func @gather_rank3_axis1() -> tensor<2x1x2x4xi64> {
  %x = kiln.constant dense<[[[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]], [[12, 13, 14, 15], [16, 17, 18, 19], [20, 21, 22, 23]]]> : tensor<2x3x4xi64>
  %i = kiln.constant dense<[[2, 0]]> : tensor<1x2xi64>
  %y = kiln.gather %x, %i {axis = 1 : i64} : tensor<2x3x4xi64>, tensor<1x2xi64>
  return %y : tensor<2x1x2x4xi64>
}

//===----------------------------------------------------------------------===//
// Reductions.
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @reduce_sum(
// CHECK: %[[C:.*]] = kiln.constant dense<[6.000000e+00, 1.500000e+01]> : tensor<2xf32>
// CHECK-NEXT: return %[[C]] : tensor<2xf32>
func.func @reduce_sum() -> tensor<2xf32> {
  %x = kiln.constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>
  %y = kiln.reduce_sum %x {dimensions = array<i64: 1>} : tensor<2x3xf32>
  return %y : tensor<2xf32>
}

// CHECK-LABEL: func.func @reduce_mean(
// CHECK: %[[C:.*]] = kiln.constant dense<{{\[\[}}2.500000e+00, 3.500000e+00, 4.500000e+00]]> : tensor<1x3xf32>
// CHECK-NEXT: return %[[C]] : tensor<1x3xf32>
func.func @reduce_mean() -> tensor<1x3xf32> {
  %x = kiln.constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>
  %y = kiln.reduce_mean %x {dimensions = array<i64: 0>, keepdims} : tensor<2x3xf32>
  return %y : tensor<1x3xf32>
}

// CHECK-LABEL: func.func @reduce_max(
// CHECK: %[[C:.*]] = kiln.constant dense<6.000000e+00> : tensor<f32>
// CHECK-NEXT: return %[[C]] : tensor<f32>
func.func @reduce_max() -> tensor<f32> {
  %x = kiln.constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>
  %y = kiln.reduce_max %x {dimensions = array<i64: 0, 1>} : tensor<2x3xf32>
  return %y : tensor<f32>
}

// CHECK-LABEL: func.func @reduce_min(
// CHECK: %[[C:.*]] = kiln.constant dense<[1.000000e+00, 4.000000e+00]> : tensor<2xf32>
// CHECK-NEXT: return %[[C]] : tensor<2xf32>
func.func @reduce_min() -> tensor<2xf32> {
  %x = kiln.constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>
  %y = kiln.reduce_min %x {dimensions = array<i64: 1>} : tensor<2x3xf32>
  return %y : tensor<2xf32>
}

// CHECK-LABEL: func.func @reduce_prod(
// CHECK: %[[C:.*]] = kiln.constant dense<[6.000000e+00, 1.200000e+02]> : tensor<2xf32>
// CHECK-NEXT: return %[[C]] : tensor<2xf32>
func.func @reduce_prod() -> tensor<2xf32> {
  %x = kiln.constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>
  %y = kiln.reduce_prod %x {dimensions = array<i64: 1>} : tensor<2x3xf32>
  return %y : tensor<2xf32>
}

// CHECK-LABEL: func.func @reduce_l2(
// CHECK: %[[C:.*]] = kiln.constant dense<[3.74165{{[0-9]*}}, 8.77496{{[0-9]*}}]> : tensor<2xf32>
// CHECK-NEXT: return %[[C]] : tensor<2xf32>
func.func @reduce_l2() -> tensor<2xf32> {
  %x = kiln.constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>
  %y = kiln.reduce_l2 %x {dimensions = array<i64: 1>} : tensor<2x3xf32>
  return %y : tensor<2xf32>
}

// CHECK-LABEL: func.func @reduce_logsumexp(
// CHECK: %[[C:.*]] = kiln.constant dense<[3.40760{{[0-9]*}}, 6.40760{{[0-9]*}}]> : tensor<2xf32>
// CHECK-NEXT: return %[[C]] : tensor<2xf32>
func.func @reduce_logsumexp() -> tensor<2xf32> {
  %x = kiln.constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>
  %y = kiln.reduce_logsumexp %x {dimensions = array<i64: 1>} : tensor<2x3xf32>
  return %y : tensor<2xf32>
}

// CHECK-LABEL: func.func @reduce_logsumexp_large(
// CHECK: %[[C:.*]] = kiln.constant dense<[1000.69{{[0-9]*}}, -998.686{{[0-9]*}}]> : tensor<2xf32>
// CHECK-NEXT: return %[[C]] : tensor<2xf32>
func.func @reduce_logsumexp_large() -> tensor<2xf32> {
  %x = kiln.constant dense<[[1000.0, 1000.0], [-1000.0, -999.0]]> : tensor<2x2xf32>
  %y = kiln.reduce_logsumexp %x {dimensions = array<i64: 1>} : tensor<2x2xf32>
  return %y : tensor<2xf32>
}

// CHECK-LABEL: func.func @reduce_max_propagates_nan(
// CHECK: %[[C:.*]] = kiln.constant dense<[0x{{7FC00000|FFC00000}}, 6.000000e+00]> : tensor<2xf32>
// CHECK-NEXT: return %[[C]] : tensor<2xf32>
func.func @reduce_max_propagates_nan() -> tensor<2xf32> {
  %x = kiln.constant dense<[[1.0, 0x7FC00000, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>
  %y = kiln.reduce_max %x {dimensions = array<i64: 1>} : tensor<2x3xf32>
  return %y : tensor<2xf32>
}

// CHECK-LABEL: func.func @reduce_min_propagates_nan(
// CHECK: %[[C:.*]] = kiln.constant dense<[0x{{7FC00000|FFC00000}}, 2.000000e+00]> : tensor<2xf32>
// CHECK-NEXT: return %[[C]] : tensor<2xf32>
func.func @reduce_min_propagates_nan() -> tensor<2xf32> {
  %x = kiln.constant dense<[[0x7FC00000, 1.0], [2.0, 3.0]]> : tensor<2x2xf32>
  %y = kiln.reduce_min %x {dimensions = array<i64: 1>} : tensor<2x2xf32>
  return %y : tensor<2xf32>
}

// CHECK-LABEL: func.func @reduce_sum_i32_outer_dims(
// CHECK: %[[C:.*]] = kiln.constant dense<[14, 22, 30]> : tensor<3xi32>
// CHECK-NEXT: return %[[C]] : tensor<3xi32>
func.func @reduce_sum_i32_outer_dims() -> tensor<3xi32> {
  %x = kiln.constant dense<[[[0, 1], [2, 3], [4, 5]], [[6, 7], [8, 9], [10, 11]]]> : tensor<2x3x2xi32>
  %y = kiln.reduce_sum %x {dimensions = array<i64: 0, 2>} : tensor<2x3x2xi32>
  return %y : tensor<3xi32>
}

// CHECK-LABEL: func.func @reduce_sum_i32_keepdims(
// CHECK: %[[C:.*]] = kiln.constant dense<{{\[\[\[}}6, 9]], {{\[\[}}24, 27]]]> : tensor<2x1x2xi32>
// CHECK-NEXT: return %[[C]] : tensor<2x1x2xi32>
func.func @reduce_sum_i32_keepdims() -> tensor<2x1x2xi32> {
  %x = kiln.constant dense<[[[0, 1], [2, 3], [4, 5]], [[6, 7], [8, 9], [10, 11]]]> : tensor<2x3x2xi32>
  %y = kiln.reduce_sum %x {dimensions = array<i64: 1>, keepdims} : tensor<2x3x2xi32>
  return %y : tensor<2x1x2xi32>
}

// CHECK-LABEL: func.func @reduce_prod_i64(
// CHECK: %[[C:.*]] = kiln.constant dense<[4, -10, -18]> : tensor<3xi64>
// CHECK-NEXT: return %[[C]] : tensor<3xi64>
func.func @reduce_prod_i64() -> tensor<3xi64> {
  %x = kiln.constant dense<[[1, -2, 3], [4, 5, -6]]> : tensor<2x3xi64>
  %y = kiln.reduce_prod %x {dimensions = array<i64: 0>} : tensor<2x3xi64>
  return %y : tensor<3xi64>
}

// CHECK-LABEL: func.func @reduce_max_i8(
// CHECK: %[[C:.*]] = kiln.constant dense<[3, 5]> : tensor<2xi8>
// CHECK-NEXT: return %[[C]] : tensor<2xi8>
func.func @reduce_max_i8() -> tensor<2xi8> {
  %x = kiln.constant dense<[[1, -2, 3], [4, 5, -6]]> : tensor<2x3xi8>
  %y = kiln.reduce_max %x {dimensions = array<i64: 1>} : tensor<2x3xi8>
  return %y : tensor<2xi8>
}

// CHECK-LABEL: func.func @reduce_min_i32(
// CHECK: %[[C:.*]] = kiln.constant dense<-6> : tensor<i32>
// CHECK-NEXT: return %[[C]] : tensor<i32>
func.func @reduce_min_i32() -> tensor<i32> {
  %x = kiln.constant dense<[[1, -2, 3], [4, 5, -6]]> : tensor<2x3xi32>
  %y = kiln.reduce_min %x {dimensions = array<i64: 0, 1>} : tensor<2x3xi32>
  return %y : tensor<i32>
}

// CHECK-LABEL: func.func @reduce_mean_f64(
// CHECK: %[[C:.*]] = kiln.constant dense<[2.500000e+00, 8.500000e+00]> : tensor<2xf64>
// CHECK-NEXT: return %[[C]] : tensor<2xf64>
func.func @reduce_mean_f64() -> tensor<2xf64> {
  %x = kiln.constant dense<[[[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]], [[6.0, 7.0], [8.0, 9.0], [10.0, 11.0]]]> : tensor<2x3x2xf64>
  %y = kiln.reduce_mean %x {dimensions = array<i64: 1, 2>} : tensor<2x3x2xf64>
  return %y : tensor<2xf64>
}

//===----------------------------------------------------------------------===//
// Ops that do nothing fold to their operand.
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @add_zero(
// CHECK-SAME: %[[X:.*]]: tensor<3xf32>
// CHECK-NOT: kiln.add
// CHECK: return %[[X]], %[[X]]
func.func @add_zero(%x: tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>) {
  %zero = kiln.constant dense<0.0> : tensor<3xf32>
  %a = kiln.add %x, %zero : tensor<3xf32>
  %b = kiln.add %zero, %x : tensor<3xf32>
  return %a, %b : tensor<3xf32>, tensor<3xf32>
}

// CHECK-LABEL: func.func @sub_zero(
// CHECK-SAME: %[[X:.*]]: tensor<3xi64>
// CHECK: %[[ZERO:.*]] = kiln.constant dense<0> : tensor<3xi64>
// CHECK: %[[NEG:.*]] = kiln.sub %[[ZERO]], %[[X]] : tensor<3xi64>
// CHECK: return %[[X]], %[[NEG]]
func.func @sub_zero(%x: tensor<3xi64>) -> (tensor<3xi64>, tensor<3xi64>) {
  %zero = kiln.constant dense<0> : tensor<3xi64>
  %a = kiln.sub %x, %zero : tensor<3xi64>
  %b = kiln.sub %zero, %x : tensor<3xi64>
  return %a, %b : tensor<3xi64>, tensor<3xi64>
}

// CHECK-LABEL: func.func @mul_one(
// CHECK-SAME: %[[X:.*]]: tensor<2x2xf16>
// CHECK-NOT: kiln.mul
// CHECK: return %[[X]], %[[X]]
func.func @mul_one(%x: tensor<2x2xf16>) -> (tensor<2x2xf16>, tensor<2x2xf16>) {
  %one = kiln.constant dense<1.0> : tensor<2x2xf16>
  %a = kiln.mul %x, %one : tensor<2x2xf16>
  %b = kiln.mul %one, %x : tensor<2x2xf16>
  return %a, %b : tensor<2x2xf16>, tensor<2x2xf16>
}

// CHECK-LABEL: func.func @div_one(
// CHECK-SAME: %[[X:.*]]: tensor<4xi32>
// CHECK: %[[ONE:.*]] = kiln.constant dense<1> : tensor<4xi32>
// CHECK: %[[R:.*]] = kiln.div %[[ONE]], %[[X]] : tensor<4xi32>
// CHECK: return %[[X]], %[[R]]
func.func @div_one(%x: tensor<4xi32>) -> (tensor<4xi32>, tensor<4xi32>) {
  %one = kiln.constant dense<1> : tensor<4xi32>
  %a = kiln.div %x, %one : tensor<4xi32>
  %b = kiln.div %one, %x : tensor<4xi32>
  return %a, %b : tensor<4xi32>, tensor<4xi32>
}

// CHECK-LABEL: func.func @pow_one(
// CHECK-SAME: %[[X:.*]]: tensor<4xf32>
// CHECK-NOT: kiln.pow
// CHECK: return %[[X]]
func.func @pow_one(%x: tensor<4xf32>) -> tensor<4xf32> {
  %one = kiln.constant dense<1.0> : tensor<4xf32>
  %y = kiln.pow %x, %one : tensor<4xf32>
  return %y : tensor<4xf32>
}

// Splats other than the neutral element stay (1 + 1 folds to 2 first).
// CHECK-LABEL: func.func @add_one(
// CHECK-SAME: %[[X:.*]]: tensor<3xf32>
// CHECK-DAG: %[[ONE:.*]] = kiln.constant dense<1.000000e+00> : tensor<3xf32>
// CHECK-DAG: %[[TWO:.*]] = kiln.constant dense<2.000000e+00> : tensor<3xf32>
// CHECK: %[[A:.*]] = kiln.add %[[X]], %[[ONE]] : tensor<3xf32>
// CHECK: %[[M:.*]] = kiln.mul %[[X]], %[[TWO]] : tensor<3xf32>
// CHECK: return %[[A]], %[[M]]
func.func @add_one(%x: tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>) {
  %one = kiln.constant dense<1.0> : tensor<3xf32>
  %a = kiln.add %x, %one : tensor<3xf32>
  %two = kiln.add %one, %one : tensor<3xf32>
  %m = kiln.mul %x, %two : tensor<3xf32>
  return %a, %m : tensor<3xf32>, tensor<3xf32>
}

// CHECK-LABEL: func.func @select_same_operands(
// CHECK-SAME: %[[M:.*]]: tensor<4xi1>, %[[X:.*]]: tensor<4xf32>
// CHECK-NOT: kiln.select
// CHECK: return %[[X]]
func.func @select_same_operands(%m: tensor<4xi1>, %x: tensor<4xf32>) -> tensor<4xf32> {
  %y = kiln.select %m, %x, %x : tensor<4xi1>, tensor<4xf32>
  return %y : tensor<4xf32>
}

// CHECK-LABEL: func.func @select_splat_condition(
// CHECK-SAME: %[[X:.*]]: tensor<4xf32>, %[[Y:.*]]: tensor<4xf32>
// CHECK-NOT: kiln.select
// CHECK: return %[[X]], %[[Y]]
func.func @select_splat_condition(%x: tensor<4xf32>, %y: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %t = kiln.constant dense<true> : tensor<4xi1>
  %f = kiln.constant dense<false> : tensor<4xi1>
  %a = kiln.select %t, %x, %y : tensor<4xi1>, tensor<4xf32>
  %b = kiln.select %f, %x, %y : tensor<4xi1>, tensor<4xf32>
  return %a, %b : tensor<4xf32>, tensor<4xf32>
}

// CHECK-LABEL: func.func @cast_same_type(
// CHECK-SAME: %[[X:.*]]: tensor<4xf32>
// CHECK-NOT: kiln.cast
// CHECK: return %[[X]]
func.func @cast_same_type(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = kiln.cast %x : tensor<4xf32> to tensor<4xf32>
  return %y : tensor<4xf32>
}

// CHECK-LABEL: func.func @reshape_same_type(
// CHECK-SAME: %[[X:.*]]: tensor<2x3xf32>
// CHECK-NOT: kiln.reshape
// CHECK: return %[[X]]
func.func @reshape_same_type(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %y = kiln.reshape %x : tensor<2x3xf32> to tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}

// CHECK-LABEL: func.func @reshape_of_reshape(
// CHECK-SAME: %[[X:.*]]: tensor<2x3xf32>
// CHECK: %[[Y:.*]] = kiln.reshape %[[X]] : tensor<2x3xf32> to tensor<3x2xf32>
// CHECK-NOT: kiln.reshape
// CHECK: return %[[Y]]
func.func @reshape_of_reshape(%x: tensor<2x3xf32>) -> tensor<3x2xf32> {
  %a = kiln.reshape %x : tensor<2x3xf32> to tensor<6xf32>
  %b = kiln.reshape %a : tensor<6xf32> to tensor<1x6xf32>
  %c = kiln.reshape %b : tensor<1x6xf32> to tensor<3x2xf32>
  return %c : tensor<3x2xf32>
}

// CHECK-LABEL: func.func @reshape_round_trip(
// CHECK-SAME: %[[X:.*]]: tensor<2x3xf32>
// CHECK-NOT: kiln.reshape
// CHECK: return %[[X]]
func.func @reshape_round_trip(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %a = kiln.reshape %x : tensor<2x3xf32> to tensor<6xf32>
  %b = kiln.reshape %a : tensor<6xf32> to tensor<2x3xf32>
  return %b : tensor<2x3xf32>
}

// CHECK-LABEL: func.func @broadcast_same_type(
// CHECK-SAME: %[[X:.*]]: tensor<2x3xf32>
// CHECK-NOT: kiln.broadcast
// CHECK: return %[[X]]
func.func @broadcast_same_type(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %y = kiln.broadcast %x : tensor<2x3xf32> to tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}

// CHECK-LABEL: func.func @transpose_identity(
// CHECK-SAME: %[[X:.*]]: tensor<2x3x4xf32>
// CHECK-NOT: kiln.transpose
// CHECK: return %[[X]]
func.func @transpose_identity(%x: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %y = kiln.transpose %x {permutation = array<i64: 0, 1, 2>} : tensor<2x3x4xf32>
  return %y : tensor<2x3x4xf32>
}

// A permutation that keeps the type is not an identity.
// CHECK-LABEL: func.func @transpose_square(
// CHECK: %[[Y:.*]] = kiln.transpose %{{.*}} {permutation = array<i64: 1, 0>} : tensor<3x3xf32>
// CHECK: return %[[Y]]
func.func @transpose_square(%x: tensor<3x3xf32>) -> tensor<3x3xf32> {
  %y = kiln.transpose %x {permutation = array<i64: 1, 0>} : tensor<3x3xf32>
  return %y : tensor<3x3xf32>
}

// CHECK-LABEL: func.func @slice_whole(
// CHECK-SAME: %[[X:.*]]: tensor<4x1xf32>
// CHECK-NOT: kiln.slice
// CHECK: return %[[X]]
func.func @slice_whole(%x: tensor<4x1xf32>) -> tensor<4x1xf32> {
  %y = kiln.slice %x {start = array<i64: 0, 0>, limit = array<i64: 4, 1>, stride = array<i64: 1, 5>} : tensor<4x1xf32>
  return %y : tensor<4x1xf32>
}

// CHECK-LABEL: func.func @reverse_nothing(
// CHECK-SAME: %[[X:.*]]: tensor<4x3xf32>
// CHECK-NOT: kiln.reverse
// CHECK: return %[[X]]
func.func @reverse_nothing(%x: tensor<4x3xf32>) -> tensor<4x3xf32> {
  %y = kiln.reverse %x {dimensions = array<i64>} : tensor<4x3xf32>
  return %y : tensor<4x3xf32>
}

// CHECK-LABEL: func.func @concat_one(
// CHECK-SAME: %[[X:.*]]: tensor<4x3xf32>
// CHECK-NOT: kiln.concat
// CHECK: return %[[X]]
func.func @concat_one(%x: tensor<4x3xf32>) -> tensor<4x3xf32> {
  %y = kiln.concat %x {axis = 1 : i64} : tensor<4x3xf32>
  return %y : tensor<4x3xf32>
}

//===----------------------------------------------------------------------===//
// What must not fold.
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @div_by_zero(
// CHECK: %[[Y:.*]] = kiln.div
// CHECK: %[[R:.*]] = kiln.rem
// CHECK: return %[[Y]], %[[R]]
func.func @div_by_zero() -> (tensor<2xi32>, tensor<2xi32>) {
  %a = kiln.constant dense<[4, 6]> : tensor<2xi32>
  %b = kiln.constant dense<[2, 0]> : tensor<2xi32>
  %y = kiln.div %a, %b : tensor<2xi32>
  %r = kiln.rem %a, %b : tensor<2xi32>
  return %y, %r : tensor<2xi32>, tensor<2xi32>
}

// CHECK-LABEL: func.func @pow_negative_exponent(
// CHECK: %[[Y:.*]] = kiln.pow
// CHECK: return %[[Y]]
func.func @pow_negative_exponent() -> tensor<2xi64> {
  %a = kiln.constant dense<[2, 3]> : tensor<2xi64>
  %b = kiln.constant dense<[2, -1]> : tensor<2xi64>
  %y = kiln.pow %a, %b : tensor<2xi64>
  return %y : tensor<2xi64>
}

// CHECK-LABEL: func.func @cast_nan_to_integer(
// CHECK: %[[Y:.*]] = kiln.cast
// CHECK: return %[[Y]]
func.func @cast_nan_to_integer() -> tensor<2xi32> {
  %x = kiln.constant dense<[1.0, 0x7FC00000]> : tensor<2xf32>
  %y = kiln.cast %x : tensor<2xf32> to tensor<2xi32>
  return %y : tensor<2xi32>
}

// CHECK-LABEL: func.func @gather_out_of_range(
// CHECK: %[[Y:.*]] = kiln.gather
// CHECK: return %[[Y]]
func.func @gather_out_of_range() -> tensor<2xi64> {
  %x = kiln.constant dense<[10, 20, 30]> : tensor<3xi64>
  %i = kiln.constant dense<[0, 3]> : tensor<2xi64>
  %y = kiln.gather %x, %i {axis = 0 : i64} : tensor<3xi64>, tensor<2xi64>
  return %y : tensor<2xi64>
}

// CHECK-LABEL: func.func @no_constant_operands(
// CHECK: %[[Y:.*]] = kiln.exp
// CHECK: %[[Z:.*]] = kiln.reduce_sum %[[Y]]
// CHECK: return %[[Z]]
func.func @no_constant_operands(%x: tensor<2x3xf32>) -> tensor<2xf32> {
  %y = kiln.exp %x : tensor<2x3xf32>
  %z = kiln.reduce_sum %y {dimensions = array<i64: 1>} : tensor<2x3xf32>
  return %z : tensor<2xf32>
}

// A matrix product absorbs transposes of its operands' last two dimensions
// into its flags (the BLAS call transposes for free).
// CHECK-LABEL: func.func @matmul_absorbs_transposes(
// CHECK-SAME: %[[A:[^:]*]]: tensor<2x16x8xf32>, %[[B:[^:]*]]: tensor<2x32x16xf32>)
// CHECK-NOT: kiln.transpose
// CHECK: %[[P:.*]] = kiln.matmul %[[A]], %[[B]] {transpose_lhs, transpose_rhs} : tensor<2x16x8xf32>, tensor<2x32x16xf32>
// CHECK: return %[[P]]
func.func @matmul_absorbs_transposes(%a: tensor<2x16x8xf32>, %b: tensor<2x32x16xf32>) -> tensor<2x8x32xf32> {
  %at = kiln.transpose %a {permutation = array<i64: 0, 2, 1>} : tensor<2x16x8xf32>
  %bt = kiln.transpose %b {permutation = array<i64: 0, 2, 1>} : tensor<2x32x16xf32>
  %p = kiln.matmul %at, %bt : tensor<2x8x16xf32>, tensor<2x16x32xf32>
  return %p : tensor<2x8x32xf32>
}

// A flag already set flips back; a permutation that moves the batch
// dimension is left alone.
// CHECK-LABEL: func.func @matmul_flag_flips(
// CHECK-SAME: %[[A:[^:]*]]: tensor<8x16xf32>, %[[B:[^:]*]]: tensor<2x16x4xf32>, %[[C:[^:]*]]: tensor<16x2x4xf32>)
// CHECK: kiln.matmul %[[A]], %{{.*}} : tensor<8x16xf32>, tensor<16x32xf32>
// CHECK: %[[T:.*]] = kiln.transpose %[[C]] {permutation = array<i64: 1, 0, 2>}
// CHECK: kiln.matmul %[[B]], %[[T]] {transpose_lhs} :
func.func @matmul_flag_flips(%a: tensor<8x16xf32>, %b: tensor<2x16x4xf32>, %c: tensor<16x2x4xf32>)
    -> (tensor<8x32xf32>, tensor<2x4x4xf32>) {
  %w = kiln.constant dense<1.0> : tensor<16x32xf32>
  %wt = kiln.transpose %w {permutation = array<i64: 1, 0>} : tensor<16x32xf32>
  %wt2 = kiln.transpose %wt {permutation = array<i64: 1, 0>} : tensor<32x16xf32>
  %p = kiln.matmul %a, %wt2 : tensor<8x16xf32>, tensor<16x32xf32>
  %ct = kiln.transpose %c {permutation = array<i64: 1, 0, 2>} : tensor<16x2x4xf32>
  %q = kiln.matmul %b, %ct {transpose_lhs} : tensor<2x16x4xf32>, tensor<2x16x4xf32>
  return %p, %q : tensor<8x32xf32>, tensor<2x4x4xf32>
}

// (A B)^T = B^T A^T, when the product has no other use.
// CHECK-LABEL: func.func @transpose_of_matmul(
// CHECK-SAME: %[[A:[^:]*]]: tensor<8x16xf32>, %[[B:[^:]*]]: tensor<16x32xf32>)
// CHECK: %[[P:.*]] = kiln.matmul %[[B]], %[[A]] {transpose_lhs, transpose_rhs} : tensor<16x32xf32>, tensor<8x16xf32>
// CHECK: return %[[P]] : tensor<32x8xf32>
func.func @transpose_of_matmul(%a: tensor<8x16xf32>, %b: tensor<16x32xf32>) -> tensor<32x8xf32> {
  %p = kiln.matmul %a, %b : tensor<8x16xf32>, tensor<16x32xf32>
  %t = kiln.transpose %p {permutation = array<i64: 1, 0>} : tensor<8x32xf32>
  return %t : tensor<32x8xf32>
}

// The negative log-likelihood of a log-softmax over the classes is
// cross-entropy, with the loss's labels, class weights, reduction and
// ignore_index.
// CHECK-LABEL: func.func @nll_loss_of_log_softmax(
// CHECK-SAME: %[[X:[^:]*]]: tensor<4x5xf32>, %[[Y:[^:]*]]: tensor<4xi64>, %[[W:[^:]*]]: tensor<5xf32>, %[[X3:[^:]*]]: tensor<2x5x3xf32>, %[[Y3:[^:]*]]: tensor<2x3xi64>)
// CHECK-NOT: kiln.log_softmax
// CHECK-NOT: kiln.nll_loss
// CHECK: %[[A:.*]] = kiln.cross_entropy %[[X]], %[[Y]] weight %[[W]] : tensor<5xf32> {ignore_index = 2 : i64, reduction = #kiln.reduction<sum>} : tensor<4x5xf32>, tensor<4xi64>
// CHECK: %[[B:.*]] = kiln.cross_entropy %[[X3]], %[[Y3]] {reduction = #kiln.reduction<none>} : tensor<2x5x3xf32>, tensor<2x3xi64>
// CHECK: return %[[A]], %[[B]]
func.func @nll_loss_of_log_softmax(%x: tensor<4x5xf32>, %y: tensor<4xi64>, %w: tensor<5xf32>,
                                   %x3: tensor<2x5x3xf32>, %y3: tensor<2x3xi64>)
    -> (tensor<f32>, tensor<2x3xf32>) {
  %p = kiln.log_softmax %x {axis = 1 : i64} : tensor<4x5xf32>
  %a = kiln.nll_loss %p, %y weight %w : tensor<5xf32> {reduction = #kiln.reduction<sum>, ignore_index = 2 : i64} : tensor<4x5xf32>, tensor<4xi64>
  %p3 = kiln.log_softmax %x3 {axis = 1 : i64} : tensor<2x5x3xf32>
  %b = kiln.nll_loss %p3, %y3 {reduction = #kiln.reduction<none>} : tensor<2x5x3xf32>, tensor<2x3xi64>
  return %a, %b : tensor<f32>, tensor<2x3xf32>
}

// Not over the classes, or its log-probabilities read elsewhere: the loss
// stays.
// CHECK-LABEL: func.func @nll_loss_kept(
// CHECK: kiln.log_softmax %{{.*}} {axis = 2 : i64} : tensor<2x5x3xf32>
// CHECK: kiln.nll_loss
// CHECK: %[[P:.*]] = kiln.log_softmax %{{.*}} {axis = 1 : i64} : tensor<4x5xf32>
// CHECK: %[[L:.*]] = kiln.nll_loss %[[P]]
// CHECK: return %{{.*}}, %[[L]], %[[P]]
func.func @nll_loss_kept(%x3: tensor<2x5x3xf32>, %y3: tensor<2x3xi64>, %x: tensor<4x5xf32>, %y: tensor<4xi64>)
    -> (tensor<f32>, tensor<f32>, tensor<4x5xf32>) {
  %p3 = kiln.log_softmax %x3 {axis = 2 : i64} : tensor<2x5x3xf32>
  %a = kiln.nll_loss %p3, %y3 : tensor<2x5x3xf32>, tensor<2x3xi64>
  %p = kiln.log_softmax %x {axis = 1 : i64} : tensor<4x5xf32>
  %b = kiln.nll_loss %p, %y : tensor<4x5xf32>, tensor<4xi64>
  return %a, %b, %p : tensor<f32>, tensor<f32>, tensor<4x5xf32>
}
