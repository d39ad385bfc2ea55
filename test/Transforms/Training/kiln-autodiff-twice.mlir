// RUN: kiln-opt %s --kiln-autodiff --kiln-autodiff -verify-diagnostics

// Running the pass twice finds its own output and says so.
// expected-error @+1 {{kiln-autodiff: 'forward_grad' already exists}}
module {
  kiln.param @w : tensor<2xf32> = dense<1.0> : tensor<2xf32>
  func.func @forward(%x: tensor<2xf32>) -> (tensor<f32> {kiln.name = "loss"}) {
    %w = kiln.get_param @w : tensor<2xf32>
    %y = kiln.mul %x, %w : tensor<2xf32>
    %l = kiln.reduce_sum %y {dimensions = array<i64: 0>} : tensor<2xf32>
    return %l : tensor<f32>
  }
}
