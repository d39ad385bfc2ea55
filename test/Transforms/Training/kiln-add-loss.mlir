// RUN: kiln-opt %s -split-input-file -verify-diagnostics --kiln-add-loss="on=logits" | FileCheck %s
// RUN: kiln-opt %s -split-input-file -verify-diagnostics --kiln-add-loss="on=logits class-axis=-1 ignore-index=0 label-smoothing=0.1" | FileCheck %s --check-prefix=AXIS
// RUN: kiln-opt %s -split-input-file -verify-diagnostics --kiln-add-loss="kind=mse on=logits" | FileCheck %s --check-prefix=MSE
// RUN: kiln-opt %s -split-input-file -verify-diagnostics --kiln-add-loss="kind=bce_with_logits on=logits" | FileCheck %s --check-prefix=BCE

// cross_entropy appends an int64 labels argument shaped like the logits
// without the class axis, and a scalar result named loss: the mean over the
// counted labels, ignore_index -100 as in PyTorch. Other results stay.
// CHECK-LABEL: func.func @forward(
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x3x5xf32> {kiln.name = "x"}, %[[L:[^:]*]]: tensor<2x5xi64> {kiln.name = "labels"})
// CHECK-SAME: -> (tensor<2x3x5xf32> {kiln.name = "logits"}, tensor<f32> {kiln.name = "loss"})
// CHECK: %[[CE:.*]] = kiln.cross_entropy %[[X]], %[[L]] {ignore_index = -100 : i64} : tensor<2x3x5xf32>, tensor<2x5xi64>
// CHECK: return %[[X]], %[[CE]]

// The classes on the last axis (language-model logits) move to axis 1.
// AXIS-LABEL: func.func @forward(
// AXIS-SAME: %[[X:[^:]*]]: tensor<2x3x5xf32> {kiln.name = "x"}, %[[L:[^:]*]]: tensor<2x3xi64> {kiln.name = "labels"})
// AXIS: %[[T:.*]] = kiln.transpose %[[X]] {permutation = array<i64: 0, 2, 1>}
// AXIS: kiln.cross_entropy %[[T]], %[[L]] {ignore_index = 0 : i64, label_smoothing = 1.000000e-01 : f64} : tensor<2x5x3xf32>, tensor<2x3xi64>

// mse: mean((y - t)^2) against float targets shaped like the output.
// MSE-LABEL: func.func @forward(
// MSE-SAME: %[[X:[^:]*]]: tensor<2x3x5xf32> {kiln.name = "x"}, %[[T:[^:]*]]: tensor<2x3x5xf32> {kiln.name = "labels"})
// MSE: %[[D:.*]] = kiln.sub %[[X]], %[[T]]
// MSE: %[[SQ:.*]] = kiln.mul %[[D]], %[[D]]
// MSE: %[[M:.*]] = kiln.reduce_mean %[[SQ]] {dimensions = array<i64: 0, 1, 2>}
// MSE: return %[[X]], %[[M]]

// bce_with_logits: relu(x) - x t + softplus(-|x|), averaged.
// BCE-LABEL: func.func @forward(
// BCE-SAME: %[[X:[^:]*]]: tensor<2x3x5xf32> {kiln.name = "x"}, %[[T:[^:]*]]: tensor<2x3x5xf32> {kiln.name = "labels"})
// BCE: %[[A:.*]] = kiln.abs %[[X]]
// BCE: %[[N:.*]] = kiln.neg %[[A]]
// BCE: %[[R:.*]] = kiln.relu %[[X]]
// BCE: %[[XT:.*]] = kiln.mul %[[X]], %[[T]]
// BCE: %[[S:.*]] = kiln.sub %[[R]], %[[XT]]
// BCE: %[[SP:.*]] = kiln.softplus %[[N]]
// BCE: %[[SUM:.*]] = kiln.add %[[S]], %[[SP]]
// BCE: kiln.reduce_mean %[[SUM]] {dimensions = array<i64: 0, 1, 2>}
func.func @forward(%x: tensor<2x3x5xf32> {kiln.name = "x"})
    -> (tensor<2x3x5xf32> {kiln.name = "logits"}) {
  return %x : tensor<2x3x5xf32>
}

// -----

// expected-error @+1 {{kiln-add-loss: the model has no output 'logits'; its outputs: y, z}}
func.func @forward(%x: tensor<2x3xf32> {kiln.name = "x"})
    -> (tensor<2x3xf32> {kiln.name = "y"}, tensor<2x3xf32> {kiln.name = "z"}) {
  return %x, %x : tensor<2x3xf32>, tensor<2x3xf32>
}

// -----

// expected-error @+1 {{kiln-add-loss: the model already has an output named 'loss'; use it as the loss (--loss-output) instead of building one}}
func.func @forward(%x: tensor<2x3xf32> {kiln.name = "x"})
    -> (tensor<2x3xf32> {kiln.name = "logits"}, tensor<f32> {kiln.name = "loss"}) {
  %c = kiln.constant dense<0.0> : tensor<f32>
  return %x, %c : tensor<2x3xf32>, tensor<f32>
}

// -----

// expected-error @+1 {{kiln-add-loss: the model already has an input named 'labels'; name the labels input differently (--labels)}}
func.func @forward(%labels: tensor<2xi64> {kiln.name = "labels"}, %x: tensor<2x3xf32> {kiln.name = "x"})
    -> (tensor<2x3xf32> {kiln.name = "logits"}) {
  return %x : tensor<2x3xf32>
}

// -----

// expected-error @+1 {{kiln-add-loss: output 'logits' is 'tensor<2x3xi64>', not a float tensor}}
func.func @forward(%x: tensor<2x3xi64> {kiln.name = "x"})
    -> (tensor<2x3xi64> {kiln.name = "logits"}) {
  return %x : tensor<2x3xi64>
}
