// RUN: kiln-opt %s -split-input-file --kiln-autodiff | FileCheck %s

// kiln.layer_norm's own gradient: the input, scale and bias gradients are
// one kiln.layer_norm_grad of the input, the scale and the result's
// gradient (whose expansion kiln-decompose.mlir checks). The forward keeps
// only the input for it.

kiln.param @x : tensor<2x3x4xf32>
kiln.param @g : tensor<3x4xf32>
kiln.param @b : tensor<3x4xf32>

// CHECK-LABEL: func.func @forward_grad(
// CHECK-SAME: -> (tensor<f32> {kiln.name = "loss"}, tensor<2x3x4xf32> {kiln.name = "x.grad"}, tensor<3x4xf32> {kiln.name = "g.grad"}, tensor<3x4xf32> {kiln.name = "b.grad"})
// CHECK: %[[X:.*]] = kiln.get_param @x
// CHECK: %[[G:.*]] = kiln.get_param @g
// CHECK: %[[B:.*]] = kiln.get_param @b
// CHECK: %[[Y:.*]] = kiln.layer_norm %[[X]], %[[G]] bias %[[B]]
// CHECK: %[[DY:.*]] = kiln.broadcast %{{.*}} : tensor<1x1x1xf32> to tensor<2x3x4xf32>
// CHECK: %[[DX:.*]], %[[DG:.*]], %[[DB:.*]] = kiln.layer_norm_grad %[[X]], %[[G]], %[[DY]] {axis = 1 : i64, epsilon = 1.000000e-03 : f64} : tensor<2x3x4xf32>, tensor<3x4xf32>
// CHECK-NEXT: return %{{.*}}, %[[DX]], %[[DG]], %[[DB]] :
func.func @forward() -> (tensor<f32> {kiln.name = "loss"}) {
  %x = kiln.get_param @x : tensor<2x3x4xf32>
  %g = kiln.get_param @g : tensor<3x4xf32>
  %b = kiln.get_param @b : tensor<3x4xf32>
  %y = kiln.layer_norm %x, %g bias %b : tensor<3x4xf32> {axis = 1 : i64, epsilon = 1.0e-3 : f64}
      : tensor<2x3x4xf32>, tensor<3x4xf32>
  %l = kiln.reduce_sum %y {dimensions = array<i64: 0, 1, 2>} : tensor<2x3x4xf32>
  return %l : tensor<f32>
}

// -----

// No bias: the op's bias gradient is left unused.

kiln.param @x : tensor<4x16xf32>
kiln.param @g : tensor<16xf32>

// CHECK-LABEL: func.func @forward_grad(
// CHECK-SAME: -> (tensor<f32> {kiln.name = "loss"}, tensor<4x16xf32> {kiln.name = "x.grad"}, tensor<16xf32> {kiln.name = "g.grad"})
// CHECK: %[[DX:.*]], %[[DG:.*]], %{{.*}} = kiln.layer_norm_grad
// CHECK-NEXT: return %{{.*}}, %[[DX]], %[[DG]] :
func.func @forward() -> (tensor<f32> {kiln.name = "loss"}) {
  %x = kiln.get_param @x : tensor<4x16xf32>
  %g = kiln.get_param @g : tensor<16xf32>
  %y = kiln.layer_norm %x, %g {axis = 1 : i64} : tensor<4x16xf32>, tensor<16xf32>
  %l = kiln.reduce_sum %y {dimensions = array<i64: 0, 1>} : tensor<4x16xf32>
  return %l : tensor<f32>
}
