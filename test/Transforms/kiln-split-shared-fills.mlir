// RUN: kiln-opt %s --kiln-split-shared-fills | FileCheck %s

#lhs = affine_map<(m, n, k) -> (m, k)>
#rhs = affine_map<(m, n, k) -> (k, n)>
#out = affine_map<(m, n, k) -> (m, n)>

// One zero fill (as CSE leaves it) initializes two products: each gets its
// own tensor.empty and fill, just before it, and the shared one goes (a
// product that overwrites its output must find its fill right before it).
// CHECK-LABEL: func.func @shared_fill(
// CHECK-SAME: %[[A:.*]]: tensor<2x3xf32>, %[[B:.*]]: tensor<3x4xf32>, %[[C:.*]]: tensor<3x4xf32>
// CHECK: %[[ZERO:.*]] = arith.constant 0.0
// CHECK-NEXT: %[[E1:.*]] = tensor.empty() : tensor<2x4xf32>
// CHECK-NEXT: %[[F1:.*]] = linalg.fill ins(%[[ZERO]] : f32) outs(%[[E1]] :
// CHECK-NEXT: %[[P1:.*]] = linalg.generic {{.*}} ins(%[[A]], %[[B]] : {{.*}} outs(%[[F1]] :
// CHECK: %[[E2:.*]] = tensor.empty() : tensor<2x4xf32>
// CHECK-NEXT: %[[F2:.*]] = linalg.fill ins(%[[ZERO]] : f32) outs(%[[E2]] :
// CHECK-NEXT: %[[P2:.*]] = linalg.generic {{.*}} ins(%[[A]], %[[C]] : {{.*}} outs(%[[F2]] :
// CHECK-NOT: linalg.fill
// CHECK: return %[[P1]], %[[P2]]
func.func @shared_fill(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>, %c: tensor<3x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x4xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<2x4xf32>) -> tensor<2x4xf32>
  %p1 = linalg.generic {indexing_maps = [#lhs, #rhs, #out],
                        iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : tensor<2x3xf32>, tensor<3x4xf32>) outs(%z : tensor<2x4xf32>) {
  ^bb0(%l: f32, %r: f32, %o: f32):
    %m = arith.mulf %l, %r : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x4xf32>
  %p2 = linalg.generic {indexing_maps = [#lhs, #rhs, #out],
                        iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %c : tensor<2x3xf32>, tensor<3x4xf32>) outs(%z : tensor<2x4xf32>) {
  ^bb0(%l: f32, %r: f32, %o: f32):
    %m = arith.mulf %l, %r : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x4xf32>
  return %p1, %p2 : tensor<2x4xf32>, tensor<2x4xf32>
}

// A fill of anything but a tensor.empty (here an argument) stays shared.
// CHECK-LABEL: func.func @fill_of_argument(
// CHECK-COUNT-1: linalg.fill
// CHECK-NOT: linalg.fill
func.func @fill_of_argument(%t: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %zero = arith.constant 0.0 : f32
  %z = linalg.fill ins(%zero : f32) outs(%t : tensor<4xf32>) -> tensor<4xf32>
  return %z, %z : tensor<4xf32>, tensor<4xf32>
}
