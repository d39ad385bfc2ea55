// RUN: kiln-opt %s -split-input-file --kiln-autodiff | FileCheck %s

// Max pooling, windows of 3 every 2 with one element of padding each side,
// so neighbouring windows share an element. Each window offset reads a
// strided slice of the input padded with NaN (which equals nothing, so the
// padding never takes a gradient); an output's gradient goes to the first
// offset whose element equals the maximum and no earlier one did (PyTorch's
// tie rule), is put back where the slice read it (spread by the stride: a
// unit dimension padded to 2 and flattened, then placed at the offset), and
// the sum loses the padding at the end.
kiln.param @x : tensor<1x1x5xf32>

// CHECK-LABEL: func.func @forward_grad(
// CHECK-SAME: -> (tensor<f32> {kiln.name = "loss"}, tensor<1x1x5xf32> {kiln.name = "x.grad"})
// CHECK: %[[X:.*]] = kiln.get_param @x
// CHECK: %[[Y:.*]] = kiln.max_pool %[[X]]
// CHECK: %[[DY:.*]] = kiln.broadcast %{{.*}} : tensor<1x1x1xf32> to tensor<1x1x3xf32>
// CHECK: %[[P:.*]] = kiln.pad %[[X]] {high = array<i64: 0, 0, 1>, low = array<i64: 0, 0, 1>, value = 0x7FF8000000000000 : f64} : tensor<1x1x5xf32>
// CHECK: %[[ZERO:.*]] = kiln.constant dense<0.000000e+00> : tensor<1x1x3xf32>
// Offset 0: the first maximum wherever it is one.
// CHECK: %[[S0:.*]] = kiln.slice %[[P]] {limit = array<i64: 1, 1, 5>, start = array<i64: 0, 0, 0>, stride = array<i64: 1, 1, 2>} : tensor<1x1x7xf32>
// CHECK: %[[H0:.*]] = kiln.compare <eq>, %[[S0]], %[[Y]] : tensor<1x1x3xf32>
// CHECK: %[[G0:.*]] = kiln.select %[[H0]], %[[DY]], %[[ZERO]]
// CHECK: %[[U0:.*]] = kiln.reshape %[[G0]] : tensor<1x1x3xf32> to tensor<1x1x3x1xf32>
// CHECK: %[[V0:.*]] = kiln.pad %[[U0]] {high = array<i64: 0, 0, 0, 1>, low = array<i64: 0, 0, 0, 0>} : tensor<1x1x3x1xf32>
// CHECK: %[[W0:.*]] = kiln.reshape %[[V0]] : tensor<1x1x3x2xf32> to tensor<1x1x6xf32>
// CHECK: %[[D0:.*]] = kiln.pad %[[W0]] {high = array<i64: 0, 0, 1>, low = array<i64: 0, 0, 0>} : tensor<1x1x6xf32>
// Offset 1: only where offset 0 did not take it.
// CHECK: %[[S1:.*]] = kiln.slice %[[P]] {limit = array<i64: 1, 1, 6>, start = array<i64: 0, 0, 1>, stride = array<i64: 1, 1, 2>} : tensor<1x1x7xf32>
// CHECK: %[[H1:.*]] = kiln.compare <eq>, %[[S1]], %[[Y]] : tensor<1x1x3xf32>
// CHECK: %[[N1:.*]] = kiln.not %[[H0]] : tensor<1x1x3xi1>
// CHECK: %[[F1:.*]] = kiln.and %[[H1]], %[[N1]] : tensor<1x1x3xi1>
// CHECK: %[[T1:.*]] = kiln.or %[[H0]], %[[H1]] : tensor<1x1x3xi1>
// CHECK: kiln.select %[[F1]], %[[DY]], %[[ZERO]]
// CHECK: %[[D1:.*]] = kiln.pad %{{.*}} {high = array<i64: 0, 0, 0>, low = array<i64: 0, 0, 1>} : tensor<1x1x6xf32>
// CHECK: %[[SUM1:.*]] = kiln.add %[[D0]], %[[D1]] : tensor<1x1x7xf32>
// Offset 2: only where neither earlier offset took it.
// CHECK: %[[S2:.*]] = kiln.slice %[[P]] {limit = array<i64: 1, 1, 7>, start = array<i64: 0, 0, 2>, stride = array<i64: 1, 1, 2>} : tensor<1x1x7xf32>
// CHECK: %[[H2:.*]] = kiln.compare <eq>, %[[S2]], %[[Y]] : tensor<1x1x3xf32>
// CHECK: %[[N2:.*]] = kiln.not %[[T1]] : tensor<1x1x3xi1>
// CHECK: %[[F2:.*]] = kiln.and %[[H2]], %[[N2]] : tensor<1x1x3xi1>
// CHECK: kiln.select %[[F2]], %[[DY]], %[[ZERO]]
// The spread gradient is one longer than the room after offset 2: cut.
// CHECK: %[[C2:.*]] = kiln.slice %{{.*}} {limit = array<i64: 1, 1, 5>, start = array<i64: 0, 0, 0>, stride = array<i64: 1, 1, 1>} : tensor<1x1x6xf32>
// CHECK: %[[D2:.*]] = kiln.pad %[[C2]] {high = array<i64: 0, 0, 0>, low = array<i64: 0, 0, 2>} : tensor<1x1x5xf32>
// CHECK: %[[SUM2:.*]] = kiln.add %[[SUM1]], %[[D2]] : tensor<1x1x7xf32>
// CHECK: %[[DX:.*]] = kiln.slice %[[SUM2]] {limit = array<i64: 1, 1, 6>, start = array<i64: 0, 0, 1>, stride = array<i64: 1, 1, 1>} : tensor<1x1x7xf32>
// CHECK: return %{{.*}}, %[[DX]] : tensor<f32>, tensor<1x1x5xf32>
func.func @forward() -> (tensor<f32> {kiln.name = "loss"}) {
  %x = kiln.get_param @x : tensor<1x1x5xf32>
  %y = kiln.max_pool %x {kernel = array<i64: 3>, strides = array<i64: 2>,
                         padding = array<i64: 1, 1>} : tensor<1x1x5xf32>
  %l = kiln.reduce_sum %y {dimensions = array<i64: 0, 1, 2>} : tensor<1x1x3xf32>
  return %l : tensor<f32>
}

// -----

// Average pooling, 3x2 windows every 2, one row of padding each side
// counted in the divisor, and ceil mode: the last row of windows starts on
// the input's last row and runs one row past the end padding. The gradient
// divides by each window's count (6 in full windows; 4 in the last row,
// which counts the padding row but not the row past it) and applies a
// depthwise transposed convolution with a filter of ones, whose end padding
// of 2 rows drops the padding row and the row past it.
kiln.param @x : tensor<1x2x6x4xf32>

// CHECK-LABEL: func.func @forward_grad(
// CHECK-SAME: -> (tensor<f32> {kiln.name = "loss"}, tensor<1x2x6x4xf32> {kiln.name = "x.grad"})
// CHECK: %[[DY:.*]] = kiln.broadcast %{{.*}} : tensor<1x1x1x1xf32> to tensor<1x2x4x2xf32>
// CHECK: %[[COUNT:.*]] = kiln.constant dense<{{\[}}[6.000000e+00, 6.000000e+00], [6.000000e+00, 6.000000e+00], [6.000000e+00, 6.000000e+00], [4.000000e+00, 4.000000e+00]]> : tensor<4x2xf32>
// CHECK: %[[COUNTS:.*]] = kiln.broadcast %[[COUNT]] : tensor<4x2xf32> to tensor<1x2x4x2xf32>
// CHECK: %[[MEAN:.*]] = kiln.div %[[DY]], %[[COUNTS]] : tensor<1x2x4x2xf32>
// CHECK: %[[ONES:.*]] = kiln.constant dense<1.000000e+00> : tensor<2x1x3x2xf32>
// CHECK: %[[DX:.*]] = kiln.conv_transpose %[[MEAN]], %[[ONES]] {dilations = array<i64: 1, 1>, groups = 2 : i64, output_padding = array<i64: 0, 0>, padding = array<i64: 1, 0, 2, 0>, strides = array<i64: 2, 2>} : tensor<1x2x4x2xf32>, tensor<2x1x3x2xf32>
// CHECK: return %{{.*}}, %[[DX]] : tensor<f32>, tensor<1x2x6x4xf32>
func.func @forward() -> (tensor<f32> {kiln.name = "loss"}) {
  %x = kiln.get_param @x : tensor<1x2x6x4xf32>
  %y = kiln.avg_pool %x {kernel = array<i64: 3, 2>, strides = array<i64: 2, 2>,
                         padding = array<i64: 1, 0, 1, 0>, ceil_mode, count_include_pad}
      : tensor<1x2x6x4xf32>
  %l = kiln.reduce_sum %y {dimensions = array<i64: 0, 1, 2, 3>} : tensor<1x2x4x2xf32>
  return %l : tensor<f32>
}
