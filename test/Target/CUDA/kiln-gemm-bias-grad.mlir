// RUN: kiln-opt %s --kiln-gemm-bias-grad --split-input-file | FileCheck %s
// RUN: kiln-opt %s --kiln-gemm-bias-grad --split-input-file --mlir-print-local-scope | FileCheck %s --check-prefix=MAPS

#at = affine_map<(d0, d1, d2) -> (d2, d0)>
#b = affine_map<(d0, d1, d2) -> (d2, d1)>
#c = affine_map<(d0, d1, d2) -> (d0, d1)>
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#last3 = affine_map<(d0, d1, d2) -> (d2)>

// A linear layer's backward pass, with the weight stored [out, in]: the
// weight's gradient dy^T x (the left operand transposed, k over the 8 rows)
// and the bias's, the sum of the [2, 4, 6] gradient over its rows. The sum
// becomes the product's second output, along m, added where n's index is 0.
// CHECK-LABEL: func.func @weight_out_in(
// CHECK-SAME: %[[DY:.*]]: tensor<2x4x6xf32>, %[[X:.*]]: tensor<8x5xf32>
// CHECK: %[[ROWS:.*]] = tensor.collapse_shape %[[DY]] {{\[\[}}0, 1], [2]]
// CHECK: %[[P:.*]]:2 = linalg.generic {{.*}} ins(%[[ROWS]], %[[X]] : tensor<8x6xf32>, tensor<8x5xf32>) outs(%{{.*}}, %{{.*}} : tensor<6x5xf32>, tensor<6xf32>) attrs = {kiln.matmul = {bias_grad, bias_grad_of_lhs, transpose_lhs}}
// CHECK: linalg.index 1
// CHECK: arith.cmpi eq
// CHECK: arith.select
// CHECK-NOT: linalg.generic
// CHECK: return %[[P]]#0, %[[P]]#1
// MAPS-LABEL: func.func @weight_out_in(
// MAPS: linalg.generic {indexing_maps = [{{.*}}, affine_map<(d0, d1, d2) -> (d0)>]
func.func @weight_out_in(%dy: tensor<2x4x6xf32>, %x: tensor<8x5xf32>) -> (tensor<6x5xf32>, tensor<6xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<6xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<6xf32>) -> tensor<6xf32>
  %db = linalg.generic {indexing_maps = [#id3, #last3], iterator_types = ["reduction", "reduction", "parallel"]} ins(%dy : tensor<2x4x6xf32>) outs(%f : tensor<6xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %s = arith.addf %acc, %in : f32
    linalg.yield %s : f32
  } -> tensor<6xf32>
  %rows = tensor.collapse_shape %dy [[0, 1], [2]] : tensor<2x4x6xf32> into tensor<8x6xf32>
  %pe = tensor.empty() : tensor<6x5xf32>
  %pf = linalg.fill ins(%zero : f32) outs(%pe : tensor<6x5xf32>) -> tensor<6x5xf32>
  %dw = linalg.generic {indexing_maps = [#at, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%rows, %x : tensor<8x6xf32>, tensor<8x5xf32>) outs(%pf : tensor<6x5xf32>) attrs = {kiln.matmul = {transpose_lhs}} {
  ^bb0(%l: f32, %r: f32, %acc: f32):
    %m = arith.mulf %l, %r : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<6x5xf32>
  return %dw, %db : tensor<6x5xf32>, tensor<6xf32>
}

// -----

#at = affine_map<(d0, d1, d2) -> (d2, d0)>
#b = affine_map<(d0, d1, d2) -> (d2, d1)>
#c = affine_map<(d0, d1, d2) -> (d0, d1)>
#id2 = affine_map<(d0, d1) -> (d0, d1)>
#last2 = affine_map<(d0, d1) -> (d1)>

// The weight stored [in, out]: x^T dy, the right operand's rows are k; the
// vector runs along n. The sum's user comes before the product, whose
// operands are there: the merged op goes where the sum was.
// CHECK-LABEL: func.func @weight_in_out(
// CHECK-SAME: %[[X:.*]]: tensor<8x5xf32>, %[[DY:.*]]: tensor<8x6xf32>
// CHECK: %[[P:.*]]:2 = linalg.generic {{.*}} ins(%[[X]], %[[DY]] : tensor<8x5xf32>, tensor<8x6xf32>) outs(%{{.*}}, %{{.*}} : tensor<5x6xf32>, tensor<6xf32>) attrs = {kiln.matmul = {bias_grad, transpose_lhs}}
// CHECK: linalg.index 0
// CHECK: %[[USE:.*]] = arith.negf
// CHECK-NOT: linalg.generic {{.*}} kiln.matmul
// CHECK: return %[[P]]#0
// MAPS-LABEL: func.func @weight_in_out(
// MAPS: linalg.generic {indexing_maps = [{{.*}}, affine_map<(d0, d1, d2) -> (d1)>]
func.func @weight_in_out(%x: tensor<8x5xf32>, %dy: tensor<8x6xf32>) -> (tensor<5x6xf32>, tensor<6xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<6xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<6xf32>) -> tensor<6xf32>
  %db = linalg.generic {indexing_maps = [#id2, #last2], iterator_types = ["reduction", "parallel"]} ins(%dy : tensor<8x6xf32>) outs(%f : tensor<6xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %s = arith.addf %in, %acc : f32
    linalg.yield %s : f32
  } -> tensor<6xf32>
  %o = tensor.empty() : tensor<6xf32>
  %neg = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%db : tensor<6xf32>) outs(%o : tensor<6xf32>) {
  ^bb0(%in: f32, %out: f32):
    %n = arith.negf %in : f32
    linalg.yield %n : f32
  } -> tensor<6xf32>
  %pe = tensor.empty() : tensor<5x6xf32>
  %pf = linalg.fill ins(%zero : f32) outs(%pe : tensor<5x6xf32>) -> tensor<5x6xf32>
  %dw = linalg.generic {indexing_maps = [#at, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%x, %dy : tensor<8x5xf32>, tensor<8x6xf32>) outs(%pf : tensor<5x6xf32>) attrs = {kiln.matmul = {transpose_lhs}} {
  ^bb0(%l: f32, %r: f32, %acc: f32):
    %m = arith.mulf %l, %r : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<5x6xf32>
  return %dw, %neg : tensor<5x6xf32>, tensor<6xf32>
}

// -----

#a = affine_map<(d0, d1, d2) -> (d0, d2)>
#bt = affine_map<(d0, d1, d2) -> (d1, d2)>
#b = affine_map<(d0, d1, d2) -> (d2, d1)>
#c = affine_map<(d0, d1, d2) -> (d0, d1)>
#id2 = affine_map<(d0, d1) -> (d0, d1)>
#last2 = affine_map<(d0, d1) -> (d1)>

// Left alone: a product that reads the summed tensor with k along its
// columns (the left operand, not transposed).
// CHECK-LABEL: func.func @not_over_k(
// CHECK-NOT: bias_grad
// CHECK: return
func.func @not_over_k(%dy: tensor<8x6xf32>, %w: tensor<5x6xf32>) -> (tensor<8x5xf32>, tensor<6xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<6xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<6xf32>) -> tensor<6xf32>
  %db = linalg.generic {indexing_maps = [#id2, #last2], iterator_types = ["reduction", "parallel"]} ins(%dy : tensor<8x6xf32>) outs(%f : tensor<6xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %s = arith.addf %acc, %in : f32
    linalg.yield %s : f32
  } -> tensor<6xf32>
  %pe = tensor.empty() : tensor<8x5xf32>
  %pf = linalg.fill ins(%zero : f32) outs(%pe : tensor<8x5xf32>) -> tensor<8x5xf32>
  %dx = linalg.generic {indexing_maps = [#a, #bt, #c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%dy, %w : tensor<8x6xf32>, tensor<5x6xf32>) outs(%pf : tensor<8x5xf32>) attrs = {kiln.matmul = {transpose_rhs}} {
  ^bb0(%l: f32, %r: f32, %acc: f32):
    %m = arith.mulf %l, %r : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<8x5xf32>
  return %dx, %db : tensor<8x5xf32>, tensor<6xf32>
}

// Left alone: a sum that accumulates into a value (gradient accumulation),
// which the epilogue, writing the vector, cannot do.
// CHECK-LABEL: func.func @accumulating_sum(
// CHECK-NOT: bias_grad
// CHECK: return
func.func @accumulating_sum(%dy: tensor<8x6xf32>, %v: tensor<6x8xf32>, %init: tensor<6xf32>) -> (tensor<6x6xf32>, tensor<6xf32>) {
  %zero = arith.constant 0.0 : f32
  %db = linalg.generic {indexing_maps = [#id2, #last2], iterator_types = ["reduction", "parallel"]} ins(%dy : tensor<8x6xf32>) outs(%init : tensor<6xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %s = arith.addf %acc, %in : f32
    linalg.yield %s : f32
  } -> tensor<6xf32>
  %qe = tensor.empty() : tensor<6x6xf32>
  %qf = linalg.fill ins(%zero : f32) outs(%qe : tensor<6x6xf32>) -> tensor<6x6xf32>
  %vv = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%v, %dy : tensor<6x8xf32>, tensor<8x6xf32>) outs(%qf : tensor<6x6xf32>) attrs = {kiln.matmul = {}} {
  ^bb0(%l: f32, %r: f32, %acc: f32):
    %m = arith.mulf %l, %r : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<6x6xf32>
  return %vv, %db : tensor<6x6xf32>, tensor<6xf32>
}
