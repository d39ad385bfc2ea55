// RUN: kiln-opt %s --kiln-merge-sibling-reductions --split-input-file | FileCheck %s

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#col = affine_map<(d0, d1, d2) -> (d2)>

// A layer norm's bias and weight gradients, sums over the rows of dy and of
// dy * xhat into [n]: one op at the second's place, the first's input and
// output first, each output filled anew there; the products between them
// stay where they were.
// CHECK-LABEL: func.func @norm_grads(
// CHECK-SAME: %[[DY:.*]]: tensor<2x3x4xf32>, %[[XHAT:.*]]: tensor<2x3x4xf32>
// CHECK: %[[SCALED:.*]] = linalg.generic {{.*}} ins(%[[DY]], %[[XHAT]] :
// CHECK: %[[F0:.*]] = linalg.fill
// CHECK: %[[F1:.*]] = linalg.fill
// CHECK: %[[M:.*]]:2 = linalg.generic {indexing_maps = [#{{.*}}, #{{.*}}, #[[COL:.*]], #[[COL]]], iterator_types = ["reduction", "reduction", "parallel"]} ins(%[[DY]], %[[SCALED]] : {{.*}}) outs(%[[F0]], %[[F1]] : tensor<4xf32>, tensor<4xf32>)
// CHECK: ^bb0(%[[A:.*]]: f32, %[[B:.*]]: f32, %[[ACC0:.*]]: f32, %[[ACC1:.*]]: f32):
// CHECK-DAG: %[[S0:.*]] = arith.addf %[[ACC0]], %[[A]]
// CHECK-DAG: %[[S1:.*]] = arith.addf %[[ACC1]], %[[B]]
// CHECK: linalg.yield %[[S0]], %[[S1]]
// CHECK: return %[[M]]#0, %[[M]]#1
func.func @norm_grads(%dy: tensor<2x3x4xf32>, %xhat: tensor<2x3x4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %db = linalg.generic {indexing_maps = [#id3, #col], iterator_types = ["reduction", "reduction", "parallel"]} ins(%dy : tensor<2x3x4xf32>) outs(%f0 : tensor<4xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %s = arith.addf %acc, %in : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  %e3 = tensor.empty() : tensor<2x3x4xf32>
  %scaled = linalg.generic {indexing_maps = [#id3, #id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%dy, %xhat : tensor<2x3x4xf32>, tensor<2x3x4xf32>) outs(%e3 : tensor<2x3x4xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %m = arith.mulf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<2x3x4xf32>
  %e1 = tensor.empty() : tensor<4xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<4xf32>) -> tensor<4xf32>
  %dw = linalg.generic {indexing_maps = [#id3, #col], iterator_types = ["reduction", "reduction", "parallel"]} ins(%scaled : tensor<2x3x4xf32>) outs(%f1 : tensor<4xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %s = arith.addf %acc, %in : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  return %db, %dw : tensor<4xf32>, tensor<4xf32>
}

// -----

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#col = affine_map<(d0, d1, d2) -> (d2)>
#bcast = affine_map<(d0, d1, d2) -> (d2)>

// Left alone: a reduction that reads the other's result (through an
// elementwise op), and one whose result is read between them.
// CHECK-LABEL: func.func @dependent(
// CHECK-COUNT-3: linalg.generic
// CHECK-NOT: linalg.generic
func.func @dependent(%x: tensor<2x3x4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %s0 = linalg.generic {indexing_maps = [#id3, #col], iterator_types = ["reduction", "reduction", "parallel"]} ins(%x : tensor<2x3x4xf32>) outs(%f0 : tensor<4xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %s = arith.addf %acc, %in : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  %e3 = tensor.empty() : tensor<2x3x4xf32>
  %centered = linalg.generic {indexing_maps = [#id3, #bcast, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%x, %s0 : tensor<2x3x4xf32>, tensor<4xf32>) outs(%e3 : tensor<2x3x4xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %d = arith.subf %a, %b : f32
    linalg.yield %d : f32
  } -> tensor<2x3x4xf32>
  %e1 = tensor.empty() : tensor<4xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<4xf32>) -> tensor<4xf32>
  %s1 = linalg.generic {indexing_maps = [#id3, #col], iterator_types = ["reduction", "reduction", "parallel"]} ins(%centered : tensor<2x3x4xf32>) outs(%f1 : tensor<4xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %s = arith.addf %acc, %in : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  return %s0, %s1 : tensor<4xf32>, tensor<4xf32>
}
