// RUN: kiln-opt %s -split-input-file --kiln-autodiff | FileCheck %s

// An exclusive cumulative sum's input element feeds the outputs after it:
// its gradient is the exclusive cumulative sum of dy taken in reverse.
kiln.param @x : tensor<3x4xf32>

// CHECK-LABEL: func.func @forward_grad(
// CHECK-SAME: -> (tensor<f32> {kiln.name = "loss"}, tensor<3x4xf32> {kiln.name = "x.grad"})
// CHECK: %[[DY:.*]] = kiln.broadcast %{{.*}} : tensor<1x1xf32> to tensor<3x4xf32>
// CHECK: %[[DX:.*]] = kiln.cumsum %[[DY]] {axis = 1 : i64, exclusive, reverse} : tensor<3x4xf32>
// CHECK: return %{{.*}}, %[[DX]] : tensor<f32>, tensor<3x4xf32>
func.func @forward() -> (tensor<f32> {kiln.name = "loss"}) {
  %x = kiln.get_param @x : tensor<3x4xf32>
  %c = kiln.cumsum %x {axis = 1 : i64, exclusive} : tensor<3x4xf32>
  %l = kiln.reduce_sum %c {dimensions = array<i64: 0, 1>} : tensor<3x4xf32>
  return %l : tensor<f32>
}

// -----

// A reversed cumulative sum goes the other way: forwards.
kiln.param @x : tensor<5xf32>

// CHECK-LABEL: func.func @forward_grad(
// CHECK: %[[DY:.*]] = kiln.broadcast %{{.*}} : tensor<1xf32> to tensor<5xf32>
// CHECK: %[[DX:.*]] = kiln.cumsum %[[DY]] {axis = 0 : i64} : tensor<5xf32>
// CHECK: return %{{.*}}, %[[DX]] : tensor<f32>, tensor<5xf32>
func.func @forward() -> (tensor<f32> {kiln.name = "loss"}) {
  %x = kiln.get_param @x : tensor<5xf32>
  %c = kiln.cumsum %x {axis = 0 : i64, reverse} : tensor<5xf32>
  %l = kiln.reduce_sum %c {dimensions = array<i64: 0>} : tensor<5xf32>
  return %l : tensor<f32>
}

// -----

// A strided slice (rows 1 and 3 of 5, columns 0, 3 and 6 of 8) puts dy back
// where it read: both strided dimensions spread at once (unit dimensions
// padded to the strides, 2 and 3, and flattened: 4x9), the trailing zeros
// past the input's end cut (9 columns from 0 would run past 8), then padded
// into place.
kiln.param @x : tensor<5x8xf32>

// CHECK-LABEL: func.func @forward_grad(
// CHECK-SAME: -> (tensor<f32> {kiln.name = "loss"}, tensor<5x8xf32> {kiln.name = "x.grad"})
// CHECK: %[[DY:.*]] = kiln.broadcast %{{.*}} : tensor<1x1xf32> to tensor<2x3xf32>
// CHECK: %[[S:.*]] = kiln.reshape %[[DY]] : tensor<2x3xf32> to tensor<2x1x3x1xf32>
// CHECK: %[[P:.*]] = kiln.pad %[[S]] {high = array<i64: 0, 1, 0, 2>, low = array<i64: 0, 0, 0, 0>} : tensor<2x1x3x1xf32>
// CHECK: %[[F:.*]] = kiln.reshape %[[P]] : tensor<2x2x3x3xf32> to tensor<4x9xf32>
// CHECK: %[[C:.*]] = kiln.slice %[[F]] {limit = array<i64: 4, 8>, start = array<i64: 0, 0>, stride = array<i64: 1, 1>} : tensor<4x9xf32>
// CHECK: %[[DX:.*]] = kiln.pad %[[C]] {high = array<i64: 0, 0>, low = array<i64: 1, 0>} : tensor<4x8xf32>
// CHECK: return %{{.*}}, %[[DX]] : tensor<f32>, tensor<5x8xf32>
func.func @forward() -> (tensor<f32> {kiln.name = "loss"}) {
  %x = kiln.get_param @x : tensor<5x8xf32>
  %s = kiln.slice %x {start = array<i64: 1, 0>, limit = array<i64: 5, 8>, stride = array<i64: 2, 3>} : tensor<5x8xf32>
  %l = kiln.reduce_sum %s {dimensions = array<i64: 0, 1>} : tensor<2x3xf32>
  return %l : tensor<f32>
}
