// RUN: kiln-opt %s | kiln-opt | FileCheck %s
// RUN: kiln-opt %s --mlir-print-op-generic | kiln-opt | FileCheck %s

// Round trip of every kiln op, in its custom and its generic form. Result
// types that the ops infer are checked on the values the functions return.

// CHECK: kiln.param @fc.weight : tensor<4x2xf32> = dense<5.000000e-01> : tensor<4x2xf32>
// CHECK: kiln.param @fc.bias : tensor<2xf32>{{$}}
kiln.param @fc.weight : tensor<4x2xf32> = dense<0.5> : tensor<4x2xf32>
kiln.param @fc.bias : tensor<2xf32>

// CHECK-LABEL: func.func @get_param(
// CHECK: %[[W:.*]] = kiln.get_param @fc.weight : tensor<4x2xf32>
// CHECK: %[[B:.*]] = kiln.get_param @fc.bias : tensor<2xf32>
// CHECK: return %[[W]], %[[B]]
func.func @get_param() -> (tensor<4x2xf32>, tensor<2xf32>) {
  %w = kiln.get_param @fc.weight : tensor<4x2xf32>
  %b = kiln.get_param @fc.bias : tensor<2xf32>
  return %w, %b : tensor<4x2xf32>, tensor<2xf32>
}

// CHECK-LABEL: func.func @constant(
// CHECK: %[[I:.*]] = kiln.constant dense<[1, 2]> : tensor<2xi64>
// CHECK: %[[F:.*]] = kiln.constant dense<1.500000e+00> : tensor<2x3xf32>
// CHECK: %[[B:.*]] = kiln.constant dense<[true, false]> : tensor<2xi1>
// CHECK: return %[[I]], %[[F]], %[[B]]
func.func @constant() -> (tensor<2xi64>, tensor<2x3xf32>, tensor<2xi1>) {
  %i = kiln.constant dense<[1, 2]> : tensor<2xi64>
  %f = kiln.constant dense<1.5> : tensor<2x3xf32>
  %b = kiln.constant dense<[true, false]> : tensor<2xi1>
  return %i, %f, %b : tensor<2xi64>, tensor<2x3xf32>, tensor<2xi1>
}

// CHECK-LABEL: func.func @neg(
// CHECK-SAME: %[[X:.*]]: tensor<2x3xi32>
// CHECK: %[[Y:.*]] = kiln.neg %[[X]] : tensor<2x3xi32>
// CHECK: return %[[Y]]
func.func @neg(%x: tensor<2x3xi32>) -> tensor<2x3xi32> {
  %y = kiln.neg %x : tensor<2x3xi32>
  return %y : tensor<2x3xi32>
}

// CHECK-LABEL: func.func @abs(
// CHECK-SAME: %[[X:.*]]: tensor<2x3xf16>
// CHECK: %[[Y:.*]] = kiln.abs %[[X]] : tensor<2x3xf16>
// CHECK: return %[[Y]]
func.func @abs(%x: tensor<2x3xf16>) -> tensor<2x3xf16> {
  %y = kiln.abs %x : tensor<2x3xf16>
  return %y : tensor<2x3xf16>
}

// CHECK-LABEL: func.func @sign(
// CHECK-SAME: %[[X:.*]]: tensor<4xi8>
// CHECK: %[[Y:.*]] = kiln.sign %[[X]] : tensor<4xi8>
// CHECK: return %[[Y]]
func.func @sign(%x: tensor<4xi8>) -> tensor<4xi8> {
  %y = kiln.sign %x : tensor<4xi8>
  return %y : tensor<4xi8>
}

// CHECK-LABEL: func.func @relu(
// CHECK-SAME: %[[X:.*]]: tensor<2x3xbf16>
// CHECK: %[[Y:.*]] = kiln.relu %[[X]] : tensor<2x3xbf16>
// CHECK: return %[[Y]]
func.func @relu(%x: tensor<2x3xbf16>) -> tensor<2x3xbf16> {
  %y = kiln.relu %x : tensor<2x3xbf16>
  return %y : tensor<2x3xbf16>
}

// CHECK-LABEL: func.func @exp(
// CHECK-SAME: %[[X:.*]]: tensor<2x3xf32>
// CHECK: %[[Y:.*]] = kiln.exp %[[X]] : tensor<2x3xf32>
// CHECK: return %[[Y]]
func.func @exp(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %y = kiln.exp %x : tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}

// CHECK-LABEL: func.func @log(
// CHECK-SAME: %[[X:.*]]: tensor<4xf16>
// CHECK: %[[Y:.*]] = kiln.log %[[X]] : tensor<4xf16>
// CHECK: return %[[Y]]
func.func @log(%x: tensor<4xf16>) -> tensor<4xf16> {
  %y = kiln.log %x : tensor<4xf16>
  return %y : tensor<4xf16>
}

// CHECK-LABEL: func.func @sqrt(
// CHECK-SAME: %[[X:.*]]: tensor<2x2xbf16>
// CHECK: %[[Y:.*]] = kiln.sqrt %[[X]] : tensor<2x2xbf16>
// CHECK: return %[[Y]]
func.func @sqrt(%x: tensor<2x2xbf16>) -> tensor<2x2xbf16> {
  %y = kiln.sqrt %x : tensor<2x2xbf16>
  return %y : tensor<2x2xbf16>
}

// CHECK-LABEL: func.func @rsqrt(
// CHECK-SAME: %[[X:.*]]: tensor<3xf64>
// CHECK: %[[Y:.*]] = kiln.rsqrt %[[X]] : tensor<3xf64>
// CHECK: return %[[Y]]
func.func @rsqrt(%x: tensor<3xf64>) -> tensor<3xf64> {
  %y = kiln.rsqrt %x : tensor<3xf64>
  return %y : tensor<3xf64>
}

// CHECK-LABEL: func.func @reciprocal(
// CHECK-SAME: %[[X:.*]]: tensor<2x3xf32>
// CHECK: %[[Y:.*]] = kiln.reciprocal %[[X]] : tensor<2x3xf32>
// CHECK: return %[[Y]]
func.func @reciprocal(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %y = kiln.reciprocal %x : tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}

// CHECK-LABEL: func.func @tanh(
// CHECK-SAME: %[[X:.*]]: tensor<4xf16>
// CHECK: %[[Y:.*]] = kiln.tanh %[[X]] : tensor<4xf16>
// CHECK: return %[[Y]]
func.func @tanh(%x: tensor<4xf16>) -> tensor<4xf16> {
  %y = kiln.tanh %x : tensor<4xf16>
  return %y : tensor<4xf16>
}

// CHECK-LABEL: func.func @sigmoid(
// CHECK-SAME: %[[X:.*]]: tensor<2x2xbf16>
// CHECK: %[[Y:.*]] = kiln.sigmoid %[[X]] : tensor<2x2xbf16>
// CHECK: return %[[Y]]
func.func @sigmoid(%x: tensor<2x2xbf16>) -> tensor<2x2xbf16> {
  %y = kiln.sigmoid %x : tensor<2x2xbf16>
  return %y : tensor<2x2xbf16>
}

// CHECK-LABEL: func.func @softplus(
// CHECK-SAME: %[[X:.*]]: tensor<3xf64>
// CHECK: %[[Y:.*]] = kiln.softplus %[[X]] : tensor<3xf64>
// CHECK: return %[[Y]]
func.func @softplus(%x: tensor<3xf64>) -> tensor<3xf64> {
  %y = kiln.softplus %x : tensor<3xf64>
  return %y : tensor<3xf64>
}

// CHECK-LABEL: func.func @softsign(
// CHECK-SAME: %[[X:.*]]: tensor<2x3xf32>
// CHECK: %[[Y:.*]] = kiln.softsign %[[X]] : tensor<2x3xf32>
// CHECK: return %[[Y]]
func.func @softsign(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %y = kiln.softsign %x : tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}

// CHECK-LABEL: func.func @erf(
// CHECK-SAME: %[[X:.*]]: tensor<4xf16>
// CHECK: %[[Y:.*]] = kiln.erf %[[X]] : tensor<4xf16>
// CHECK: return %[[Y]]
func.func @erf(%x: tensor<4xf16>) -> tensor<4xf16> {
  %y = kiln.erf %x : tensor<4xf16>
  return %y : tensor<4xf16>
}

// CHECK-LABEL: func.func @sin(
// CHECK-SAME: %[[X:.*]]: tensor<2x2xbf16>
// CHECK: %[[Y:.*]] = kiln.sin %[[X]] : tensor<2x2xbf16>
// CHECK: return %[[Y]]
func.func @sin(%x: tensor<2x2xbf16>) -> tensor<2x2xbf16> {
  %y = kiln.sin %x : tensor<2x2xbf16>
  return %y : tensor<2x2xbf16>
}

// CHECK-LABEL: func.func @cos(
// CHECK-SAME: %[[X:.*]]: tensor<3xf64>
// CHECK: %[[Y:.*]] = kiln.cos %[[X]] : tensor<3xf64>
// CHECK: return %[[Y]]
func.func @cos(%x: tensor<3xf64>) -> tensor<3xf64> {
  %y = kiln.cos %x : tensor<3xf64>
  return %y : tensor<3xf64>
}

// CHECK-LABEL: func.func @tan(
// CHECK-SAME: %[[X:.*]]: tensor<2x3xf32>
// CHECK: %[[Y:.*]] = kiln.tan %[[X]] : tensor<2x3xf32>
// CHECK: return %[[Y]]
func.func @tan(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %y = kiln.tan %x : tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}

// CHECK-LABEL: func.func @asin(
// CHECK-SAME: %[[X:.*]]: tensor<4xf16>
// CHECK: %[[Y:.*]] = kiln.asin %[[X]] : tensor<4xf16>
// CHECK: return %[[Y]]
func.func @asin(%x: tensor<4xf16>) -> tensor<4xf16> {
  %y = kiln.asin %x : tensor<4xf16>
  return %y : tensor<4xf16>
}

// CHECK-LABEL: func.func @acos(
// CHECK-SAME: %[[X:.*]]: tensor<2x2xbf16>
// CHECK: %[[Y:.*]] = kiln.acos %[[X]] : tensor<2x2xbf16>
// CHECK: return %[[Y]]
func.func @acos(%x: tensor<2x2xbf16>) -> tensor<2x2xbf16> {
  %y = kiln.acos %x : tensor<2x2xbf16>
  return %y : tensor<2x2xbf16>
}

// CHECK-LABEL: func.func @atan(
// CHECK-SAME: %[[X:.*]]: tensor<3xf64>
// CHECK: %[[Y:.*]] = kiln.atan %[[X]] : tensor<3xf64>
// CHECK: return %[[Y]]
func.func @atan(%x: tensor<3xf64>) -> tensor<3xf64> {
  %y = kiln.atan %x : tensor<3xf64>
  return %y : tensor<3xf64>
}

// CHECK-LABEL: func.func @sinh(
// CHECK-SAME: %[[X:.*]]: tensor<2x3xf32>
// CHECK: %[[Y:.*]] = kiln.sinh %[[X]] : tensor<2x3xf32>
// CHECK: return %[[Y]]
func.func @sinh(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %y = kiln.sinh %x : tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}

// CHECK-LABEL: func.func @cosh(
// CHECK-SAME: %[[X:.*]]: tensor<4xf16>
// CHECK: %[[Y:.*]] = kiln.cosh %[[X]] : tensor<4xf16>
// CHECK: return %[[Y]]
func.func @cosh(%x: tensor<4xf16>) -> tensor<4xf16> {
  %y = kiln.cosh %x : tensor<4xf16>
  return %y : tensor<4xf16>
}

// CHECK-LABEL: func.func @asinh(
// CHECK-SAME: %[[X:.*]]: tensor<2x2xbf16>
// CHECK: %[[Y:.*]] = kiln.asinh %[[X]] : tensor<2x2xbf16>
// CHECK: return %[[Y]]
func.func @asinh(%x: tensor<2x2xbf16>) -> tensor<2x2xbf16> {
  %y = kiln.asinh %x : tensor<2x2xbf16>
  return %y : tensor<2x2xbf16>
}

// CHECK-LABEL: func.func @acosh(
// CHECK-SAME: %[[X:.*]]: tensor<3xf64>
// CHECK: %[[Y:.*]] = kiln.acosh %[[X]] : tensor<3xf64>
// CHECK: return %[[Y]]
func.func @acosh(%x: tensor<3xf64>) -> tensor<3xf64> {
  %y = kiln.acosh %x : tensor<3xf64>
  return %y : tensor<3xf64>
}

// CHECK-LABEL: func.func @atanh(
// CHECK-SAME: %[[X:.*]]: tensor<2x3xf32>
// CHECK: %[[Y:.*]] = kiln.atanh %[[X]] : tensor<2x3xf32>
// CHECK: return %[[Y]]
func.func @atanh(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %y = kiln.atanh %x : tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}

// CHECK-LABEL: func.func @floor(
// CHECK-SAME: %[[X:.*]]: tensor<4xf16>
// CHECK: %[[Y:.*]] = kiln.floor %[[X]] : tensor<4xf16>
// CHECK: return %[[Y]]
func.func @floor(%x: tensor<4xf16>) -> tensor<4xf16> {
  %y = kiln.floor %x : tensor<4xf16>
  return %y : tensor<4xf16>
}

// CHECK-LABEL: func.func @ceil(
// CHECK-SAME: %[[X:.*]]: tensor<2x2xbf16>
// CHECK: %[[Y:.*]] = kiln.ceil %[[X]] : tensor<2x2xbf16>
// CHECK: return %[[Y]]
func.func @ceil(%x: tensor<2x2xbf16>) -> tensor<2x2xbf16> {
  %y = kiln.ceil %x : tensor<2x2xbf16>
  return %y : tensor<2x2xbf16>
}

// CHECK-LABEL: func.func @round(
// CHECK-SAME: %[[X:.*]]: tensor<3xf64>
// CHECK: %[[Y:.*]] = kiln.round %[[X]] : tensor<3xf64>
// CHECK: return %[[Y]]
func.func @round(%x: tensor<3xf64>) -> tensor<3xf64> {
  %y = kiln.round %x : tensor<3xf64>
  return %y : tensor<3xf64>
}

// CHECK-LABEL: func.func @hard_swish(
// CHECK-SAME: %[[X:.*]]: tensor<2x3xf32>
// CHECK: %[[Y:.*]] = kiln.hard_swish %[[X]] : tensor<2x3xf32>
// CHECK: return %[[Y]]
func.func @hard_swish(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %y = kiln.hard_swish %x : tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}
// CHECK-LABEL: func.func @not(
// CHECK-SAME: %[[X:.*]]: tensor<4xi1>
// CHECK: %[[Y:.*]] = kiln.not %[[X]] : tensor<4xi1>
// CHECK: return %[[Y]]
func.func @not(%x: tensor<4xi1>) -> tensor<4xi1> {
  %y = kiln.not %x : tensor<4xi1>
  return %y : tensor<4xi1>
}

// CHECK-LABEL: func.func @gelu(
// CHECK: %[[E:.*]] = kiln.gelu %{{.*}} : tensor<8xf32>
// CHECK: %[[T:.*]] = kiln.gelu %{{.*}} {approximate = #kiln.gelu_approximation<tanh>} : tensor<8xf32>
// CHECK: return %[[E]], %[[T]]
func.func @gelu(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %e = kiln.gelu %x : tensor<8xf32>
  %t = kiln.gelu %x {approximate = #kiln.gelu_approximation<tanh>} : tensor<8xf32>
  return %e, %t : tensor<8xf32>, tensor<8xf32>
}

// CHECK-LABEL: func.func @leaky_relu(
// CHECK: kiln.leaky_relu %{{.*}} : tensor<8xf32>
// CHECK: kiln.leaky_relu %{{.*}} {alpha = 1.000000e-01 : f64} : tensor<8xf16>
func.func @leaky_relu(%x: tensor<8xf32>, %h: tensor<8xf16>) -> (tensor<8xf32>, tensor<8xf16>) {
  %a = kiln.leaky_relu %x : tensor<8xf32>
  %b = kiln.leaky_relu %h {alpha = 0.1 : f64} : tensor<8xf16>
  return %a, %b : tensor<8xf32>, tensor<8xf16>
}

// CHECK-LABEL: func.func @elu(
// CHECK: kiln.elu %{{.*}} {alpha = 5.000000e-01 : f64} : tensor<8xf32>
func.func @elu(%x: tensor<8xf32>) -> tensor<8xf32> {
  %y = kiln.elu %x {alpha = 0.5 : f64} : tensor<8xf32>
  return %y : tensor<8xf32>
}

// CHECK-LABEL: func.func @celu(
// CHECK: kiln.celu %{{.*}} {alpha = 2.000000e+00 : f64} : tensor<8xbf16>
func.func @celu(%x: tensor<8xbf16>) -> tensor<8xbf16> {
  %y = kiln.celu %x {alpha = 2.0 : f64} : tensor<8xbf16>
  return %y : tensor<8xbf16>
}

// CHECK-LABEL: func.func @selu(
// CHECK: kiln.selu %{{.*}} : tensor<8xf32>
// CHECK: kiln.selu %{{.*}} {alpha = 1.500000e+00 : f64, gamma = 2.000000e+00 : f64} : tensor<8xf32>
func.func @selu(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %a = kiln.selu %x : tensor<8xf32>
  %b = kiln.selu %x {alpha = 1.5 : f64, gamma = 2.0 : f64} : tensor<8xf32>
  return %a, %b : tensor<8xf32>, tensor<8xf32>
}

// CHECK-LABEL: func.func @hard_sigmoid(
// CHECK: kiln.hard_sigmoid %{{.*}} {alpha = 2.500000e-01 : f64, beta = 7.500000e-01 : f64} : tensor<8xf64>
func.func @hard_sigmoid(%x: tensor<8xf64>) -> tensor<8xf64> {
  %y = kiln.hard_sigmoid %x {alpha = 0.25 : f64, beta = 0.75 : f64} : tensor<8xf64>
  return %y : tensor<8xf64>
}

// CHECK-LABEL: func.func @thresholded_relu(
// CHECK: kiln.thresholded_relu %{{.*}} {alpha = 2.000000e+00 : f64} : tensor<8xf32>
func.func @thresholded_relu(%x: tensor<8xf32>) -> tensor<8xf32> {
  %y = kiln.thresholded_relu %x {alpha = 2.0 : f64} : tensor<8xf32>
  return %y : tensor<8xf32>
}

// CHECK-LABEL: func.func @is_nan(
// CHECK-SAME: %[[X:.*]]: tensor<2x4xf32>
// CHECK: %[[Y:.*]] = kiln.is_nan %[[X]] : tensor<2x4xf32>
// CHECK: return %[[Y]] : tensor<2x4xi1>
func.func @is_nan(%x: tensor<2x4xf32>) -> tensor<2x4xi1> {
  %y = kiln.is_nan %x : tensor<2x4xf32>
  return %y : tensor<2x4xi1>
}

// CHECK-LABEL: func.func @is_inf(
// CHECK-SAME: %[[X:.*]]: tensor<4xf16>
// CHECK: %[[Y:.*]] = kiln.is_inf %[[X]] : tensor<4xf16>
// CHECK: return %[[Y]] : tensor<4xi1>
func.func @is_inf(%x: tensor<4xf16>) -> tensor<4xi1> {
  %y = kiln.is_inf %x : tensor<4xf16>
  return %y : tensor<4xi1>
}

// CHECK-LABEL: func.func @add(
// CHECK-SAME: %[[A:.*]]: tensor<2x3xf32>, %[[B:.*]]: tensor<2x3xf32>
// CHECK: %[[Y:.*]] = kiln.add %[[A]], %[[B]] : tensor<2x3xf32>
// CHECK: return %[[Y]]
func.func @add(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %y = kiln.add %a, %b : tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}

// CHECK-LABEL: func.func @sub(
// CHECK-SAME: %[[A:.*]]: tensor<4xi64>, %[[B:.*]]: tensor<4xi64>
// CHECK: %[[Y:.*]] = kiln.sub %[[A]], %[[B]] : tensor<4xi64>
// CHECK: return %[[Y]]
func.func @sub(%a: tensor<4xi64>, %b: tensor<4xi64>) -> tensor<4xi64> {
  %y = kiln.sub %a, %b : tensor<4xi64>
  return %y : tensor<4xi64>
}

// CHECK-LABEL: func.func @mul(
// CHECK-SAME: %[[A:.*]]: tensor<2x2xbf16>, %[[B:.*]]: tensor<2x2xbf16>
// CHECK: %[[Y:.*]] = kiln.mul %[[A]], %[[B]] : tensor<2x2xbf16>
// CHECK: return %[[Y]]
func.func @mul(%a: tensor<2x2xbf16>, %b: tensor<2x2xbf16>) -> tensor<2x2xbf16> {
  %y = kiln.mul %a, %b : tensor<2x2xbf16>
  return %y : tensor<2x2xbf16>
}

// CHECK-LABEL: func.func @div(
// CHECK-SAME: %[[A:.*]]: tensor<4xi32>, %[[B:.*]]: tensor<4xi32>
// CHECK: %[[Y:.*]] = kiln.div %[[A]], %[[B]] : tensor<4xi32>
// CHECK: return %[[Y]]
func.func @div(%a: tensor<4xi32>, %b: tensor<4xi32>) -> tensor<4xi32> {
  %y = kiln.div %a, %b : tensor<4xi32>
  return %y : tensor<4xi32>
}

// CHECK-LABEL: func.func @pow(
// CHECK-SAME: %[[A:.*]]: tensor<4xf64>, %[[B:.*]]: tensor<4xf64>
// CHECK: %[[Y:.*]] = kiln.pow %[[A]], %[[B]] : tensor<4xf64>
// CHECK: return %[[Y]]
func.func @pow(%a: tensor<4xf64>, %b: tensor<4xf64>) -> tensor<4xf64> {
  %y = kiln.pow %a, %b : tensor<4xf64>
  return %y : tensor<4xf64>
}

// CHECK-LABEL: func.func @max(
// CHECK-SAME: %[[A:.*]]: tensor<4xi8>, %[[B:.*]]: tensor<4xi8>
// CHECK: %[[Y:.*]] = kiln.max %[[A]], %[[B]] : tensor<4xi8>
// CHECK: return %[[Y]]
func.func @max(%a: tensor<4xi8>, %b: tensor<4xi8>) -> tensor<4xi8> {
  %y = kiln.max %a, %b : tensor<4xi8>
  return %y : tensor<4xi8>
}

// CHECK-LABEL: func.func @min(
// CHECK-SAME: %[[A:.*]]: tensor<3xf16>, %[[B:.*]]: tensor<3xf16>
// CHECK: %[[Y:.*]] = kiln.min %[[A]], %[[B]] : tensor<3xf16>
// CHECK: return %[[Y]]
func.func @min(%a: tensor<3xf16>, %b: tensor<3xf16>) -> tensor<3xf16> {
  %y = kiln.min %a, %b : tensor<3xf16>
  return %y : tensor<3xf16>
}

// CHECK-LABEL: func.func @and(
// CHECK-SAME: %[[A:.*]]: tensor<4xi1>, %[[B:.*]]: tensor<4xi1>
// CHECK: %[[Y:.*]] = kiln.and %[[A]], %[[B]] : tensor<4xi1>
// CHECK: return %[[Y]]
func.func @and(%a: tensor<4xi1>, %b: tensor<4xi1>) -> tensor<4xi1> {
  %y = kiln.and %a, %b : tensor<4xi1>
  return %y : tensor<4xi1>
}

// CHECK-LABEL: func.func @or(
// CHECK-SAME: %[[A:.*]]: tensor<4xi1>, %[[B:.*]]: tensor<4xi1>
// CHECK: %[[Y:.*]] = kiln.or %[[A]], %[[B]] : tensor<4xi1>
// CHECK: return %[[Y]]
func.func @or(%a: tensor<4xi1>, %b: tensor<4xi1>) -> tensor<4xi1> {
  %y = kiln.or %a, %b : tensor<4xi1>
  return %y : tensor<4xi1>
}

// CHECK-LABEL: func.func @xor(
// CHECK-SAME: %[[A:.*]]: tensor<2x2xi1>, %[[B:.*]]: tensor<2x2xi1>
// CHECK: %[[Y:.*]] = kiln.xor %[[A]], %[[B]] : tensor<2x2xi1>
// CHECK: return %[[Y]]
func.func @xor(%a: tensor<2x2xi1>, %b: tensor<2x2xi1>) -> tensor<2x2xi1> {
  %y = kiln.xor %a, %b : tensor<2x2xi1>
  return %y : tensor<2x2xi1>
}
// CHECK-LABEL: func.func @rem(
// CHECK: kiln.rem %{{.*}}, %{{.*}} : tensor<4xi32>
// CHECK: kiln.rem %{{.*}}, %{{.*}} {fmod} : tensor<4xf32>
func.func @rem(%a: tensor<4xi32>, %b: tensor<4xi32>, %x: tensor<4xf32>, %y: tensor<4xf32>) -> (tensor<4xi32>, tensor<4xf32>) {
  %r = kiln.rem %a, %b : tensor<4xi32>
  %f = kiln.rem %x, %y {fmod} : tensor<4xf32>
  return %r, %f : tensor<4xi32>, tensor<4xf32>
}

// CHECK-LABEL: func.func @compare(
// CHECK-SAME: %[[X:.*]]: tensor<4xf32>, %[[Y:.*]]: tensor<4xf32>, %[[I:.*]]: tensor<2x3xi64>, %[[B:.*]]: tensor<4xi1>
// CHECK: %[[LT:.*]] = kiln.compare <lt>, %[[X]], %[[Y]] : tensor<4xf32>
// CHECK: %[[GE:.*]] = kiln.compare <ge>, %[[I]], %[[I]] : tensor<2x3xi64>
// CHECK: %[[EQ:.*]] = kiln.compare <eq>, %[[B]], %[[B]] : tensor<4xi1>
// CHECK: %[[NE:.*]] = kiln.compare <ne>, %[[X]], %[[Y]] : tensor<4xf32>
// CHECK: %[[LE:.*]] = kiln.compare <le>, %[[X]], %[[Y]] : tensor<4xf32>
// CHECK: %[[GT:.*]] = kiln.compare <gt>, %[[X]], %[[Y]] : tensor<4xf32>
// CHECK: return %[[LT]], %[[GE]], %[[EQ]], %[[NE]], %[[LE]], %[[GT]] : tensor<4xi1>, tensor<2x3xi1>, tensor<4xi1>, tensor<4xi1>, tensor<4xi1>, tensor<4xi1>
func.func @compare(%x: tensor<4xf32>, %y: tensor<4xf32>, %i: tensor<2x3xi64>, %b: tensor<4xi1>)
    -> (tensor<4xi1>, tensor<2x3xi1>, tensor<4xi1>, tensor<4xi1>, tensor<4xi1>, tensor<4xi1>) {
  %lt = kiln.compare <lt>, %x, %y : tensor<4xf32>
  %ge = kiln.compare <ge>, %i, %i : tensor<2x3xi64>
  %eq = kiln.compare <eq>, %b, %b : tensor<4xi1>
  %ne = kiln.compare <ne>, %x, %y : tensor<4xf32>
  %le = kiln.compare <le>, %x, %y : tensor<4xf32>
  %gt = kiln.compare <gt>, %x, %y : tensor<4xf32>
  return %lt, %ge, %eq, %ne, %le, %gt : tensor<4xi1>, tensor<2x3xi1>, tensor<4xi1>, tensor<4xi1>, tensor<4xi1>, tensor<4xi1>
}

// CHECK-LABEL: func.func @select(
// CHECK-SAME: %[[M:.*]]: tensor<4xi1>, %[[X:.*]]: tensor<4xf32>, %[[Y:.*]]: tensor<4xf32>
// CHECK: %[[Z:.*]] = kiln.select %[[M]], %[[X]], %[[Y]] : tensor<4xi1>, tensor<4xf32>
// CHECK: return %[[Z]]
func.func @select(%m: tensor<4xi1>, %x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  %z = kiln.select %m, %x, %y : tensor<4xi1>, tensor<4xf32>
  return %z : tensor<4xf32>
}

// CHECK-LABEL: func.func @cast(
// CHECK: kiln.cast %{{.*}} : tensor<4xf32> to tensor<4xi64>
// CHECK: kiln.cast %{{.*}} : tensor<2x2xi1> to tensor<2x2xbf16>
func.func @cast(%x: tensor<4xf32>, %b: tensor<2x2xi1>) -> (tensor<4xi64>, tensor<2x2xbf16>) {
  %i = kiln.cast %x : tensor<4xf32> to tensor<4xi64>
  %f = kiln.cast %b : tensor<2x2xi1> to tensor<2x2xbf16>
  return %i, %f : tensor<4xi64>, tensor<2x2xbf16>
}

// CHECK-LABEL: func.func @reshape(
// CHECK: kiln.reshape %{{.*}} : tensor<2x3xf32> to tensor<6xf32>
// CHECK: kiln.reshape %{{.*}} : tensor<2x3xf32> to tensor<3x1x2xf32>
func.func @reshape(%x: tensor<2x3xf32>) -> (tensor<6xf32>, tensor<3x1x2xf32>) {
  %a = kiln.reshape %x : tensor<2x3xf32> to tensor<6xf32>
  %b = kiln.reshape %x : tensor<2x3xf32> to tensor<3x1x2xf32>
  return %a, %b : tensor<6xf32>, tensor<3x1x2xf32>
}

// CHECK-LABEL: func.func @broadcast(
// CHECK: kiln.broadcast %{{.*}} : tensor<1x4xf32> to tensor<3x2x4xf32>
// CHECK: kiln.broadcast %{{.*}} : tensor<i64> to tensor<2x2xi64>
func.func @broadcast(%x: tensor<1x4xf32>, %s: tensor<i64>) -> (tensor<3x2x4xf32>, tensor<2x2xi64>) {
  %a = kiln.broadcast %x : tensor<1x4xf32> to tensor<3x2x4xf32>
  %b = kiln.broadcast %s : tensor<i64> to tensor<2x2xi64>
  return %a, %b : tensor<3x2x4xf32>, tensor<2x2xi64>
}

// CHECK-LABEL: func.func @transpose(
// CHECK-SAME: %[[X:.*]]: tensor<2x3x4xf32>
// CHECK: %[[Y:.*]] = kiln.transpose %[[X]] {permutation = array<i64: 2, 0, 1>} : tensor<2x3x4xf32>
// CHECK: return %[[Y]] : tensor<4x2x3xf32>
func.func @transpose(%x: tensor<2x3x4xf32>) -> tensor<4x2x3xf32> {
  %y = kiln.transpose %x {permutation = array<i64: 2, 0, 1>} : tensor<2x3x4xf32>
  return %y : tensor<4x2x3xf32>
}

// CHECK-LABEL: func.func @slice(
// CHECK-SAME: %[[X:.*]]: tensor<5x7xf32>
// CHECK: %[[Y:.*]] = kiln.slice %[[X]] {limit = array<i64: 5, 7>, start = array<i64: 1, 0>, stride = array<i64: 2, 3>} : tensor<5x7xf32>
// CHECK: %[[E:.*]] = kiln.slice %[[X]] {limit = array<i64: 2, 7>, start = array<i64: 2, 0>, stride = array<i64: 1, 1>} : tensor<5x7xf32>
// CHECK: return %[[Y]], %[[E]] : tensor<2x3xf32>, tensor<0x7xf32>
func.func @slice(%x: tensor<5x7xf32>) -> (tensor<2x3xf32>, tensor<0x7xf32>) {
  %y = kiln.slice %x {start = array<i64: 1, 0>, limit = array<i64: 5, 7>, stride = array<i64: 2, 3>} : tensor<5x7xf32>
  %e = kiln.slice %x {start = array<i64: 2, 0>, limit = array<i64: 2, 7>, stride = array<i64: 1, 1>} : tensor<5x7xf32>
  return %y, %e : tensor<2x3xf32>, tensor<0x7xf32>
}

// CHECK-LABEL: func.func @reverse(
// CHECK: kiln.reverse %{{.*}} {dimensions = array<i64: 0, 1>} : tensor<4x3xf32>
func.func @reverse(%x: tensor<4x3xf32>) -> tensor<4x3xf32> {
  %y = kiln.reverse %x {dimensions = array<i64: 0, 1>} : tensor<4x3xf32>
  return %y : tensor<4x3xf32>
}

// CHECK-LABEL: func.func @concat(
// CHECK-SAME: %[[A:.*]]: tensor<2x3xf32>, %[[B:.*]]: tensor<1x3xf32>, %[[C:.*]]: tensor<4x3xf32>
// CHECK: %[[Y:.*]] = kiln.concat %[[A]], %[[B]], %[[C]] {axis = 0 : i64} : tensor<2x3xf32>, tensor<1x3xf32>, tensor<4x3xf32>
// CHECK: %[[Z:.*]] = kiln.concat %[[A]], %[[A]] {axis = 1 : i64} : tensor<2x3xf32>, tensor<2x3xf32>
// CHECK: return %[[Y]], %[[Z]] : tensor<7x3xf32>, tensor<2x6xf32>
func.func @concat(%a: tensor<2x3xf32>, %b: tensor<1x3xf32>, %c: tensor<4x3xf32>) -> (tensor<7x3xf32>, tensor<2x6xf32>) {
  %y = kiln.concat %a, %b, %c {axis = 0 : i64} : tensor<2x3xf32>, tensor<1x3xf32>, tensor<4x3xf32>
  %z = kiln.concat %a, %a {axis = 1 : i64} : tensor<2x3xf32>, tensor<2x3xf32>
  return %y, %z : tensor<7x3xf32>, tensor<2x6xf32>
}

// CHECK-LABEL: func.func @split(
// CHECK-SAME: %[[X:.*]]: tensor<3x6xf32>
// CHECK: %[[R:.*]]:3 = kiln.split %[[X]] {axis = 1 : i64, sizes = array<i64: 2, 1, 3>} : tensor<3x6xf32>
// CHECK: return %[[R]]#0, %[[R]]#1, %[[R]]#2 : tensor<3x2xf32>, tensor<3x1xf32>, tensor<3x3xf32>
func.func @split(%x: tensor<3x6xf32>) -> (tensor<3x2xf32>, tensor<3x1xf32>, tensor<3x3xf32>) {
  %a, %b, %c = kiln.split %x {axis = 1 : i64, sizes = array<i64: 2, 1, 3>} : tensor<3x6xf32>
  return %a, %b, %c : tensor<3x2xf32>, tensor<3x1xf32>, tensor<3x3xf32>
}

// CHECK-LABEL: func.func @pad(
// CHECK: %[[C:.*]] = kiln.pad %{{.*}} {high = array<i64: 0, 2>, low = array<i64: 0, 1>, value = 1.500000e+00 : f64} : tensor<2x3xf32>
// CHECK: %[[R:.*]] = kiln.pad %{{.*}} {high = array<i64: 2, 0>, low = array<i64: 1, 2>, mode = #kiln.pad_mode<reflect>} : tensor<3x4xf32>
// CHECK: %[[E:.*]] = kiln.pad %{{.*}} {high = array<i64: 3>, low = array<i64: 0>, mode = #kiln.pad_mode<edge>} : tensor<1xi64>
// CHECK: return %[[C]], %[[R]], %[[E]] : tensor<2x6xf32>, tensor<6x6xf32>, tensor<4xi64>
func.func @pad(%x: tensor<2x3xf32>, %y: tensor<3x4xf32>, %z: tensor<1xi64>) -> (tensor<2x6xf32>, tensor<6x6xf32>, tensor<4xi64>) {
  %c = kiln.pad %x {low = array<i64: 0, 1>, high = array<i64: 0, 2>, mode = #kiln.pad_mode<constant>, value = 1.5 : f64} : tensor<2x3xf32>
  %r = kiln.pad %y {low = array<i64: 1, 2>, high = array<i64: 2, 0>, mode = #kiln.pad_mode<reflect>} : tensor<3x4xf32>
  %e = kiln.pad %z {low = array<i64: 0>, high = array<i64: 3>, mode = #kiln.pad_mode<edge>} : tensor<1xi64>
  return %c, %r, %e : tensor<2x6xf32>, tensor<6x6xf32>, tensor<4xi64>
}

// CHECK-LABEL: func.func @tile(
// CHECK: %[[Y:.*]] = kiln.tile %{{.*}} {multiples = array<i64: 2, 1, 3>} : tensor<2x3x1xi1>
// CHECK: return %[[Y]] : tensor<4x3x3xi1>
func.func @tile(%x: tensor<2x3x1xi1>) -> tensor<4x3x3xi1> {
  %y = kiln.tile %x {multiples = array<i64: 2, 1, 3>} : tensor<2x3x1xi1>
  return %y : tensor<4x3x3xi1>
}

// CHECK-LABEL: func.func @iota(
// CHECK: kiln.iota {dimension = 0 : i64} : tensor<5xi64>
// CHECK: kiln.iota {dimension = 1 : i64, start = 1.000000e+00 : f64, step = 5.000000e-01 : f64} : tensor<2x3xf32>
func.func @iota() -> (tensor<5xi64>, tensor<2x3xf32>) {
  %a = kiln.iota {dimension = 0 : i64} : tensor<5xi64>
  %b = kiln.iota {dimension = 1 : i64, start = 1.0 : f64, step = 0.5 : f64} : tensor<2x3xf32>
  return %a, %b : tensor<5xi64>, tensor<2x3xf32>
}

// CHECK-LABEL: func.func @gather(
// CHECK-SAME: %[[X:.*]]: tensor<5x6x7xf32>, %[[I:.*]]: tensor<2x3xi64>, %[[S:.*]]: tensor<i32>
// CHECK: %[[A:.*]] = kiln.gather %[[X]], %[[I]] {axis = 1 : i64} : tensor<5x6x7xf32>, tensor<2x3xi64>
// CHECK: %[[B:.*]] = kiln.gather %[[X]], %[[S]] {axis = 2 : i64} : tensor<5x6x7xf32>, tensor<i32>
// CHECK: return %[[A]], %[[B]] : tensor<5x2x3x7xf32>, tensor<5x6xf32>
func.func @gather(%x: tensor<5x6x7xf32>, %i: tensor<2x3xi64>, %s: tensor<i32>) -> (tensor<5x2x3x7xf32>, tensor<5x6xf32>) {
  %a = kiln.gather %x, %i {axis = 1 : i64} : tensor<5x6x7xf32>, tensor<2x3xi64>
  %b = kiln.gather %x, %s {axis = 2 : i64} : tensor<5x6x7xf32>, tensor<i32>
  return %a, %b : tensor<5x2x3x7xf32>, tensor<5x6xf32>
}

// CHECK-LABEL: func.func @gather_elements(
// CHECK: %[[Y:.*]] = kiln.gather_elements %{{.*}}, %{{.*}} {axis = 1 : i64} : tensor<3x4xf32>, tensor<3x2xi64>
// CHECK: return %[[Y]] : tensor<3x2xf32>
func.func @gather_elements(%x: tensor<3x4xf32>, %i: tensor<3x2xi64>) -> tensor<3x2xf32> {
  %y = kiln.gather_elements %x, %i {axis = 1 : i64} : tensor<3x4xf32>, tensor<3x2xi64>
  return %y : tensor<3x2xf32>
}

// CHECK-LABEL: func.func @gather_nd(
// CHECK: %[[A:.*]] = kiln.gather_nd %{{.*}}, %{{.*}} : tensor<3x4x5xf32>, tensor<2x6x2xi64>
// CHECK: %[[B:.*]] = kiln.gather_nd %{{.*}}, %{{.*}} {batch_dims = 1 : i64} : tensor<2x2x2xi32>, tensor<2x1xi64>
// CHECK: return %[[A]], %[[B]] : tensor<2x6x5xf32>, tensor<2x2xi32>
func.func @gather_nd(%x: tensor<3x4x5xf32>, %i: tensor<2x6x2xi64>, %y: tensor<2x2x2xi32>, %j: tensor<2x1xi64>) -> (tensor<2x6x5xf32>, tensor<2x2xi32>) {
  %a = kiln.gather_nd %x, %i : tensor<3x4x5xf32>, tensor<2x6x2xi64>
  %b = kiln.gather_nd %y, %j {batch_dims = 1 : i64} : tensor<2x2x2xi32>, tensor<2x1xi64>
  return %a, %b : tensor<2x6x5xf32>, tensor<2x2xi32>
}

// CHECK-LABEL: func.func @scatter_elements(
// CHECK: kiln.scatter_elements %{{.*}}, %{{.*}}, %{{.*}} {axis = 0 : i64} : tensor<3x3xf32>, tensor<2x3xi64>, tensor<2x3xf32>
// CHECK: kiln.scatter_elements %{{.*}}, %{{.*}}, %{{.*}} {axis = 1 : i64, reduction = #kiln.reduction<add>} : tensor<3x3xf32>, tensor<2x3xi64>, tensor<2x3xf32>
func.func @scatter_elements(%x: tensor<3x3xf32>, %i: tensor<2x3xi64>, %u: tensor<2x3xf32>) -> (tensor<3x3xf32>, tensor<3x3xf32>) {
  %a = kiln.scatter_elements %x, %i, %u {axis = 0 : i64} : tensor<3x3xf32>, tensor<2x3xi64>, tensor<2x3xf32>
  %b = kiln.scatter_elements %x, %i, %u {axis = 1 : i64, reduction = #kiln.reduction<add>} : tensor<3x3xf32>, tensor<2x3xi64>, tensor<2x3xf32>
  return %a, %b : tensor<3x3xf32>, tensor<3x3xf32>
}

// CHECK-LABEL: func.func @scatter_nd(
// CHECK: kiln.scatter_nd %{{.*}}, %{{.*}}, %{{.*}} : tensor<8xf32>, tensor<4x1xi64>, tensor<4xf32>
// CHECK: kiln.scatter_nd %{{.*}}, %{{.*}}, %{{.*}} {reduction = #kiln.reduction<max>} : tensor<4x5x6xi64>, tensor<3x2xi32>, tensor<3x6xi64>
func.func @scatter_nd(%x: tensor<8xf32>, %i: tensor<4x1xi64>, %u: tensor<4xf32>, %y: tensor<4x5x6xi64>, %j: tensor<3x2xi32>, %v: tensor<3x6xi64>) -> (tensor<8xf32>, tensor<4x5x6xi64>) {
  %a = kiln.scatter_nd %x, %i, %u : tensor<8xf32>, tensor<4x1xi64>, tensor<4xf32>
  %b = kiln.scatter_nd %y, %j, %v {reduction = #kiln.reduction<max>} : tensor<4x5x6xi64>, tensor<3x2xi32>, tensor<3x6xi64>
  return %a, %b : tensor<8xf32>, tensor<4x5x6xi64>
}

// CHECK-LABEL: func.func @trilu(
// CHECK: kiln.trilu %{{.*}} {diagonal = 1 : i64, upper} : tensor<4x5xf32>
// CHECK: kiln.trilu %{{.*}} : tensor<2x3x3xi64>
func.func @trilu(%x: tensor<4x5xf32>, %y: tensor<2x3x3xi64>) -> (tensor<4x5xf32>, tensor<2x3x3xi64>) {
  %a = kiln.trilu %x {upper, diagonal = 1 : i64} : tensor<4x5xf32>
  %b = kiln.trilu %y : tensor<2x3x3xi64>
  return %a, %b : tensor<4x5xf32>, tensor<2x3x3xi64>
}

// CHECK-LABEL: func.func @cumsum(
// CHECK: kiln.cumsum %{{.*}} {axis = 1 : i64, exclusive, reverse} : tensor<2x5xf32>
// CHECK: kiln.cumsum %{{.*}} {axis = 0 : i64} : tensor<6xi32>
func.func @cumsum(%x: tensor<2x5xf32>, %y: tensor<6xi32>) -> (tensor<2x5xf32>, tensor<6xi32>) {
  %a = kiln.cumsum %x {axis = 1 : i64, exclusive, reverse} : tensor<2x5xf32>
  %b = kiln.cumsum %y {axis = 0 : i64} : tensor<6xi32>
  return %a, %b : tensor<2x5xf32>, tensor<6xi32>
}

// CHECK-LABEL: func.func @top_k(
// CHECK: %[[V:.*]], %[[I:.*]] = kiln.top_k %{{.*}} {axis = 1 : i64, k = 2 : i64, largest} : tensor<3x4xf32>
// CHECK: %[[W:.*]], %[[J:.*]] = kiln.top_k %{{.*}} {axis = 0 : i64, k = 1 : i64} : tensor<3x4xi32>
// CHECK: return %[[V]], %[[I]], %[[W]], %[[J]] : tensor<3x2xf32>, tensor<3x2xi64>, tensor<1x4xi32>, tensor<1x4xi64>
func.func @top_k(%x: tensor<3x4xf32>, %y: tensor<3x4xi32>) -> (tensor<3x2xf32>, tensor<3x2xi64>, tensor<1x4xi32>, tensor<1x4xi64>) {
  %v, %i = kiln.top_k %x {k = 2 : i64, axis = 1 : i64, largest} : tensor<3x4xf32>
  %w, %j = kiln.top_k %y {k = 1 : i64, axis = 0 : i64} : tensor<3x4xi32>
  return %v, %i, %w, %j : tensor<3x2xf32>, tensor<3x2xi64>, tensor<1x4xi32>, tensor<1x4xi64>
}

// CHECK-LABEL: func.func @argmax(
// CHECK: %[[Y:.*]] = kiln.argmax %{{.*}} {axis = 1 : i64, keepdims} : tensor<3x4x5xf32>
// CHECK: return %[[Y]] : tensor<3x1x5xi64>
func.func @argmax(%x: tensor<3x4x5xf32>) -> tensor<3x1x5xi64> {
  %y = kiln.argmax %x {axis = 1 : i64, keepdims} : tensor<3x4x5xf32>
  return %y : tensor<3x1x5xi64>
}

// CHECK-LABEL: func.func @argmin(
// CHECK: %[[Y:.*]] = kiln.argmin %{{.*}} {axis = 2 : i64, select_last_index} : tensor<3x4x5xi8>
// CHECK: return %[[Y]] : tensor<3x4xi64>
func.func @argmin(%x: tensor<3x4x5xi8>) -> tensor<3x4xi64> {
  %y = kiln.argmin %x {axis = 2 : i64, select_last_index} : tensor<3x4x5xi8>
  return %y : tensor<3x4xi64>
}

// CHECK-LABEL: func.func @reduce_sum(
// CHECK: %[[Y:.*]] = kiln.reduce_sum %{{.*}} {dimensions = array<i64: 0, 2>, keepdims} : tensor<3x4x5xi32>
// CHECK: return %[[Y]] : tensor<1x4x1xi32>
func.func @reduce_sum(%x: tensor<3x4x5xi32>) -> tensor<1x4x1xi32> {
  %y = kiln.reduce_sum %x {dimensions = array<i64: 0, 2>, keepdims} : tensor<3x4x5xi32>
  return %y : tensor<1x4x1xi32>
}

// CHECK-LABEL: func.func @reduce_mean(
// CHECK: %[[Y:.*]] = kiln.reduce_mean %{{.*}} {dimensions = array<i64: 1>} : tensor<3x4x5xf32>
// CHECK: return %[[Y]] : tensor<3x5xf32>
func.func @reduce_mean(%x: tensor<3x4x5xf32>) -> tensor<3x5xf32> {
  %y = kiln.reduce_mean %x {dimensions = array<i64: 1>} : tensor<3x4x5xf32>
  return %y : tensor<3x5xf32>
}

// CHECK-LABEL: func.func @reduce_max(
// CHECK: %[[Y:.*]] = kiln.reduce_max %{{.*}} {dimensions = array<i64: 0, 1>} : tensor<2x3xi64>
// CHECK: return %[[Y]] : tensor<i64>
func.func @reduce_max(%x: tensor<2x3xi64>) -> tensor<i64> {
  %y = kiln.reduce_max %x {dimensions = array<i64: 0, 1>} : tensor<2x3xi64>
  return %y : tensor<i64>
}

// CHECK-LABEL: func.func @reduce_min(
// CHECK: %[[Y:.*]] = kiln.reduce_min %{{.*}} {dimensions = array<i64: 2>, keepdims} : tensor<2x3x4xf16>
// CHECK: return %[[Y]] : tensor<2x3x1xf16>
func.func @reduce_min(%x: tensor<2x3x4xf16>) -> tensor<2x3x1xf16> {
  %y = kiln.reduce_min %x {dimensions = array<i64: 2>, keepdims} : tensor<2x3x4xf16>
  return %y : tensor<2x3x1xf16>
}

// CHECK-LABEL: func.func @reduce_prod(
// CHECK: %[[Y:.*]] = kiln.reduce_prod %{{.*}} {dimensions = array<i64: 1>} : tensor<4x5xi8>
// CHECK: return %[[Y]] : tensor<4xi8>
func.func @reduce_prod(%x: tensor<4x5xi8>) -> tensor<4xi8> {
  %y = kiln.reduce_prod %x {dimensions = array<i64: 1>} : tensor<4x5xi8>
  return %y : tensor<4xi8>
}

// CHECK-LABEL: func.func @reduce_l2(
// CHECK: %[[Y:.*]] = kiln.reduce_l2 %{{.*}} {dimensions = array<i64: 1, 2>} : tensor<2x3x4xf32>
// CHECK: return %[[Y]] : tensor<2xf32>
func.func @reduce_l2(%x: tensor<2x3x4xf32>) -> tensor<2xf32> {
  %y = kiln.reduce_l2 %x {dimensions = array<i64: 1, 2>} : tensor<2x3x4xf32>
  return %y : tensor<2xf32>
}

// CHECK-LABEL: func.func @reduce_logsumexp(
// CHECK: %[[Y:.*]] = kiln.reduce_logsumexp %{{.*}} {dimensions = array<i64: 1>, keepdims} : tensor<8x10xf64>
// CHECK: return %[[Y]] : tensor<8x1xf64>
func.func @reduce_logsumexp(%x: tensor<8x10xf64>) -> tensor<8x1xf64> {
  %y = kiln.reduce_logsumexp %x {dimensions = array<i64: 1>, keepdims} : tensor<8x10xf64>
  return %y : tensor<8x1xf64>
}

// CHECK-LABEL: func.func @matmul(
// CHECK-SAME: %[[A:.*]]: tensor<8x16xf32>, %[[B:.*]]: tensor<16x32xf32>, %[[AT:.*]]: tensor<16x8xf32>, %[[BT:.*]]: tensor<32x16xf32>
// CHECK: %[[P:.*]] = kiln.matmul %[[A]], %[[B]] : tensor<8x16xf32>, tensor<16x32xf32>
// CHECK: %[[Q:.*]] = kiln.matmul %[[AT]], %[[B]] {transpose_lhs} : tensor<16x8xf32>, tensor<16x32xf32>
// CHECK: %[[R:.*]] = kiln.matmul %[[A]], %[[BT]] {transpose_rhs} : tensor<8x16xf32>, tensor<32x16xf32>
// CHECK: %[[S:.*]] = kiln.matmul %[[AT]], %[[BT]] {transpose_lhs, transpose_rhs} : tensor<16x8xf32>, tensor<32x16xf32>
// CHECK: return %[[P]], %[[Q]], %[[R]], %[[S]] : tensor<8x32xf32>, tensor<8x32xf32>, tensor<8x32xf32>, tensor<8x32xf32>
func.func @matmul(%a: tensor<8x16xf32>, %b: tensor<16x32xf32>, %at: tensor<16x8xf32>, %bt: tensor<32x16xf32>)
    -> (tensor<8x32xf32>, tensor<8x32xf32>, tensor<8x32xf32>, tensor<8x32xf32>) {
  %p = kiln.matmul %a, %b : tensor<8x16xf32>, tensor<16x32xf32>
  %q = kiln.matmul %at, %b {transpose_lhs} : tensor<16x8xf32>, tensor<16x32xf32>
  %r = kiln.matmul %a, %bt {transpose_rhs} : tensor<8x16xf32>, tensor<32x16xf32>
  %s = kiln.matmul %at, %bt {transpose_lhs, transpose_rhs} : tensor<16x8xf32>, tensor<32x16xf32>
  return %p, %q, %r, %s : tensor<8x32xf32>, tensor<8x32xf32>, tensor<8x32xf32>, tensor<8x32xf32>
}

// CHECK-LABEL: func.func @matmul_batched(
// CHECK: %[[P:.*]] = kiln.matmul %{{.*}}, %{{.*}} : tensor<2x3x4x5xi32>, tensor<2x3x5x6xi32>
// CHECK: %[[Q:.*]] = kiln.matmul %{{.*}}, %{{.*}} {transpose_rhs} : tensor<7x4x5xf16>, tensor<7x6x5xf16>
// CHECK: return %[[P]], %[[Q]] : tensor<2x3x4x6xi32>, tensor<7x4x6xf16>
func.func @matmul_batched(%a: tensor<2x3x4x5xi32>, %b: tensor<2x3x5x6xi32>, %c: tensor<7x4x5xf16>, %d: tensor<7x6x5xf16>)
    -> (tensor<2x3x4x6xi32>, tensor<7x4x6xf16>) {
  %p = kiln.matmul %a, %b : tensor<2x3x4x5xi32>, tensor<2x3x5x6xi32>
  %q = kiln.matmul %c, %d {transpose_rhs} : tensor<7x4x5xf16>, tensor<7x6x5xf16>
  return %p, %q : tensor<2x3x4x6xi32>, tensor<7x4x6xf16>
}

// Output sizes are floor((in + pad_begin + pad_end - (k - 1) * dilation - 1) / stride) + 1
// (checked against torch.nn.functional.conv*d).
// CHECK-LABEL: func.func @conv(
// CHECK: %[[A:.*]] = kiln.conv %{{.*}}, %{{.*}} {dilations = array<i64: 1, 2>, groups = 2 : i64, padding = array<i64: 1, 0, 1, 2>, strides = array<i64: 2, 1>} : tensor<1x4x9x10xf32>, tensor<6x2x3x3xf32>
// CHECK: %[[B:.*]] = kiln.conv %{{.*}}, %{{.*}} {dilations = array<i64: 1>, padding = array<i64: 0, 0>, strides = array<i64: 2>} : tensor<2x3x10xf16>, tensor<4x3x3xf16>
// CHECK: %[[C:.*]] = kiln.conv %{{.*}}, %{{.*}} {dilations = array<i64: 1, 1, 1>, padding = array<i64: 0, 0, 0, 0, 0, 0>, strides = array<i64: 1, 2, 1>} : tensor<1x2x5x6x7xf32>, tensor<3x2x2x3x3xf32>
// CHECK: return %[[A]], %[[B]], %[[C]] : tensor<1x6x5x8xf32>, tensor<2x4x4xf16>, tensor<1x3x4x2x5xf32>
func.func @conv(%x: tensor<1x4x9x10xf32>, %w: tensor<6x2x3x3xf32>, %x1: tensor<2x3x10xf16>, %w1: tensor<4x3x3xf16>,
                %x3: tensor<1x2x5x6x7xf32>, %w3: tensor<3x2x2x3x3xf32>)
    -> (tensor<1x6x5x8xf32>, tensor<2x4x4xf16>, tensor<1x3x4x2x5xf32>) {
  %a = kiln.conv %x, %w {strides = array<i64: 2, 1>, padding = array<i64: 1, 0, 1, 2>,
                         dilations = array<i64: 1, 2>, groups = 2 : i64}
      : tensor<1x4x9x10xf32>, tensor<6x2x3x3xf32>
  %b = kiln.conv %x1, %w1 {strides = array<i64: 2>, padding = array<i64: 0, 0>, dilations = array<i64: 1>}
      : tensor<2x3x10xf16>, tensor<4x3x3xf16>
  %c = kiln.conv %x3, %w3 {strides = array<i64: 1, 2, 1>, padding = array<i64: 0, 0, 0, 0, 0, 0>,
                           dilations = array<i64: 1, 1, 1>}
      : tensor<1x2x5x6x7xf32>, tensor<3x2x2x3x3xf32>
  return %a, %b, %c : tensor<1x6x5x8xf32>, tensor<2x4x4xf16>, tensor<1x3x4x2x5xf32>
}

// Output size stride * (in - 1) + output_padding + (k - 1) * dilation + 1 - pad_begin - pad_end,
// channels F / groups * groups (checked against torch.nn.functional.conv_transpose2d).
// CHECK-LABEL: func.func @conv_transpose(
// CHECK: %[[Y:.*]] = kiln.conv_transpose %{{.*}}, %{{.*}} {dilations = array<i64: 1, 1>, groups = 2 : i64, output_padding = array<i64: 1, 0>, padding = array<i64: 1, 0, 1, 2>, strides = array<i64: 2, 3>} : tensor<1x4x5x5xf32>, tensor<4x3x3x3xf32>
// CHECK: %[[Z:.*]] = kiln.conv_transpose %{{.*}}, %{{.*}} {dilations = array<i64: 2>, output_padding = array<i64: 0>, padding = array<i64: 0, 0>, strides = array<i64: 1>} : tensor<1x2x4xf32>, tensor<2x5x3xf32>
// CHECK: return %[[Y]], %[[Z]] : tensor<1x6x10x13xf32>, tensor<1x5x8xf32>
func.func @conv_transpose(%x: tensor<1x4x5x5xf32>, %w: tensor<4x3x3x3xf32>, %x1: tensor<1x2x4xf32>, %w1: tensor<2x5x3xf32>)
    -> (tensor<1x6x10x13xf32>, tensor<1x5x8xf32>) {
  %y = kiln.conv_transpose %x, %w {strides = array<i64: 2, 3>, padding = array<i64: 1, 0, 1, 2>,
                                   dilations = array<i64: 1, 1>, output_padding = array<i64: 1, 0>,
                                   groups = 2 : i64}
      : tensor<1x4x5x5xf32>, tensor<4x3x3x3xf32>
  %z = kiln.conv_transpose %x1, %w1 {strides = array<i64: 1>, padding = array<i64: 0, 0>,
                                     dilations = array<i64: 2>, output_padding = array<i64: 0>}
      : tensor<1x2x4xf32>, tensor<2x5x3xf32>
  return %y, %z : tensor<1x6x10x13xf32>, tensor<1x5x8xf32>
}

// Output sizes checked against torch.nn.functional.max_pool2d; in @max_pool_ceil
// the last window would start in the end padding, so ceil_mode gives 3, not 4.
// CHECK-LABEL: func.func @max_pool(
// CHECK: %[[A:.*]] = kiln.max_pool %{{.*}} {kernel = array<i64: 3, 3>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : tensor<1x3x6x8xf32>
// CHECK: %[[B:.*]] = kiln.max_pool %{{.*}} {ceil_mode, kernel = array<i64: 3, 3>, padding = array<i64: 1, 0, 1, 0>, strides = array<i64: 2, 2>} : tensor<1x3x6x8xf32>
// CHECK: %[[C:.*]] = kiln.max_pool %{{.*}} {dilations = array<i64: 2, 3>, kernel = array<i64: 3, 2>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 2>} : tensor<1x2x10x10xf32>
// CHECK: return %[[A]], %[[B]], %[[C]] : tensor<1x3x2x3xf32>, tensor<1x3x4x4xf32>, tensor<1x2x6x4xf32>
func.func @max_pool(%x: tensor<1x3x6x8xf32>, %d: tensor<1x2x10x10xf32>)
    -> (tensor<1x3x2x3xf32>, tensor<1x3x4x4xf32>, tensor<1x2x6x4xf32>) {
  %a = kiln.max_pool %x {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>} : tensor<1x3x6x8xf32>
  %b = kiln.max_pool %x {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, padding = array<i64: 1, 0, 1, 0>, ceil_mode} : tensor<1x3x6x8xf32>
  %c = kiln.max_pool %d {kernel = array<i64: 3, 2>, strides = array<i64: 1, 2>, padding = array<i64: 0, 0, 0, 0>,
                         dilations = array<i64: 2, 3>} : tensor<1x2x10x10xf32>
  return %a, %b, %c : tensor<1x3x2x3xf32>, tensor<1x3x4x4xf32>, tensor<1x2x6x4xf32>
}

// CHECK-LABEL: func.func @max_pool_ceil(
// CHECK: %[[Y:.*]] = kiln.max_pool %{{.*}} {ceil_mode, kernel = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : tensor<1x1x5x5xf32>
// CHECK: return %[[Y]] : tensor<1x1x3x3xf32>
func.func @max_pool_ceil(%x: tensor<1x1x5x5xf32>) -> tensor<1x1x3x3xf32> {
  %y = kiln.max_pool %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>, ceil_mode} : tensor<1x1x5x5xf32>
  return %y : tensor<1x1x3x3xf32>
}

// CHECK-LABEL: func.func @avg_pool(
// CHECK: %[[A:.*]] = kiln.avg_pool %{{.*}} {count_include_pad, kernel = array<i64: 3>, padding = array<i64: 1, 1>, strides = array<i64: 2>} : tensor<2x3x7xf32>
// CHECK: %[[B:.*]] = kiln.avg_pool %{{.*}} {ceil_mode, kernel = array<i64: 3, 3, 3>, padding = array<i64: 0, 0, 0, 0, 0, 0>, strides = array<i64: 2, 2, 2>} : tensor<1x1x4x4x4xbf16>
// CHECK: return %[[A]], %[[B]] : tensor<2x3x4xf32>, tensor<1x1x2x2x2xbf16>
func.func @avg_pool(%x: tensor<2x3x7xf32>, %y: tensor<1x1x4x4x4xbf16>) -> (tensor<2x3x4xf32>, tensor<1x1x2x2x2xbf16>) {
  %a = kiln.avg_pool %x {kernel = array<i64: 3>, strides = array<i64: 2>, padding = array<i64: 1, 1>, count_include_pad} : tensor<2x3x7xf32>
  %b = kiln.avg_pool %y {kernel = array<i64: 3, 3, 3>, strides = array<i64: 2, 2, 2>, padding = array<i64: 0, 0, 0, 0, 0, 0>, ceil_mode} : tensor<1x1x4x4x4xbf16>
  return %a, %b : tensor<2x3x4xf32>, tensor<1x1x2x2x2xbf16>
}

// CHECK-LABEL: func.func @softmax(
// CHECK: kiln.softmax %{{.*}} {axis = 1 : i64} : tensor<4x10xf32>
func.func @softmax(%x: tensor<4x10xf32>) -> tensor<4x10xf32> {
  %y = kiln.softmax %x {axis = 1 : i64} : tensor<4x10xf32>
  return %y : tensor<4x10xf32>
}

// CHECK-LABEL: func.func @log_softmax(
// CHECK: kiln.log_softmax %{{.*}} {axis = 0 : i64} : tensor<2x3x4xf16>
func.func @log_softmax(%x: tensor<2x3x4xf16>) -> tensor<2x3x4xf16> {
  %y = kiln.log_softmax %x {axis = 0 : i64} : tensor<2x3x4xf16>
  return %y : tensor<2x3x4xf16>
}

// CHECK-LABEL: func.func @attention(
// CHECK-SAME: %[[Q:.*]]: tensor<2x4x8x16xf32>, %[[K:.*]]: tensor<2x4x6x16xf32>, %[[V:.*]]: tensor<2x4x6x5xf32>, %[[M:.*]]: tensor<8x1xf32>, %[[Q2:.*]]: tensor<3x2xf64>
// CHECK: %[[A:.*]] = kiln.attention %[[Q]], %[[K]], %[[V]] mask %[[M]] : tensor<8x1xf32> {scale = 2.500000e-01 : f64} : tensor<2x4x8x16xf32>, tensor<2x4x6x16xf32>, tensor<2x4x6x5xf32>
// CHECK: %[[B:.*]] = kiln.attention %[[Q2]], %[[Q2]], %[[Q2]] : tensor<3x2xf64>, tensor<3x2xf64>, tensor<3x2xf64>
// CHECK: %[[C:.*]] = kiln.attention %[[Q]], %[[K]], %[[V]] mask %[[M]] : tensor<8x1xf32> {masked_fill} : tensor<2x4x8x16xf32>, tensor<2x4x6x16xf32>, tensor<2x4x6x5xf32>
// CHECK: return %[[A]], %[[B]], %[[C]] : tensor<2x4x8x5xf32>, tensor<3x2xf64>, tensor<2x4x8x5xf32>
func.func @attention(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x6x16xf32>, %v: tensor<2x4x6x5xf32>,
                     %m: tensor<8x1xf32>, %x: tensor<3x2xf64>)
    -> (tensor<2x4x8x5xf32>, tensor<3x2xf64>, tensor<2x4x8x5xf32>) {
  %a = kiln.attention %q, %k, %v mask %m : tensor<8x1xf32> {scale = 0.25 : f64}
      : tensor<2x4x8x16xf32>, tensor<2x4x6x16xf32>, tensor<2x4x6x5xf32>
  %b = kiln.attention %x, %x, %x : tensor<3x2xf64>, tensor<3x2xf64>, tensor<3x2xf64>
  %c = kiln.attention %q, %k, %v mask %m : tensor<8x1xf32> {masked_fill}
      : tensor<2x4x8x16xf32>, tensor<2x4x6x16xf32>, tensor<2x4x6x5xf32>
  return %a, %b, %c : tensor<2x4x8x5xf32>, tensor<3x2xf64>, tensor<2x4x8x5xf32>
}

// CHECK-LABEL: func.func @layer_norm(
// CHECK-SAME: %[[X:.*]]: tensor<4x16xf32>, %[[G:.*]]: tensor<16xf32>, %[[B:.*]]: tensor<16xf32>, %[[Y:.*]]: tensor<2x3x4xf32>, %[[S:.*]]: tensor<3x4xf32>
// CHECK: %[[P:.*]] = kiln.layer_norm %[[X]], %[[G]] bias %[[B]] : tensor<16xf32> {axis = 1 : i64} : tensor<4x16xf32>, tensor<16xf32>
// CHECK: %[[Q:.*]] = kiln.layer_norm %[[Y]], %[[S]] {axis = 1 : i64, epsilon = 1.000000e-03 : f64} : tensor<2x3x4xf32>, tensor<3x4xf32>
// CHECK: return %[[P]], %[[Q]]
func.func @layer_norm(%x: tensor<4x16xf32>, %g: tensor<16xf32>, %b: tensor<16xf32>, %y: tensor<2x3x4xf32>, %s: tensor<3x4xf32>)
    -> (tensor<4x16xf32>, tensor<2x3x4xf32>) {
  %p = kiln.layer_norm %x, %g bias %b : tensor<16xf32> {axis = 1 : i64, epsilon = 1.0e-5 : f64} : tensor<4x16xf32>, tensor<16xf32>
  %q = kiln.layer_norm %y, %s {axis = 1 : i64, epsilon = 1.0e-3 : f64} : tensor<2x3x4xf32>, tensor<3x4xf32>
  return %p, %q : tensor<4x16xf32>, tensor<2x3x4xf32>
}

// CHECK-LABEL: func.func @batch_norm(
// CHECK-SAME: %[[X:.*]]: tensor<2x3x4x4xf32>, %[[S:.*]]: tensor<3xf32>, %[[B:.*]]: tensor<3xf32>, %[[M:.*]]: tensor<3xf32>, %[[V:.*]]: tensor<3xf32>
// CHECK: %[[Y:.*]] = kiln.batch_norm %[[X]], %[[S]], %[[B]], %[[M]], %[[V]] {epsilon = 1.000000e-03 : f64} : tensor<2x3x4x4xf32>, tensor<3xf32>
// CHECK: return %[[Y]]
func.func @batch_norm(%x: tensor<2x3x4x4xf32>, %s: tensor<3xf32>, %b: tensor<3xf32>, %m: tensor<3xf32>, %v: tensor<3xf32>) -> tensor<2x3x4x4xf32> {
  %y = kiln.batch_norm %x, %s, %b, %m, %v {epsilon = 1.0e-3 : f64} : tensor<2x3x4x4xf32>, tensor<3xf32>
  return %y : tensor<2x3x4x4xf32>
}

// CHECK-LABEL: func.func @batch_norm_train(
// CHECK-SAME: %[[X:.*]]: tensor<2x3x4x4xf32>, %[[S:.*]]: tensor<3xf32>, %[[B:.*]]: tensor<3xf32>
// CHECK: %[[Y:.*]], %[[M:.*]], %[[V:.*]] = kiln.batch_norm_train %[[X]], %[[S]], %[[B]] : tensor<2x3x4x4xf32>, tensor<3xf32>
// CHECK: return %[[Y]], %[[M]], %[[V]] : tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>
func.func @batch_norm_train(%x: tensor<2x3x4x4xf32>, %s: tensor<3xf32>, %b: tensor<3xf32>)
    -> (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>) {
  %y, %m, %v = kiln.batch_norm_train %x, %s, %b {epsilon = 1.0e-5 : f64} : tensor<2x3x4x4xf32>, tensor<3xf32>
  return %y, %m, %v : tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>
}

// CHECK-LABEL: func.func @dropout(
// CHECK-SAME: %[[X:.*]]: tensor<4x8xf32>, %[[SEED:.*]]: tensor<i64>
// CHECK: %[[Y:.*]], %[[MASK:.*]] = kiln.dropout %[[X]], %[[SEED]] {ratio = 1.000000e-01 : f64} : tensor<4x8xf32>
// CHECK: return %[[Y]], %[[MASK]] : tensor<4x8xf32>, tensor<4x8xi1>
func.func @dropout(%x: tensor<4x8xf32>, %seed: tensor<i64>) -> (tensor<4x8xf32>, tensor<4x8xi1>) {
  %y, %mask = kiln.dropout %x, %seed {ratio = 0.1 : f64} : tensor<4x8xf32>
  return %y, %mask : tensor<4x8xf32>, tensor<4x8xi1>
}

// CHECK-LABEL: func.func @cross_entropy(
// CHECK-SAME: %[[L:.*]]: tensor<8x10xf32>, %[[T:.*]]: tensor<8xi64>, %[[W:.*]]: tensor<5xf32>, %[[L4:.*]]: tensor<2x5x3x4xf32>, %[[T3:.*]]: tensor<2x3x4xi32>
// CHECK: %[[A:.*]] = kiln.cross_entropy %[[L]], %[[T]] : tensor<8x10xf32>, tensor<8xi64>
// CHECK: %[[B:.*]] = kiln.cross_entropy %[[L4]], %[[T3]] weight %[[W]] : tensor<5xf32> {ignore_index = -100 : i64, label_smoothing = 1.000000e-01 : f64, reduction = #kiln.reduction<none>} : tensor<2x5x3x4xf32>, tensor<2x3x4xi32>
// CHECK: %[[C:.*]] = kiln.cross_entropy %[[L4]], %[[T3]] {reduction = #kiln.reduction<sum>} : tensor<2x5x3x4xf32>, tensor<2x3x4xi32>
// CHECK: return %[[A]], %[[B]], %[[C]] : tensor<f32>, tensor<2x3x4xf32>, tensor<f32>
func.func @cross_entropy(%logits: tensor<8x10xf32>, %labels: tensor<8xi64>, %w: tensor<5xf32>,
                         %l4: tensor<2x5x3x4xf32>, %t3: tensor<2x3x4xi32>)
    -> (tensor<f32>, tensor<2x3x4xf32>, tensor<f32>) {
  %a = kiln.cross_entropy %logits, %labels : tensor<8x10xf32>, tensor<8xi64>
  %b = kiln.cross_entropy %l4, %t3 weight %w : tensor<5xf32>
      {reduction = #kiln.reduction<none>, ignore_index = -100 : i64, label_smoothing = 0.1 : f64}
      : tensor<2x5x3x4xf32>, tensor<2x3x4xi32>
  %c = kiln.cross_entropy %l4, %t3 {reduction = #kiln.reduction<sum>} : tensor<2x5x3x4xf32>, tensor<2x3x4xi32>
  return %a, %b, %c : tensor<f32>, tensor<2x3x4xf32>, tensor<f32>
}

// CHECK-LABEL: func.func @cross_entropy_grad(
// CHECK-SAME: %[[L:.*]]: tensor<8x10xf32>, %[[T:.*]]: tensor<8xi64>, %[[G:.*]]: tensor<f32>, %[[W:.*]]: tensor<5xf32>, %[[L3:.*]]: tensor<2x5x3xf32>, %[[T2:.*]]: tensor<2x3xi32>, %[[G2:.*]]: tensor<2x3xf32>
// CHECK: %[[A:.*]] = kiln.cross_entropy_grad %[[L]], %[[T]], %[[G]] : tensor<8x10xf32>, tensor<8xi64>, tensor<f32>
// CHECK: %[[B:.*]] = kiln.cross_entropy_grad %[[L3]], %[[T2]], %[[G2]] weight %[[W]] : tensor<5xf32> {ignore_index = -100 : i64, label_smoothing = 1.000000e-01 : f64, reduction = #kiln.reduction<none>} : tensor<2x5x3xf32>, tensor<2x3xi32>, tensor<2x3xf32>
// CHECK: return %[[A]], %[[B]] : tensor<8x10xf32>, tensor<2x5x3xf32>
func.func @cross_entropy_grad(%logits: tensor<8x10xf32>, %labels: tensor<8xi64>, %g: tensor<f32>,
                              %w: tensor<5xf32>, %l3: tensor<2x5x3xf32>, %t2: tensor<2x3xi32>,
                              %g2: tensor<2x3xf32>) -> (tensor<8x10xf32>, tensor<2x5x3xf32>) {
  %a = kiln.cross_entropy_grad %logits, %labels, %g : tensor<8x10xf32>, tensor<8xi64>, tensor<f32>
  %b = kiln.cross_entropy_grad %l3, %t2, %g2 weight %w : tensor<5xf32>
      {reduction = #kiln.reduction<none>, ignore_index = -100 : i64, label_smoothing = 0.1 : f64}
      : tensor<2x5x3xf32>, tensor<2x3xi32>, tensor<2x3xf32>
  return %a, %b : tensor<8x10xf32>, tensor<2x5x3xf32>
}

// CHECK-LABEL: func.func @nll_loss(
// CHECK-SAME: %[[P:.*]]: tensor<8x10xf64>, %[[T:.*]]: tensor<8xi64>, %[[P3:.*]]: tensor<2x5x6xf32>, %[[T2:.*]]: tensor<2x6xi64>, %[[W:.*]]: tensor<5xf32>
// CHECK: %[[A:.*]] = kiln.nll_loss %[[P]], %[[T]] : tensor<8x10xf64>, tensor<8xi64>
// CHECK: %[[B:.*]] = kiln.nll_loss %[[P3]], %[[T2]] weight %[[W]] : tensor<5xf32> {ignore_index = 1 : i64, reduction = #kiln.reduction<none>} : tensor<2x5x6xf32>, tensor<2x6xi64>
// CHECK: return %[[A]], %[[B]] : tensor<f64>, tensor<2x6xf32>
func.func @nll_loss(%logp: tensor<8x10xf64>, %labels: tensor<8xi64>, %p3: tensor<2x5x6xf32>, %t2: tensor<2x6xi64>, %w: tensor<5xf32>)
    -> (tensor<f64>, tensor<2x6xf32>) {
  %a = kiln.nll_loss %logp, %labels : tensor<8x10xf64>, tensor<8xi64>
  %b = kiln.nll_loss %p3, %t2 weight %w : tensor<5xf32> {reduction = #kiln.reduction<none>, ignore_index = 1 : i64}
      : tensor<2x5x6xf32>, tensor<2x6xi64>
  return %a, %b : tensor<f64>, tensor<2x6xf32>
}

// CHECK-LABEL: func.func @resize(
// CHECK-SAME: %[[X:.*]]: tensor<1x3x4x4xf32>
// CHECK: %[[L:.*]] = kiln.resize %[[X]] {coordinate_mode = #kiln.coordinate_mode<half_pixel>, mode = #kiln.resize_mode<linear>, scales = array<f64: 1.000000e+00, 1.000000e+00, 2.000000e+00, 2.000000e+00>} : tensor<1x3x4x4xf32> to tensor<1x3x8x8xf32>
// CHECK: %[[C:.*]] = kiln.resize %[[X]] {coordinate_mode = #kiln.coordinate_mode<align_corners>, cubic_coeff_a = -5.000000e-01 : f64, exclude_outside, mode = #kiln.resize_mode<cubic>, scales = array<f64: 1.000000e+00, 1.000000e+00, 5.000000e-01, 5.000000e-01>} : tensor<1x3x4x4xf32> to tensor<1x3x2x2xf32>
// CHECK: %[[N:.*]] = kiln.resize %[[X]] {coordinate_mode = #kiln.coordinate_mode<asymmetric>, mode = #kiln.resize_mode<nearest>, nearest_mode = #kiln.nearest_mode<floor>, scales = array<f64: 1.000000e+00, 1.000000e+00, 3.000000e+00, 1.000000e+00>} : tensor<1x3x4x4xf32> to tensor<1x3x12x4xf32>
func.func @resize(%x: tensor<1x3x4x4xf32>) -> (tensor<1x3x8x8xf32>, tensor<1x3x2x2xf32>, tensor<1x3x12x4xf32>) {
  %l = kiln.resize %x {mode = #kiln.resize_mode<linear>, coordinate_mode = #kiln.coordinate_mode<half_pixel>,
                       scales = array<f64: 1.0, 1.0, 2.0, 2.0>} : tensor<1x3x4x4xf32> to tensor<1x3x8x8xf32>
  %c = kiln.resize %x {mode = #kiln.resize_mode<cubic>, coordinate_mode = #kiln.coordinate_mode<align_corners>,
                       scales = array<f64: 1.0, 1.0, 0.5, 0.5>, cubic_coeff_a = -0.5 : f64, exclude_outside}
      : tensor<1x3x4x4xf32> to tensor<1x3x2x2xf32>
  %n = kiln.resize %x {mode = #kiln.resize_mode<nearest>, coordinate_mode = #kiln.coordinate_mode<asymmetric>,
                       nearest_mode = #kiln.nearest_mode<floor>, scales = array<f64: 1.0, 1.0, 3.0, 1.0>}
      : tensor<1x3x4x4xf32> to tensor<1x3x12x4xf32>
  return %l, %c, %n : tensor<1x3x8x8xf32>, tensor<1x3x2x2xf32>, tensor<1x3x12x4xf32>
}

// CHECK-LABEL: func.func @sharding(
// CHECK: kiln.reduce_scatter_mean %{{.*}} {ranks = 2 : i64} : (tensor<8xf32>) -> tensor<4xf32>
// CHECK: kiln.local_shard %{{.*}} {ranks = 2 : i64} : (tensor<8xf32>) -> tensor<4xf32>
// CHECK: kiln.all_gather %{{.*}} {ranks = 2 : i64} : (tensor<4xf32>) -> tensor<8xf32>
// CHECK: kiln.all_gather %{{.*}}, %{{.*}} {ranks = 2 : i64} : (memref<4xf32>, memref<8xf32>) -> ()
func.func @sharding(%g: tensor<8xf32>, %p: tensor<8xf32>, %m: memref<4xf32>, %w: memref<8xf32>) -> tensor<8xf32> {
  %s = kiln.reduce_scatter_mean %g {ranks = 2 : i64} : (tensor<8xf32>) -> tensor<4xf32>
  %l = kiln.local_shard %p {ranks = 2 : i64} : (tensor<8xf32>) -> tensor<4xf32>
  %n = kiln.sub %l, %s : tensor<4xf32>
  %a = kiln.all_gather %n {ranks = 2 : i64} : (tensor<4xf32>) -> tensor<8xf32>
  kiln.all_gather %m, %w {ranks = 2 : i64} : (memref<4xf32>, memref<8xf32>) -> ()
  return %a : tensor<8xf32>
}

// CHECK-LABEL: func.func @all_reduce_mean(
// CHECK: %{{.*}}:2 = kiln.all_reduce_mean %{{.*}}, %{{.*}} : tensor<4xf32>, tensor<f32>
// CHECK: kiln.all_reduce_mean %{{.*}} : memref<2x3xf32>
func.func @all_reduce_mean(%a: tensor<4xf32>, %b: tensor<f32>, %m: memref<2x3xf32>) -> (tensor<4xf32>, tensor<f32>) {
  %r:2 = kiln.all_reduce_mean %a, %b : tensor<4xf32>, tensor<f32>
  kiln.all_reduce_mean %m : memref<2x3xf32>
  return %r#0, %r#1 : tensor<4xf32>, tensor<f32>
}

// CHECK-LABEL: func.func @flash_attention(
// CHECK: %{{.*}}:2 = kiln.flash_attention %{{.*}}, %{{.*}}, %{{.*}} mask %{{.*}} {scale = 1.250000e-01 : f64} : (tensor<2x4x8x64xbf16>, tensor<2x4x8x64xbf16>, tensor<2x4x8x64xbf16>, tensor<2x1x1x8xf32>) -> (tensor<2x4x8x64xf32>, tensor<2x4x8x2xf32>)
// CHECK: %{{.*}}:4 = kiln.flash_attention_grad {{.*}} {causal, scale = 1.250000e-01 : f64}
// CHECK: kiln.flash_attention %{{.*}}, %{{.*}}, %{{.*}} into %{{.*}}, %{{.*}} {causal} : (memref<2x4x8x64xf16>, memref<2x4x8x64xf16>, memref<2x4x8x64xf16>, memref<2x4x8x64xf32>, memref<2x4x8x2xf32>) -> ()
func.func @flash_attention(%q: tensor<2x4x8x64xbf16>, %m: tensor<2x1x1x8xf32>,
                           %g: tensor<2x4x8x64xf32>, %h: memref<2x4x8x64xf16>,
                           %o: memref<2x4x8x64xf32>, %s: memref<2x4x8x2xf32>) {
  %out, %stats = kiln.flash_attention %q, %q, %q mask %m {scale = 0.125 : f64}
      : (tensor<2x4x8x64xbf16>, tensor<2x4x8x64xbf16>, tensor<2x4x8x64xbf16>, tensor<2x1x1x8xf32>)
      -> (tensor<2x4x8x64xf32>, tensor<2x4x8x2xf32>)
  %dq, %dk, %dv, %delta = kiln.flash_attention_grad %q, %q, %q, %out, %g, %stats {causal, scale = 0.125 : f64}
      : (tensor<2x4x8x64xbf16>, tensor<2x4x8x64xbf16>, tensor<2x4x8x64xbf16>, tensor<2x4x8x64xf32>, tensor<2x4x8x64xf32>, tensor<2x4x8x2xf32>)
      -> (tensor<2x4x8x64xf32>, tensor<2x4x8x64xf32>, tensor<2x4x8x64xf32>, tensor<2x4x8xf32>)
  kiln.flash_attention %h, %h, %h into %o, %s {causal}
      : (memref<2x4x8x64xf16>, memref<2x4x8x64xf16>, memref<2x4x8x64xf16>, memref<2x4x8x64xf32>, memref<2x4x8x2xf32>) -> ()
  return
}
