// RUN: kiln-opt %s --kiln-externalize-params -verify-diagnostics

kiln.param @w : tensor<2xf32>
// Arguments cannot be appended to a function that has callers.
// expected-error @+1 {{kiln-externalize-params: 'inner' reads parameters and is called; only entry functions may read parameters}}
func.func @inner(%x: tensor<2xf32>) -> tensor<2xf32> {
  %w = kiln.get_param @w : tensor<2xf32>
  %y = kiln.add %x, %w : tensor<2xf32>
  return %y : tensor<2xf32>
}
func.func @outer(%x: tensor<2xf32>) -> tensor<2xf32> {
  %y = func.call @inner(%x) : (tensor<2xf32>) -> tensor<2xf32>
  return %y : tensor<2xf32>
}
