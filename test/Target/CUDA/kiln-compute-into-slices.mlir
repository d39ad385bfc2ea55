// RUN: kiln-opt %s --kiln-compute-into-slices --split-input-file | FileCheck %s
// RUN: kiln-opt %s --kiln-compute-into-slices --split-input-file --one-shot-bufferize --cse --canonicalize | FileCheck %s --check-prefix=BUFFERS

#perm = affine_map<(d0, d1, d2, d3) -> (d0, d2, d1, d3)>
#id4 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>

// Two heads' gradients of q and k, [batch, heads, rows, 4], transposed back
// to [batch, rows, heads * 4] and concatenated: each transposition computes
// into its slice of the concatenation (through the collapse's expansion),
// moved to just before its insertion. Bufferized, nothing is copied.
// CHECK-LABEL: func.func @concat(
// CHECK-SAME: %[[DQ:.*]]: tensor<2x2x3x4xf32>, %[[DK:.*]]: tensor<2x2x3x4xf32>
// CHECK: %[[DEST:.*]] = tensor.empty() : tensor<2x3x16xf32>
// CHECK: %[[S0:.*]] = tensor.extract_slice %[[DEST]][0, 0, 0] [2, 3, 8] [1, 1, 1]
// CHECK: %[[E0:.*]] = tensor.expand_shape %[[S0]] {{\[\[}}0], [1], [2, 3]]
// CHECK: %[[T0:.*]] = linalg.generic {{.*}} ins(%[[DQ]] : {{.*}}) outs(%[[E0]] :
// CHECK: %[[C0:.*]] = tensor.collapse_shape %[[T0]]
// CHECK: %[[I0:.*]] = tensor.insert_slice %[[C0]] into %[[DEST]][0, 0, 0]
// CHECK: %[[S1:.*]] = tensor.extract_slice %[[I0]][0, 0, 8] [2, 3, 8] [1, 1, 1]
// CHECK: %[[E1:.*]] = tensor.expand_shape %[[S1]]
// CHECK: %[[T1:.*]] = linalg.generic {{.*}} ins(%[[DK]] : {{.*}}) outs(%[[E1]] :
// CHECK: %[[C1:.*]] = tensor.collapse_shape %[[T1]]
// CHECK: tensor.insert_slice %[[C1]] into %[[I0]][0, 0, 8]
// BUFFERS-LABEL: func.func @concat(
// BUFFERS: memref.alloc() {{.*}} : memref<2x3x16xf32>
// BUFFERS-NOT: memref.copy
// BUFFERS-NOT: memref.alloc
// BUFFERS: return
func.func @concat(%dq: tensor<2x2x3x4xf32>, %dk: tensor<2x2x3x4xf32>) -> tensor<2x3x16xf32> {
  %e = tensor.empty() : tensor<2x3x2x4xf32>
  %tq = linalg.generic {indexing_maps = [#perm, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%dq : tensor<2x2x3x4xf32>) outs(%e : tensor<2x3x2x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  } -> tensor<2x3x2x4xf32>
  %tk = linalg.generic {indexing_maps = [#perm, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%dk : tensor<2x2x3x4xf32>) outs(%e : tensor<2x3x2x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  } -> tensor<2x3x2x4xf32>
  %cq = tensor.collapse_shape %tq [[0], [1], [2, 3]] : tensor<2x3x2x4xf32> into tensor<2x3x8xf32>
  %ck = tensor.collapse_shape %tk [[0], [1], [2, 3]] : tensor<2x3x2x4xf32> into tensor<2x3x8xf32>
  %dest = tensor.empty() : tensor<2x3x16xf32>
  %i0 = tensor.insert_slice %cq into %dest[0, 0, 0] [2, 3, 8] [1, 1, 1] : tensor<2x3x8xf32> into tensor<2x3x16xf32>
  %i1 = tensor.insert_slice %ck into %i0[0, 0, 8] [2, 3, 8] [1, 1, 1] : tensor<2x3x8xf32> into tensor<2x3x16xf32>
  return %i1 : tensor<2x3x16xf32>
}

// -----

#id2 = affine_map<(d0, d1) -> (d0, d1)>

// Left alone: a result read elsewhere too (it must exist on its own), and a
// payload that reads the tensor it computes into.
// CHECK-LABEL: func.func @left_alone(
// CHECK-NOT: tensor.extract_slice
// CHECK: return
func.func @left_alone(%a: tensor<2x4xf32>, %b: tensor<2x4xf32>) -> (tensor<2x8xf32>, tensor<2x4xf32>) {
  %e = tensor.empty() : tensor<2x4xf32>
  %neg = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]} ins(%a : tensor<2x4xf32>) outs(%e : tensor<2x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %n = arith.negf %in : f32
    linalg.yield %n : f32
  } -> tensor<2x4xf32>
  %acc = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]} ins(%b : tensor<2x4xf32>) outs(%e : tensor<2x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.addf %in, %out : f32
    linalg.yield %s : f32
  } -> tensor<2x4xf32>
  %dest = tensor.empty() : tensor<2x8xf32>
  %i0 = tensor.insert_slice %neg into %dest[0, 0] [2, 4] [1, 1] : tensor<2x4xf32> into tensor<2x8xf32>
  %i1 = tensor.insert_slice %acc into %i0[0, 4] [2, 4] [1, 1] : tensor<2x4xf32> into tensor<2x8xf32>
  return %i1, %neg : tensor<2x8xf32>, tensor<2x4xf32>
}
