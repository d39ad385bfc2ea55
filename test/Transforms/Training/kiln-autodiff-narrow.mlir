// RUN: kiln-opt %s -split-input-file -verify-diagnostics --kiln-autodiff | FileCheck %s

// A narrow value (float8 data, dequantized) takes no gradient: the rule
// stops at the cast from it.
kiln.param @w : tensor<4xf32>

// CHECK-LABEL: func.func @forward_grad(
// CHECK-SAME: -> (tensor<f32> {kiln.name = "loss"}, tensor<4xf32> {kiln.name = "w.grad"})
// CHECK: %[[X:.*]] = kiln.cast %{{.*}} : tensor<4xf8E4M3FN> to tensor<4xf32>
// CHECK-NOT: to tensor<4xf8E4M3FN>
// CHECK: return
func.func @forward(%q: tensor<4xf8E4M3FN> {kiln.name = "q"})
    -> (tensor<f32> {kiln.name = "loss"}) {
  %w = kiln.get_param @w : tensor<4xf32>
  %x = kiln.cast %q : tensor<4xf8E4M3FN> to tensor<4xf32>
  %y = kiln.mul %x, %w : tensor<4xf32>
  %l = kiln.reduce_sum %y {dimensions = array<i64: 0>} : tensor<4xf32>
  return %l : tensor<f32>
}

// -----

// Rounding a parameter through float8 on the way to the loss has no rule (it
// would need a straight-through estimate): an error at the cast back, not a
// parameter silently left without its gradient.
kiln.param @w : tensor<4xf32>

func.func @forward(%x: tensor<4xf32> {kiln.name = "x"})
    -> (tensor<f32> {kiln.name = "loss"}) {
  %w = kiln.get_param @w : tensor<4xf32>
  // expected-error @+2 {{has no gradient: a parameter rounded through a narrow type (float8, float4, int4, int2) is not differentiable yet}}
  %q = kiln.cast %w : tensor<4xf32> to tensor<4xf8E4M3FN>
  %r = kiln.cast %q : tensor<4xf8E4M3FN> to tensor<4xf32>
  %y = kiln.mul %x, %r : tensor<4xf32>
  %l = kiln.reduce_sum %y {dimensions = array<i64: 0>} : tensor<4xf32>
  return %l : tensor<f32>
}
