// RUN: kiln-opt %s -split-input-file -verify-diagnostics --kiln-autodiff | FileCheck %s
// RUN: kiln-opt %s -split-input-file -verify-diagnostics --kiln-autodiff="freeze=b.*" | FileCheck %s --check-prefix=FREEZE

// @forward_grad returns the loss, then d loss / d param for every float
// parameter read, in first-read order, named <param>.grad. The rules are the
// textbook vector-Jacobian products (as torch.autograd computes them): for
// C = A B, dA = dC B^T and dB = A^T dC; a broadcast sums the gradient back
// over the broadcast dimensions; tanh' = 1 - tanh^2; relu' = [x > 0];
// (x / y)' = (1 / y, -(x / y) / y).

kiln.param @fc.weight : tensor<4x3xf32>
kiln.param @fc.bias : tensor<3xf32>

// The forward function stays as it was.
// CHECK-LABEL: func.func @forward(
// CHECK-SAME: -> (tensor<f32> {kiln.name = "loss"}, tensor<2x3xf32> {kiln.name = "y"})

// CHECK-LABEL: func.func @forward_grad(
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x4xf32> {kiln.name = "x"})
// CHECK-SAME: -> (tensor<f32> {kiln.name = "loss"}, tensor<4x3xf32> {kiln.name = "fc.weight.grad"}, tensor<3xf32> {kiln.name = "fc.bias.grad"})
// CHECK: %[[W:.*]] = kiln.get_param @fc.weight : tensor<4x3xf32>
// CHECK: %[[T:.*]] = kiln.tanh %{{.*}} : tensor<2x3xf32>
// CHECK: %[[LOSS:.*]] = kiln.reduce_sum %[[T]] {dimensions = array<i64: 0, 1>} : tensor<2x3xf32>
// The seed 1, spread over the reduced dimensions.
// CHECK: %[[SEED:.*]] = kiln.constant {kiln.grad_seed} dense<1.000000e+00> : tensor<f32>
// CHECK: %[[SEED2:.*]] = kiln.reshape %[[SEED]] : tensor<f32> to tensor<1x1xf32>
// CHECK: %[[DT:.*]] = kiln.broadcast %[[SEED2]] : tensor<1x1xf32> to tensor<2x3xf32>
// tanh: dT * (1 - t * t).
// CHECK: %[[ONE:.*]] = kiln.constant dense<1.000000e+00> : tensor<2x3xf32>
// CHECK: %[[TT:.*]] = kiln.mul %[[T]], %[[T]] : tensor<2x3xf32>
// CHECK: %[[D:.*]] = kiln.sub %[[ONE]], %[[TT]] : tensor<2x3xf32>
// CHECK: %[[DY:.*]] = kiln.mul %[[DT]], %[[D]] : tensor<2x3xf32>
// The bias was broadcast over dimension 0: summed back.
// CHECK: %[[DB:.*]] = kiln.reduce_sum %[[DY]] {dimensions = array<i64: 0>} : tensor<2x3xf32>
// dW = x^T dY.
// CHECK: %[[DW:.*]] = kiln.matmul %[[X]], %[[DY]] {transpose_lhs} : tensor<2x4xf32>, tensor<2x3xf32>
// CHECK: return %[[LOSS]], %[[DW]], %[[DB]] : tensor<f32>, tensor<4x3xf32>, tensor<3xf32>
func.func @forward(%x: tensor<2x4xf32> {kiln.name = "x"})
    -> (tensor<f32> {kiln.name = "loss"}, tensor<2x3xf32> {kiln.name = "y"}) {
  %w = kiln.get_param @fc.weight : tensor<4x3xf32>
  %b = kiln.get_param @fc.bias : tensor<3xf32>
  %h = kiln.matmul %x, %w : tensor<2x4xf32>, tensor<4x3xf32>
  %bb = kiln.broadcast %b : tensor<3xf32> to tensor<2x3xf32>
  %y = kiln.add %h, %bb : tensor<2x3xf32>
  %t = kiln.tanh %y : tensor<2x3xf32>
  %l = kiln.reduce_sum %t {dimensions = array<i64: 0, 1>} : tensor<2x3xf32>
  return %l, %y : tensor<f32>, tensor<2x3xf32>
}

// -----

// Transposed operands. P = x W^T: dW = dP^T x. Q = V^T Y^T: dV = Y^T dQ^T.
kiln.param @w : tensor<3x4xf32>
kiln.param @v : tensor<3x2xf32>

// CHECK-LABEL: func.func @forward_grad(
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x4xf32>, %[[Y:[^:]*]]: tensor<4x3xf32>)
// CHECK-SAME: -> (tensor<f32> {kiln.name = "loss"}, tensor<3x4xf32> {kiln.name = "w.grad"}, tensor<3x2xf32> {kiln.name = "v.grad"})
// CHECK: %[[DQ:.*]] = kiln.broadcast %{{.*}} : tensor<1x1xf32> to tensor<2x4xf32>
// CHECK: %[[DP:.*]] = kiln.broadcast %{{.*}} : tensor<1x1xf32> to tensor<2x3xf32>
// CHECK: %[[DV:.*]] = kiln.matmul %[[Y]], %[[DQ]] {transpose_lhs, transpose_rhs} : tensor<4x3xf32>, tensor<2x4xf32>
// CHECK: %[[DW:.*]] = kiln.matmul %[[DP]], %[[X]] {transpose_lhs} : tensor<2x3xf32>, tensor<2x4xf32>
// CHECK: return %{{.*}}, %[[DW]], %[[DV]] : tensor<f32>, tensor<3x4xf32>, tensor<3x2xf32>
func.func @forward(%x: tensor<2x4xf32>, %y: tensor<4x3xf32>) -> (tensor<f32> {kiln.name = "loss"}) {
  %w = kiln.get_param @w : tensor<3x4xf32>
  %v = kiln.get_param @v : tensor<3x2xf32>
  %p = kiln.matmul %x, %w {transpose_rhs} : tensor<2x4xf32>, tensor<3x4xf32>
  %q = kiln.matmul %v, %y {transpose_lhs, transpose_rhs} : tensor<3x2xf32>, tensor<4x3xf32>
  %a = kiln.reduce_sum %p {dimensions = array<i64: 0, 1>} : tensor<2x3xf32>
  %c = kiln.reduce_sum %q {dimensions = array<i64: 0, 1>} : tensor<2x4xf32>
  %l = kiln.add %a, %c : tensor<f32>
  return %l : tensor<f32>
}

// -----

// mean(relu(w * x)): the mean divides the spread seed by 4, relu passes it
// where w * x > 0, the product multiplies it by x.
kiln.param @w : tensor<4xf32>

// CHECK-LABEL: func.func @forward_grad(
// CHECK-SAME: %[[X:[^:]*]]: tensor<4xf32>)
// CHECK-SAME: -> (tensor<f32> {kiln.name = "loss"}, tensor<4xf32> {kiln.name = "w.grad"})
// CHECK: %[[M:.*]] = kiln.mul %{{.*}}, %[[X]] : tensor<4xf32>
// CHECK: %[[SPREAD:.*]] = kiln.broadcast %{{.*}} : tensor<1xf32> to tensor<4xf32>
// CHECK: %[[COUNT:.*]] = kiln.constant dense<4.000000e+00> : tensor<4xf32>
// CHECK: %[[DR:.*]] = kiln.div %[[SPREAD]], %[[COUNT]] : tensor<4xf32>
// CHECK: %[[ZERO:.*]] = kiln.constant dense<0.000000e+00> : tensor<4xf32>
// CHECK: %[[POS:.*]] = kiln.compare <gt>, %[[M]], %[[ZERO]] : tensor<4xf32>
// CHECK: %[[DM:.*]] = kiln.select %[[POS]], %[[DR]], %{{.*}} : tensor<4xi1>, tensor<4xf32>
// CHECK: %[[DW:.*]] = kiln.mul %[[DM]], %[[X]] : tensor<4xf32>
// CHECK: return %{{.*}}, %[[DW]] : tensor<f32>, tensor<4xf32>
func.func @forward(%x: tensor<4xf32>) -> (tensor<f32> {kiln.name = "loss"}) {
  %w = kiln.get_param @w : tensor<4xf32>
  %m = kiln.mul %w, %x : tensor<4xf32>
  %r = kiln.relu %m : tensor<4xf32>
  %l = kiln.reduce_mean %r {dimensions = array<i64: 0>} : tensor<4xf32>
  return %l : tensor<f32>
}

// -----

// q = w / v: dw = dq / v, dv = -(dq / v) * q.
kiln.param @w : tensor<4xf32>
kiln.param @v : tensor<4xf32>

// CHECK-LABEL: func.func @forward_grad(
// CHECK-SAME: -> (tensor<f32> {kiln.name = "loss"}, tensor<4xf32> {kiln.name = "w.grad"}, tensor<4xf32> {kiln.name = "v.grad"})
// CHECK: %[[V:.*]] = kiln.get_param @v : tensor<4xf32>
// CHECK: %[[Q:.*]] = kiln.div %{{.*}}, %[[V]] : tensor<4xf32>
// CHECK: %[[DQ:.*]] = kiln.broadcast %{{.*}} : tensor<1xf32> to tensor<4xf32>
// CHECK: %[[DW:.*]] = kiln.div %[[DQ]], %[[V]] : tensor<4xf32>
// CHECK: %[[P:.*]] = kiln.mul %[[DW]], %[[Q]] : tensor<4xf32>
// CHECK: %[[DV:.*]] = kiln.neg %[[P]] : tensor<4xf32>
// CHECK: return %{{.*}}, %[[DW]], %[[DV]] : tensor<f32>, tensor<4xf32>, tensor<4xf32>
func.func @forward() -> (tensor<f32> {kiln.name = "loss"}) {
  %w = kiln.get_param @w : tensor<4xf32>
  %v = kiln.get_param @v : tensor<4xf32>
  %q = kiln.div %w, %v : tensor<4xf32>
  %l = kiln.reduce_sum %q {dimensions = array<i64: 0>} : tensor<4xf32>
  return %l : tensor<f32>
}

// -----

// A parameter read twice (tied weights): the gradients of both reads are
// added. A value used twice (d + d): its two gradients are added.
kiln.param @emb : tensor<5x4xf32>

// CHECK-LABEL: func.func @forward_grad(
// CHECK-SAME: %[[X:[^:]*]]: tensor<5x4xf32>)
// CHECK-SAME: -> (tensor<f32> {kiln.name = "loss"}, tensor<5x4xf32> {kiln.name = "emb.grad"})
// CHECK: %[[D:.*]] = kiln.exp %{{.*}} : tensor<5x4xf32>
// CHECK: %[[DS:.*]] = kiln.broadcast %{{.*}} : tensor<1x1xf32> to tensor<5x4xf32>
// CHECK: %[[DE2:.*]] = kiln.mul %[[DS]], %[[X]] : tensor<5x4xf32>
// CHECK: %[[DD:.*]] = kiln.add %[[DS]], %[[DS]] : tensor<5x4xf32>
// CHECK: %[[DE1:.*]] = kiln.mul %[[DD]], %[[D]] : tensor<5x4xf32>
// CHECK: %[[TOTAL:.*]] = kiln.add %[[DE1]], %[[DE2]] : tensor<5x4xf32>
// CHECK: return %{{.*}}, %[[TOTAL]] : tensor<f32>, tensor<5x4xf32>
func.func @forward(%x: tensor<5x4xf32>) -> (tensor<f32> {kiln.name = "loss"}) {
  %e1 = kiln.get_param @emb : tensor<5x4xf32>
  %d = kiln.exp %e1 : tensor<5x4xf32>
  %dd = kiln.add %d, %d : tensor<5x4xf32>
  %e2 = kiln.get_param @emb : tensor<5x4xf32>
  %p = kiln.mul %e2, %x : tensor<5x4xf32>
  %s = kiln.add %dd, %p : tensor<5x4xf32>
  %l = kiln.reduce_sum %s {dimensions = array<i64: 0, 1>} : tensor<5x4xf32>
  return %l : tensor<f32>
}

// -----

// Integer parameters get no gradient; nor does a float parameter whose only
// path to the loss goes through integers: it is a buffer, as a torch
// parameter whose .grad stays None.
kiln.param @w : tensor<4xf32>
kiln.param @steps : tensor<4xi64>

// CHECK-LABEL: func.func @forward_grad(
// CHECK-SAME: -> (tensor<f32> {kiln.name = "loss"})
// CHECK: return %{{.*}} : tensor<f32>
func.func @forward() -> (tensor<f32> {kiln.name = "loss"}) {
  %w = kiln.get_param @w : tensor<4xf32>
  %steps = kiln.get_param @steps : tensor<4xi64>
  %i = kiln.cast %w : tensor<4xf32> to tensor<4xi64>
  %n = kiln.add %i, %steps : tensor<4xi64>
  %f = kiln.cast %n : tensor<4xi64> to tensor<4xf32>
  %l = kiln.reduce_sum %f {dimensions = array<i64: 0>} : tensor<4xf32>
  return %l : tensor<f32>
}

// -----

// freeze=b.* : b.0 and b.1 get no gradient result (and w still does).
kiln.param @w : tensor<4xf32>
kiln.param @b.0 : tensor<4xf32>
kiln.param @b.1 : tensor<4xf32>

// CHECK-LABEL: func.func @forward_grad({{.*}}"freeze_case"})
// CHECK-SAME: -> (tensor<f32> {kiln.name = "loss"}, tensor<4xf32> {kiln.name = "w.grad"}, tensor<4xf32> {kiln.name = "b.0.grad"}, tensor<4xf32> {kiln.name = "b.1.grad"})

// FREEZE-LABEL: func.func @forward_grad({{.*}}"freeze_case"})
// FREEZE-SAME: -> (tensor<f32> {kiln.name = "loss"}, tensor<4xf32> {kiln.name = "w.grad"})
// FREEZE: %[[S:.*]] = kiln.add %{{.*}}, %{{.*}} : tensor<4xf32>
// FREEZE: %[[WS:.*]] = kiln.mul %{{.*}}, %[[S]] : tensor<4xf32>
// FREEZE: kiln.mul %[[WS]], %[[X:.*]] : tensor<4xf32>
// FREEZE: %[[SEED:.*]] = kiln.broadcast %{{.*}} : tensor<1xf32> to tensor<4xf32>
// FREEZE: %[[DWS:.*]] = kiln.mul %[[SEED]], %[[X]] : tensor<4xf32>
// FREEZE: %[[DW:.*]] = kiln.mul %[[DWS]], %[[S]] : tensor<4xf32>
// FREEZE: return %{{.*}}, %[[DW]] : tensor<f32>, tensor<4xf32>
func.func @forward(%x: tensor<4xf32> {kiln.name = "freeze_case"}) -> (tensor<f32> {kiln.name = "loss"}) {
  %w = kiln.get_param @w : tensor<4xf32>
  %b0 = kiln.get_param @b.0 : tensor<4xf32>
  %b1 = kiln.get_param @b.1 : tensor<4xf32>
  %s = kiln.add %b0, %b1 : tensor<4xf32>
  %ws = kiln.mul %w, %s : tensor<4xf32>
  %p = kiln.mul %ws, %x : tensor<4xf32>
  %l = kiln.reduce_sum %p {dimensions = array<i64: 0>} : tensor<4xf32>
  return %l : tensor<f32>
}

// -----

kiln.param @w : tensor<4xf32>

// expected-error @+1 {{kiln-autodiff: 'forward' has no result named 'loss'}}
func.func @forward() -> (tensor<f32> {kiln.name = "cost"}) {
  %w = kiln.get_param @w : tensor<4xf32>
  %l = kiln.reduce_sum %w {dimensions = array<i64: 0>} : tensor<4xf32>
  return %l : tensor<f32>
}

// -----

kiln.param @w : tensor<4xf32>

// expected-error @+1 {{kiln-autodiff: the loss 'loss' must be a float scalar, not 'tensor<4xf32>'}}
func.func @forward() -> (tensor<4xf32> {kiln.name = "loss"}) {
  %w = kiln.get_param @w : tensor<4xf32>
  return %w : tensor<4xf32>
}

// -----

kiln.param @w : tensor<4xf32>

// expected-error @+1 {{kiln-autodiff: the loss 'loss' must be a float scalar, not 'tensor<i64>'}}
func.func @forward() -> (tensor<i64> {kiln.name = "loss"}) {
  %w = kiln.get_param @w : tensor<4xf32>
  %i = kiln.argmax %w {axis = 0 : i64} : tensor<4xf32>
  return %i : tensor<i64>
}

// -----

kiln.param @w : tensor<4xf32>

func.func @forward() -> (tensor<f32> {kiln.name = "loss"}) {
  %w = kiln.get_param @w : tensor<4xf32>
  // expected-error @+1 {{no differentiation rule for kiln.reduce_prod, which lies between a differentiated input and the output}}
  %l = kiln.reduce_prod %w {dimensions = array<i64: 0>} : tensor<4xf32>
  return %l : tensor<f32>
}

// -----

// An op without a rule that does not lie between a parameter and the loss
// is no error: here the product only sees the input.
kiln.param @w : tensor<f32>

// CHECK-LABEL: func.func @forward_grad(
// CHECK-SAME: -> (tensor<f32> {kiln.name = "loss"}, tensor<f32> {kiln.name = "w.grad"})
func.func @forward(%x: tensor<4xf32>) -> (tensor<f32> {kiln.name = "loss"}) {
  %w = kiln.get_param @w : tensor<f32>
  %p = kiln.reduce_prod %x {dimensions = array<i64: 0>} : tensor<4xf32>
  %l = kiln.mul %p, %w : tensor<f32>
  return %l : tensor<f32>
}

// -----

// expected-error @+1 {{kiln-autodiff: no function 'forward'}}
module {
  func.func @model() -> (tensor<f32> {kiln.name = "loss"}) {
    %l = kiln.constant dense<0.0> : tensor<f32>
    return %l : tensor<f32>
  }
}
