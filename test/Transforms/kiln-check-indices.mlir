// RUN: kiln-opt %s -split-input-file --kiln-check-indices | FileCheck %s
// RUN: kiln-opt %s -split-input-file --kiln-check-indices --kiln-check-indices | FileCheck %s

// Token ids into an embedding table (a parameter) are rows [0, 16), as
// torch.nn.Embedding; labels of the cross-entropy are classes [0, 4) or the
// ignore_index. Each count is the f32 sum of the elements outside, appended
// as a result named for the runtime; the results before keep their
// attributes. Run twice, the pass adds nothing.

kiln.param @emb : tensor<16x4xf32>

// CHECK-LABEL: func.func @step(
// CHECK-SAME: %[[IDS:.*]]: tensor<2x3xi64> {kiln.name = "ids"}, %[[LABELS:.*]]: tensor<2xi32> {kiln.name = "labels"}
// CHECK-SAME: -> (tensor<f32> {kiln.name = "loss"}, tensor<f32> {kiln.name = "kiln.index_check|ids|the rows [0, 16) of 'emb'"}, tensor<f32> {kiln.name = "kiln.index_check|labels|the class indices [0, 4) and ignore_index -100"})
// CHECK: %[[ZERO:.*]] = kiln.constant dense<0> : tensor<2x3xi64>
// CHECK: %[[LT:.*]] = kiln.compare <lt>, %[[IDS]], %[[ZERO]] : tensor<2x3xi64>
// CHECK: %[[ROWS:.*]] = kiln.constant dense<16> : tensor<2x3xi64>
// CHECK: %[[GE:.*]] = kiln.compare <ge>, %[[IDS]], %[[ROWS]] : tensor<2x3xi64>
// CHECK: %[[BAD:.*]] = kiln.or %[[LT]], %[[GE]] : tensor<2x3xi1>
// CHECK: %[[F:.*]] = kiln.cast %[[BAD]] : tensor<2x3xi1> to tensor<2x3xf32>
// CHECK: %[[N:.*]] = kiln.reduce_sum %[[F]] {dimensions = array<i64: 0, 1>} : tensor<2x3xf32>
// CHECK: %[[LZERO:.*]] = kiln.constant dense<0> : tensor<2xi32>
// CHECK: %[[LLT:.*]] = kiln.compare <lt>, %[[LABELS]], %[[LZERO]] : tensor<2xi32>
// CHECK: %[[CLASSES:.*]] = kiln.constant dense<4> : tensor<2xi32>
// CHECK: %[[LGE:.*]] = kiln.compare <ge>, %[[LABELS]], %[[CLASSES]] : tensor<2xi32>
// CHECK: %[[LOUT:.*]] = kiln.or %[[LLT]], %[[LGE]] : tensor<2xi1>
// CHECK: %[[IGNORE:.*]] = kiln.constant dense<-100> : tensor<2xi32>
// CHECK: %[[COUNTED:.*]] = kiln.compare <ne>, %[[LABELS]], %[[IGNORE]] : tensor<2xi32>
// CHECK: %[[LBAD:.*]] = kiln.and %[[LOUT]], %[[COUNTED]] : tensor<2xi1>
// CHECK: %[[LF:.*]] = kiln.cast %[[LBAD]] : tensor<2xi1> to tensor<2xf32>
// CHECK: %[[LN:.*]] = kiln.reduce_sum %[[LF]] {dimensions = array<i64: 0>} : tensor<2xf32>
// CHECK: return %{{.*}}, %[[N]], %[[LN]] : tensor<f32>, tensor<f32>, tensor<f32>
func.func @step(%ids: tensor<2x3xi64> {kiln.name = "ids"}, %labels: tensor<2xi32> {kiln.name = "labels"})
    -> (tensor<f32> {kiln.name = "loss"}) {
  %table = kiln.get_param @emb : tensor<16x4xf32>
  %x = kiln.gather %table, %ids {axis = 0 : i64} : tensor<16x4xf32>, tensor<2x3xi64>
  %s = kiln.reduce_sum %x {dimensions = array<i64: 1>} : tensor<2x3x4xf32>
  %l = kiln.cross_entropy %s, %labels {ignore_index = -100 : i64} : tensor<2x4xf32>, tensor<2xi32>
  return %l : tensor<f32>
}

// -----

// A gather of other data takes ONNX's [-n, n); a reshaped argument is still
// the caller's; indices the graph computes (an iota) are not counted, nor is
// a loss without ignore_index given more than its range.

// CHECK-LABEL: func.func @data(
// CHECK-SAME: -> (tensor<2x5xf32> {kiln.name = "y"}, tensor<f32> {kiln.name = "kiln.index_check|i|[-7, 7), the positions of gather axis 1"})
// CHECK: kiln.constant dense<-7> : tensor<5xi64>
// CHECK: kiln.constant dense<7> : tensor<5xi64>
// CHECK-NOT: kiln.compare <ne>
// CHECK: return
func.func @data(%x: tensor<2x7xf32> {kiln.name = "x"}, %i: tensor<1x5xi64> {kiln.name = "i"})
    -> (tensor<2x5xf32> {kiln.name = "y"}) {
  %flat = kiln.reshape %i : tensor<1x5xi64> to tensor<5xi64>
  %y = kiln.gather %x, %flat {axis = 1 : i64} : tensor<2x7xf32>, tensor<5xi64>
  %iota = kiln.iota {dimension = 0 : i64} : tensor<3xi64>
  %z = kiln.gather %x, %iota {axis = 1 : i64} : tensor<2x7xf32>, tensor<3xi64>
  return %y : tensor<2x5xf32>
}

// -----

// Nothing indexed by an argument: the function is left as it was.

// CHECK-LABEL: func.func @plain(
// CHECK-SAME: -> (tensor<4xf32> {kiln.name = "y"})
// CHECK-NEXT: kiln.neg
// CHECK-NEXT: return
func.func @plain(%x: tensor<4xf32> {kiln.name = "x"}) -> (tensor<4xf32> {kiln.name = "y"}) {
  %y = kiln.neg %x : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// Two reshapes of one input into two lookups of one table: one count.

kiln.param @table : tensor<8x2xf32>

// CHECK-LABEL: func.func @twice(
// CHECK-SAME: -> (tensor<3x2xf32> {kiln.name = "a"}, tensor<3x2xf32> {kiln.name = "b"}, tensor<f32> {kiln.name = "kiln.index_check|i|the rows [0, 8) of 'table'"})
// CHECK-COUNT-1: kiln.reduce_sum
// CHECK-NOT: kiln.reduce_sum
func.func @twice(%i: tensor<1x3xi64> {kiln.name = "i"})
    -> (tensor<3x2xf32> {kiln.name = "a"}, tensor<3x2xf32> {kiln.name = "b"}) {
  %t = kiln.get_param @table : tensor<8x2xf32>
  %i1 = kiln.reshape %i : tensor<1x3xi64> to tensor<3xi64>
  %i2 = kiln.reshape %i : tensor<1x3xi64> to tensor<3xi64>
  %a = kiln.gather %t, %i1 {axis = 0 : i64} : tensor<8x2xf32>, tensor<3xi64>
  %b = kiln.gather %t, %i2 {axis = 0 : i64} : tensor<8x2xf32>, tensor<3xi64>
  return %a, %b : tensor<3x2xf32>, tensor<3x2xf32>
}
