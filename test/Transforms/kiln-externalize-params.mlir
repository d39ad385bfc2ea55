// RUN: kiln-opt %s --kiln-externalize-params | FileCheck %s

// The parameters stay in the module; the reads become trailing arguments, one
// per parameter in first-read order, marked with its name.
// CHECK: kiln.param @fc.weight : tensor<4x2xf32> = dense<5.000000e-01> : tensor<4x2xf32>
// CHECK: kiln.param @fc.bias : tensor<2xf32>
kiln.param @fc.weight : tensor<4x2xf32> = dense<0.5> : tensor<4x2xf32>
kiln.param @fc.bias : tensor<2xf32>

// @fc.weight is read twice: both reads become the same argument.
// CHECK-LABEL: func.func @forward(
// CHECK-SAME: %[[X:[^:]*]]: tensor<3x4xf32> {kiln.name = "x"},
// CHECK-SAME: %[[W:[^:]*]]: tensor<4x2xf32> {kiln.param = "fc.weight"},
// CHECK-SAME: %[[B:[^:]*]]: tensor<2xf32> {kiln.param = "fc.bias"})
// CHECK-SAME: -> (tensor<3x2xf32>, tensor<4x2xf32>)
// CHECK-NOT: kiln.get_param
// CHECK: %[[Y:.*]] = kiln.matmul %[[X]], %[[W]] : tensor<3x4xf32>, tensor<4x2xf32>
// CHECK: %[[BB:.*]] = kiln.broadcast %[[B]] : tensor<2xf32> to tensor<3x2xf32>
// CHECK: %[[Z:.*]] = kiln.add %[[Y]], %[[BB]] : tensor<3x2xf32>
// CHECK: return %[[Z]], %[[W]] : tensor<3x2xf32>, tensor<4x2xf32>
func.func @forward(%x: tensor<3x4xf32> {kiln.name = "x"}) -> (tensor<3x2xf32>, tensor<4x2xf32>) {
  %w = kiln.get_param @fc.weight : tensor<4x2xf32>
  %y = kiln.matmul %x, %w : tensor<3x4xf32>, tensor<4x2xf32>
  %b = kiln.get_param @fc.bias : tensor<2xf32>
  %bb = kiln.broadcast %b : tensor<2xf32> to tensor<3x2xf32>
  %z = kiln.add %y, %bb : tensor<3x2xf32>
  %w2 = kiln.get_param @fc.weight : tensor<4x2xf32>
  return %z, %w2 : tensor<3x2xf32>, tensor<4x2xf32>
}

// Each function gets arguments for the parameters it reads itself, in its own
// first-read order.
// CHECK-LABEL: func.func @bias_only(
// CHECK-SAME: %[[B:[^:]*]]: tensor<2xf32> {kiln.param = "fc.bias"}) -> tensor<2xf32>
// CHECK-NEXT: return %[[B]] : tensor<2xf32>
func.func @bias_only() -> tensor<2xf32> {
  %b = kiln.get_param @fc.bias : tensor<2xf32>
  return %b : tensor<2xf32>
}

// CHECK-LABEL: func.func @no_reads(
// CHECK-SAME: %[[X:[^:]*]]: tensor<2xf32>) -> tensor<2xf32>
// CHECK-NEXT: return %[[X]] : tensor<2xf32>
func.func @no_reads(%x: tensor<2xf32>) -> tensor<2xf32> {
  return %x : tensor<2xf32>
}

// CHECK-LABEL: func.func private @external(tensor<2xf32>) -> tensor<2xf32>
func.func private @external(tensor<2xf32>) -> tensor<2xf32>
