// RUN: kiln-opt %s -split-input-file -verify-diagnostics --kiln-autodiff | FileCheck %s

// kiln.cross_entropy's own gradient: the logits' gradient is one
// kiln.cross_entropy_grad of the logits, the labels, the constant class
// weights and the loss's gradient, with the op's attributes (its expansion
// is checked in kiln-decompose.mlir). The labels and weights get none.

kiln.param @x : tensor<4x5xf32>

// CHECK-LABEL: func.func @forward_grad(
// CHECK-SAME: %[[T:.*]]: tensor<4xi64>
// CHECK-SAME: -> (tensor<f32> {kiln.name = "loss"}, tensor<4x5xf32> {kiln.name = "x.grad"})
// CHECK: %[[X:.*]] = kiln.get_param @x
// CHECK: %[[W:.*]] = kiln.constant
// CHECK: %[[L:.*]] = kiln.cross_entropy %[[X]], %[[T]] weight %[[W]]
// CHECK: %[[SEED:.*]] = kiln.constant {kiln.grad_seed} dense<1.000000e+00> : tensor<f32>
// CHECK: %[[DX:.*]] = kiln.cross_entropy_grad %[[X]], %[[T]], %[[SEED]] weight %[[W]] : tensor<5xf32> {ignore_index = 2 : i64, label_smoothing = 2.000000e-01 : f64} : tensor<4x5xf32>, tensor<4xi64>, tensor<f32>
// CHECK-NEXT: return %[[L]], %[[DX]] :
func.func @forward(%labels: tensor<4xi64>) -> (tensor<f32> {kiln.name = "loss"}) {
  %x = kiln.get_param @x : tensor<4x5xf32>
  %w = kiln.constant dense<[1.0, 2.0, 0.5, 1.0, 3.0]> : tensor<5xf32>
  %l = kiln.cross_entropy %x, %labels weight %w : tensor<5xf32>
      {ignore_index = 2 : i64, label_smoothing = 0.2 : f64} : tensor<4x5xf32>, tensor<4xi64>
  return %l : tensor<f32>
}

// -----

// Class weights that are not a constant (here a parameter) would need a
// gradient the rule does not build: an error, never a missing gradient.

kiln.param @x : tensor<4x5xf32>
kiln.param @w : tensor<5xf32>

func.func @forward(%labels: tensor<4xi64>) -> (tensor<f32> {kiln.name = "loss"}) {
  %x = kiln.get_param @x : tensor<4x5xf32>
  %w = kiln.get_param @w : tensor<5xf32>
  // expected-error @+1 {{kiln-autodiff: kiln.cross_entropy's class weights are not a constant; expand the op first (kiln-decompose) to differentiate them}}
  %l = kiln.cross_entropy %x, %labels weight %w : tensor<5xf32> : tensor<4x5xf32>, tensor<4xi64>
  return %l : tensor<f32>
}
