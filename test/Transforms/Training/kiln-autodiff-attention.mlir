// RUN: kiln-opt %s -split-input-file --kiln-autodiff | FileCheck %s

// kiln.attention's own gradient: the query, key and value gradients are one
// kiln.attention_grad of the operands, the result and its gradient (whose
// expansion kiln-decompose.mlir checks). A mask gets the gradient of the
// scores summed over the dimensions it was broadcast along: with
// S = q kᵀ scale + mask, P = softmax(S) (recomputed from q and k) and
// dP = dO vᵀ, dS = P (dP - rowsum(dP P)).

kiln.param @q : tensor<2x3x4xf32>
kiln.param @k : tensor<2x5x4xf32>
kiln.param @v : tensor<2x5x6xf32>
kiln.param @mask : tensor<3x5xf32>

// CHECK-LABEL: func.func @forward_grad(
// CHECK-SAME: -> (tensor<f32> {kiln.name = "loss"}, tensor<2x3x4xf32> {kiln.name = "q.grad"}, tensor<2x5x4xf32> {kiln.name = "k.grad"}, tensor<2x5x6xf32> {kiln.name = "v.grad"}, tensor<3x5xf32> {kiln.name = "mask.grad"})
// CHECK: %[[Q:.*]] = kiln.get_param @q
// CHECK: %[[K:.*]] = kiln.get_param @k
// CHECK: %[[V:.*]] = kiln.get_param @v
// CHECK: %[[M:.*]] = kiln.get_param @mask
// CHECK: %[[O:.*]] = kiln.attention %[[Q]], %[[K]], %[[V]] mask %[[M]]
// CHECK: %[[DO:.*]] = kiln.broadcast %{{.*}} : tensor<1x1x1xf32> to tensor<2x3x6xf32>
// CHECK: %[[DQ:.*]], %[[DK:.*]], %[[DV:.*]] = kiln.attention_grad %[[Q]], %[[K]], %[[V]], %[[O]], %[[DO]] mask %[[M]] : tensor<3x5xf32> {scale = 5.000000e-01 : f64}
// CHECK: %[[QK:.*]] = kiln.matmul %[[Q]], %[[K]] {transpose_rhs} : tensor<2x3x4xf32>, tensor<2x5x4xf32>
// CHECK: %[[HALF:.*]] = kiln.constant dense<5.000000e-01> : tensor<2x3x5xf32>
// CHECK: %[[SCALED:.*]] = kiln.mul %[[QK]], %[[HALF]] : tensor<2x3x5xf32>
// CHECK: %[[MB:.*]] = kiln.broadcast %[[M]] : tensor<3x5xf32> to tensor<2x3x5xf32>
// CHECK: %[[S:.*]] = kiln.add %[[SCALED]], %[[MB]] : tensor<2x3x5xf32>
// CHECK: %[[P:.*]] = kiln.softmax %[[S]] {axis = 2 : i64} : tensor<2x3x5xf32>
// CHECK: %[[DP:.*]] = kiln.matmul %[[DO]], %[[V]] {transpose_rhs} : tensor<2x3x6xf32>, tensor<2x5x6xf32>
// CHECK: %[[DPP:.*]] = kiln.mul %[[DP]], %[[P]] : tensor<2x3x5xf32>
// CHECK: %[[ROW:.*]] = kiln.reduce_sum %[[DPP]] {dimensions = array<i64: 2>, keepdims} : tensor<2x3x5xf32>
// CHECK: %[[ROWB:.*]] = kiln.broadcast %[[ROW]] : tensor<2x3x1xf32> to tensor<2x3x5xf32>
// CHECK: %[[CENTERED:.*]] = kiln.sub %[[DP]], %[[ROWB]] : tensor<2x3x5xf32>
// CHECK: %[[DS:.*]] = kiln.mul %[[P]], %[[CENTERED]] : tensor<2x3x5xf32>
// CHECK: %[[DM:.*]] = kiln.reduce_sum %[[DS]] {dimensions = array<i64: 0>} : tensor<2x3x5xf32>
// CHECK: return %{{.*}}, %[[DQ]], %[[DK]], %[[DV]], %[[DM]]
func.func @forward() -> (tensor<f32> {kiln.name = "loss"}) {
  %q = kiln.get_param @q : tensor<2x3x4xf32>
  %k = kiln.get_param @k : tensor<2x5x4xf32>
  %v = kiln.get_param @v : tensor<2x5x6xf32>
  %m = kiln.get_param @mask : tensor<3x5xf32>
  %o = kiln.attention %q, %k, %v mask %m : tensor<3x5xf32> {scale = 0.5 : f64}
      : tensor<2x3x4xf32>, tensor<2x5x4xf32>, tensor<2x5x6xf32>
  %l = kiln.reduce_sum %o {dimensions = array<i64: 0, 1, 2>} : tensor<2x3x6xf32>
  return %l : tensor<f32>
}

// -----

// No mask: the gradients are the kiln.attention_grad's alone.

kiln.param @q : tensor<3x4xf32>
kiln.param @k : tensor<5x4xf32>
kiln.param @v : tensor<5x2xf32>

// CHECK-LABEL: func.func @forward_grad(
// CHECK: %[[Q:.*]] = kiln.get_param @q
// CHECK: %[[K:.*]] = kiln.get_param @k
// CHECK: %[[V:.*]] = kiln.get_param @v
// CHECK: %[[O:.*]] = kiln.attention %[[Q]], %[[K]], %[[V]] :
// CHECK: %[[DQ:.*]], %[[DK:.*]], %[[DV:.*]] = kiln.attention_grad %[[Q]], %[[K]], %[[V]], %[[O]], %{{[0-9]+}} : tensor<3x4xf32>, tensor<5x4xf32>, tensor<5x2xf32>, tensor<3x2xf32>
// CHECK-NEXT: return %{{.*}}, %[[DQ]], %[[DK]], %[[DV]] :
func.func @forward() -> (tensor<f32> {kiln.name = "loss"}) {
  %q = kiln.get_param @q : tensor<3x4xf32>
  %k = kiln.get_param @k : tensor<5x4xf32>
  %v = kiln.get_param @v : tensor<5x2xf32>
  %o = kiln.attention %q, %k, %v : tensor<3x4xf32>, tensor<5x4xf32>, tensor<5x2xf32>
  %l = kiln.reduce_sum %o {dimensions = array<i64: 0, 1>} : tensor<3x2xf32>
  return %l : tensor<f32>
}

// -----

// masked_fill: the query, key and value gradients are a masked_fill
// kiln.attention_grad. The mask's gradient is all of dS: a score it fills
// is the mask's value itself, one it does not is the score plus the mask.

kiln.param @q : tensor<3x4xf32>
kiln.param @k : tensor<5x4xf32>
kiln.param @v : tensor<5x2xf32>
kiln.param @mask : tensor<5xf32>

// CHECK-LABEL: func.func @forward_grad(
// CHECK: %[[O:.*]] = kiln.attention %{{.*}}, %{{.*}}, %{{.*}} mask %{{.*}} : tensor<5xf32> {masked_fill}
// CHECK: kiln.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %[[O]], %{{.*}} mask %{{.*}} : tensor<5xf32> {masked_fill}
// CHECK-NOT: kiln.select
// CHECK: kiln.sub
// CHECK-NEXT: %[[DS:.*]] = kiln.mul %{{.*}}, %{{.*}} : tensor<3x5xf32>
// CHECK-NOT: kiln.select
// CHECK: %[[DM:.*]] = kiln.reduce_sum %[[DS]] {dimensions = array<i64: 0>} : tensor<3x5xf32>
// CHECK: return %{{.*}}, %[[DM]]
func.func @forward() -> (tensor<f32> {kiln.name = "loss"}) {
  %q = kiln.get_param @q : tensor<3x4xf32>
  %k = kiln.get_param @k : tensor<5x4xf32>
  %v = kiln.get_param @v : tensor<5x2xf32>
  %m = kiln.get_param @mask : tensor<5xf32>
  %o = kiln.attention %q, %k, %v mask %m : tensor<5xf32> {masked_fill}
      : tensor<3x4xf32>, tensor<5x4xf32>, tensor<5x2xf32>
  %l = kiln.reduce_sum %o {dimensions = array<i64: 0, 1>} : tensor<3x2xf32>
  return %l : tensor<f32>
}
