// RUN: kiln-opt %s --kiln-fuse-gelu --canonicalize | FileCheck %s

// The exact form as torch.onnx writes it (opset 17): x / sqrt(2), erf,
// + 1, * x, * 0.5.
// CHECK-LABEL: func.func @erf_form(
// CHECK-SAME: %[[X:.*]]: tensor<2x8xf32>)
// CHECK-NEXT: %[[G:.*]] = kiln.gelu %[[X]] : tensor<2x8xf32>
// CHECK-NEXT: return %[[G]]
func.func @erf_form(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %sqrt2 = kiln.constant dense<1.41421354> : tensor<2x8xf32>
  %one = kiln.constant dense<1.0> : tensor<2x8xf32>
  %half = kiln.constant dense<0.5> : tensor<2x8xf32>
  %0 = kiln.div %x, %sqrt2 : tensor<2x8xf32>
  %1 = kiln.erf %0 : tensor<2x8xf32>
  %2 = kiln.add %1, %one : tensor<2x8xf32>
  %3 = kiln.mul %x, %2 : tensor<2x8xf32>
  %4 = kiln.mul %3, %half : tensor<2x8xf32>
  return %4 : tensor<2x8xf32>
}

// The tanh approximation as GPT-2's gelu_new is exported: x * x * x,
// * 0.044715, + x, * sqrt(2 / pi), tanh, + 1, * x, * 0.5.
// CHECK-LABEL: func.func @tanh_form(
// CHECK-SAME: %[[X:.*]]: tensor<4xf32>)
// CHECK-NEXT: %[[G:.*]] = kiln.gelu %[[X]] {approximate = #kiln.gelu_approximation<tanh>} : tensor<4xf32>
// CHECK-NEXT: return %[[G]]
func.func @tanh_form(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c0 = kiln.constant dense<4.471500e-02> : tensor<4xf32>
  %c1 = kiln.constant dense<0.797884583> : tensor<4xf32>
  %one = kiln.constant dense<1.0> : tensor<4xf32>
  %half = kiln.constant dense<0.5> : tensor<4xf32>
  %0 = kiln.mul %x, %x : tensor<4xf32>
  %1 = kiln.mul %x, %0 : tensor<4xf32>
  %2 = kiln.mul %1, %c0 : tensor<4xf32>
  %3 = kiln.add %x, %2 : tensor<4xf32>
  %4 = kiln.mul %3, %c1 : tensor<4xf32>
  %5 = kiln.tanh %4 : tensor<4xf32>
  %6 = kiln.add %5, %one : tensor<4xf32>
  %7 = kiln.mul %x, %6 : tensor<4xf32>
  %8 = kiln.mul %7, %half : tensor<4xf32>
  return %8 : tensor<4xf32>
}

// Other groupings: (0.5 * x) * (1 + tanh(...)) with pow(x, 3), scalar
// constants broadcast, and the product with sqrt(2 / pi) distributed the
// other way round.
// CHECK-LABEL: func.func @regrouped(
// CHECK-SAME: %[[X:.*]]: tensor<4xf32>)
// CHECK-NEXT: %[[G:.*]] = kiln.gelu %[[X]] {approximate = #kiln.gelu_approximation<tanh>} : tensor<4xf32>
// CHECK-NEXT: return %[[G]]
func.func @regrouped(%x: tensor<4xf32>) -> tensor<4xf32> {
  %three = kiln.constant dense<3.0> : tensor<4xf32>
  %s0 = kiln.constant dense<4.471500e-02> : tensor<f32>
  %c0 = kiln.broadcast %s0 : tensor<f32> to tensor<4xf32>
  %c1 = kiln.constant dense<0.797884583> : tensor<4xf32>
  %one = kiln.constant dense<1.0> : tensor<4xf32>
  %half = kiln.constant dense<0.5> : tensor<4xf32>
  %h = kiln.mul %half, %x : tensor<4xf32>
  %0 = kiln.pow %x, %three : tensor<4xf32>
  %1 = kiln.mul %c0, %0 : tensor<4xf32>
  %2 = kiln.add %1, %x : tensor<4xf32>
  %3 = kiln.mul %c1, %2 : tensor<4xf32>
  %4 = kiln.tanh %3 : tensor<4xf32>
  %5 = kiln.add %one, %4 : tensor<4xf32>
  %6 = kiln.mul %h, %5 : tensor<4xf32>
  return %6 : tensor<4xf32>
}

// An intermediate with another user stays: nothing changes.
// CHECK-LABEL: func.func @shared_intermediate(
// CHECK-NOT: kiln.gelu
// CHECK: kiln.erf
// CHECK: return
func.func @shared_intermediate(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %sqrt2 = kiln.constant dense<1.41421354> : tensor<4xf32>
  %one = kiln.constant dense<1.0> : tensor<4xf32>
  %half = kiln.constant dense<0.5> : tensor<4xf32>
  %0 = kiln.div %x, %sqrt2 : tensor<4xf32>
  %1 = kiln.erf %0 : tensor<4xf32>
  %2 = kiln.add %1, %one : tensor<4xf32>
  %3 = kiln.mul %x, %2 : tensor<4xf32>
  %4 = kiln.mul %3, %half : tensor<4xf32>
  return %4, %1 : tensor<4xf32>, tensor<4xf32>
}

// Wrong constants (0.6 instead of 0.5; erf of x / 2) are not GELU.
// CHECK-LABEL: func.func @not_gelu(
// CHECK-NOT: kiln.gelu
// CHECK: return
func.func @not_gelu(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %sqrt2 = kiln.constant dense<1.41421354> : tensor<4xf32>
  %two = kiln.constant dense<2.0> : tensor<4xf32>
  %one = kiln.constant dense<1.0> : tensor<4xf32>
  %half = kiln.constant dense<0.5> : tensor<4xf32>
  %c6 = kiln.constant dense<0.6> : tensor<4xf32>
  %0 = kiln.div %x, %sqrt2 : tensor<4xf32>
  %1 = kiln.erf %0 : tensor<4xf32>
  %2 = kiln.add %1, %one : tensor<4xf32>
  %3 = kiln.mul %x, %2 : tensor<4xf32>
  %4 = kiln.mul %3, %c6 : tensor<4xf32>
  %5 = kiln.div %x, %two : tensor<4xf32>
  %6 = kiln.erf %5 : tensor<4xf32>
  %7 = kiln.add %6, %one : tensor<4xf32>
  %8 = kiln.mul %x, %7 : tensor<4xf32>
  %9 = kiln.mul %8, %half : tensor<4xf32>
  return %4, %9 : tensor<4xf32>, tensor<4xf32>
}

// x * (1 + erf(y / sqrt(2))) * 0.5 with y != x is not GELU of either.
// CHECK-LABEL: func.func @two_inputs(
// CHECK-NOT: kiln.gelu
// CHECK: return
func.func @two_inputs(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  %sqrt2 = kiln.constant dense<1.41421354> : tensor<4xf32>
  %one = kiln.constant dense<1.0> : tensor<4xf32>
  %half = kiln.constant dense<0.5> : tensor<4xf32>
  %0 = kiln.div %y, %sqrt2 : tensor<4xf32>
  %1 = kiln.erf %0 : tensor<4xf32>
  %2 = kiln.add %1, %one : tensor<4xf32>
  %3 = kiln.mul %x, %2 : tensor<4xf32>
  %4 = kiln.mul %3, %half : tensor<4xf32>
  return %4 : tensor<4xf32>
}
