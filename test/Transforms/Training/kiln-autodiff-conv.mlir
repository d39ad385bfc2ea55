// RUN: kiln-opt %s -split-input-file --kiln-autodiff | FileCheck %s

// y = conv(x, w) with groups 2 (Cg = 2 input and Fg = 3 output channels per
// group), strides 2, dilations (1, 2), one row of begin padding. The input's
// gradient is the transposed convolution of dy with the same filter, with the
// output padding (1 row: stride 2 leaves the last row unread) that restores
// x's 7x7. The filter's gradient is a convolution too: x with batch and
// per-group channels swapped ([N, G*Cg] -> [Cg, G*N]) as the input, dy with
// batch and channels swapped as the filter, the forward strides as
// dilations and the dilations as strides; its window count (4x3) exceeds the
// 3x3 filter where the last window left input unread, so it is cut, then
// turned back to [F, Cg, K...].
kiln.param @x : tensor<2x4x7x7xf32>
kiln.param @w : tensor<6x2x3x3xf32>

// CHECK-LABEL: func.func @forward_grad(
// CHECK-SAME: -> (tensor<f32> {kiln.name = "loss"}, tensor<2x4x7x7xf32> {kiln.name = "x.grad"}, tensor<6x2x3x3xf32> {kiln.name = "w.grad"})
// CHECK: %[[X:.*]] = kiln.get_param @x
// CHECK: %[[W:.*]] = kiln.get_param @w
// CHECK: %[[DY:.*]] = kiln.broadcast %{{.*}} : tensor<1x1x1x1xf32> to tensor<2x6x3x2xf32>
// CHECK: %[[DX:.*]] = kiln.conv_transpose %[[DY]], %[[W]] {dilations = array<i64: 1, 2>, groups = 2 : i64, output_padding = array<i64: 1, 0>, padding = array<i64: 1, 0, 0, 0>, strides = array<i64: 2, 2>} : tensor<2x6x3x2xf32>, tensor<6x2x3x3xf32>
// CHECK: %[[XG:.*]] = kiln.reshape %[[X]] : tensor<2x4x7x7xf32> to tensor<2x2x2x7x7xf32>
// CHECK: %[[XT:.*]] = kiln.transpose %[[XG]] {permutation = array<i64: 2, 1, 0, 3, 4>} : tensor<2x2x2x7x7xf32>
// CHECK: %[[XS:.*]] = kiln.reshape %[[XT]] : tensor<2x2x2x7x7xf32> to tensor<2x4x7x7xf32>
// CHECK: %[[DYT:.*]] = kiln.transpose %[[DY]] {permutation = array<i64: 1, 0, 2, 3>} : tensor<2x6x3x2xf32>
// CHECK: %[[C:.*]] = kiln.conv %[[XS]], %[[DYT]] {dilations = array<i64: 2, 2>, groups = 2 : i64, padding = array<i64: 1, 0, 0, 0>, strides = array<i64: 1, 2>} : tensor<2x4x7x7xf32>, tensor<6x2x3x2xf32>
// CHECK: %[[CUT:.*]] = kiln.slice %[[C]] {limit = array<i64: 2, 6, 3, 3>, start = array<i64: 0, 0, 0, 0>, stride = array<i64: 1, 1, 1, 1>} : tensor<2x6x4x3xf32>
// CHECK: %[[DW:.*]] = kiln.transpose %[[CUT]] {permutation = array<i64: 1, 0, 2, 3>} : tensor<2x6x3x3xf32>
// CHECK: return %{{.*}}, %[[DX]], %[[DW]] : tensor<f32>, tensor<2x4x7x7xf32>, tensor<6x2x3x3xf32>
func.func @forward() -> (tensor<f32> {kiln.name = "loss"}) {
  %x = kiln.get_param @x : tensor<2x4x7x7xf32>
  %w = kiln.get_param @w : tensor<6x2x3x3xf32>
  %y = kiln.conv %x, %w {strides = array<i64: 2, 2>, padding = array<i64: 1, 0, 0, 0>,
                         dilations = array<i64: 1, 2>, groups = 2 : i64}
      : tensor<2x4x7x7xf32>, tensor<6x2x3x3xf32>
  %l = kiln.reduce_sum %y {dimensions = array<i64: 0, 1, 2, 3>} : tensor<2x6x3x2xf32>
  return %l : tensor<f32>
}

// -----

// y = conv_transpose(x, w) is the input gradient of conv(., w): x's gradient
// is conv(dy, w) with the same attributes; w's is the filter gradient of that
// conv, with dy as its input and x as its output gradient.
kiln.param @x : tensor<1x4x3xf32>
kiln.param @w : tensor<4x1x2xf32>

// CHECK-LABEL: func.func @forward_grad(
// CHECK-SAME: -> (tensor<f32> {kiln.name = "loss"}, tensor<1x4x3xf32> {kiln.name = "x.grad"}, tensor<4x1x2xf32> {kiln.name = "w.grad"})
// CHECK: %[[X:.*]] = kiln.get_param @x
// CHECK: %[[W:.*]] = kiln.get_param @w
// CHECK: %[[DY:.*]] = kiln.broadcast %{{.*}} : tensor<1x1x1xf32> to tensor<1x2x8xf32>
// CHECK: %[[DX:.*]] = kiln.conv %[[DY]], %[[W]] {dilations = array<i64: 2>, groups = 2 : i64, padding = array<i64: 0, 0>, strides = array<i64: 2>} : tensor<1x2x8xf32>, tensor<4x1x2xf32>
// CHECK: %[[G:.*]] = kiln.reshape %[[DY]] : tensor<1x2x8xf32> to tensor<1x2x1x8xf32>
// CHECK: %[[GT:.*]] = kiln.transpose %[[G]] {permutation = array<i64: 2, 1, 0, 3>} : tensor<1x2x1x8xf32>
// CHECK: %[[GS:.*]] = kiln.reshape %[[GT]] : tensor<1x2x1x8xf32> to tensor<1x2x8xf32>
// CHECK: %[[XT:.*]] = kiln.transpose %[[X]] {permutation = array<i64: 1, 0, 2>} : tensor<1x4x3xf32>
// CHECK: %[[C:.*]] = kiln.conv %[[GS]], %[[XT]] {dilations = array<i64: 2>, groups = 2 : i64, padding = array<i64: 0, 0>, strides = array<i64: 2>} : tensor<1x2x8xf32>, tensor<4x1x3xf32>
// CHECK: %[[DW:.*]] = kiln.transpose %[[C]] {permutation = array<i64: 1, 0, 2>} : tensor<1x4x2xf32>
// CHECK: return %{{.*}}, %[[DX]], %[[DW]] : tensor<f32>, tensor<1x4x3xf32>, tensor<4x1x2xf32>
func.func @forward() -> (tensor<f32> {kiln.name = "loss"}) {
  %x = kiln.get_param @x : tensor<1x4x3xf32>
  %w = kiln.get_param @w : tensor<4x1x2xf32>
  %y = kiln.conv_transpose %x, %w {strides = array<i64: 2>, padding = array<i64: 0, 0>,
                                   dilations = array<i64: 2>, output_padding = array<i64: 1>,
                                   groups = 2 : i64}
      : tensor<1x4x3xf32>, tensor<4x1x2xf32>
  %l = kiln.reduce_sum %y {dimensions = array<i64: 0, 1, 2>} : tensor<1x2x8xf32>
  return %l : tensor<f32>
}
