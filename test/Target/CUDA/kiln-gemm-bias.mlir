// RUN: kiln-opt %s --kiln-gemm-bias --canonicalize --split-input-file | FileCheck %s

#a = affine_map<(d0, d1, d2) -> (d0, d2)>
#b = affine_map<(d0, d1, d2) -> (d2, d1)>
#c = affine_map<(d0, d1, d2) -> (d0, d1)>
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#last3 = affine_map<(d0, d1, d2) -> (d2)>

// A linear layer's bias addition, read through the [batch, rows, n] view of
// the product: the product accumulates into the bias broadcast instead of
// its zero fill, and the addition, now a copy, goes.
// CHECK-LABEL: func.func @linear(
// CHECK-SAME: %[[X:.*]]: tensor<8x4xf32>, %[[W:.*]]: tensor<4x6xf32>, %[[BIAS:.*]]: tensor<6xf32>
// CHECK: %[[B:.*]] = linalg.generic {{.*}} ins(%[[BIAS]] : tensor<6xf32>) outs(%{{.*}} : tensor<8x6xf32>) attrs = {kiln.gemm_bias}
// CHECK: %[[P:.*]] = linalg.generic {{.*}} ins(%[[X]], %[[W]] : tensor<8x4xf32>, tensor<4x6xf32>) outs(%[[B]] : tensor<8x6xf32>) attrs = {kiln.matmul = {}}
// CHECK: %[[E:.*]] = tensor.expand_shape %[[P]]
// CHECK-NOT: linalg
// CHECK: return %[[E]]
func.func @linear(%x: tensor<8x4xf32>, %w: tensor<4x6xf32>, %bias: tensor<6xf32>) -> tensor<2x4x6xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x6xf32>
  %fill = linalg.fill ins(%zero : f32) outs(%e : tensor<8x6xf32>) -> tensor<8x6xf32>
  %p = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%x, %w : tensor<8x4xf32>, tensor<4x6xf32>) outs(%fill : tensor<8x6xf32>) attrs = {kiln.matmul = {}} {
  ^bb0(%l: f32, %r: f32, %acc: f32):
    %m = arith.mulf %l, %r : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<8x6xf32>
  %v = tensor.expand_shape %p [[0, 1], [2]] output_shape [2, 4, 6] : tensor<8x6xf32> into tensor<2x4x6xf32>
  %o = tensor.empty() : tensor<2x4x6xf32>
  %y = linalg.generic {indexing_maps = [#last3, #id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%bias, %v : tensor<6xf32>, tensor<2x4x6xf32>) outs(%o : tensor<2x4x6xf32>) {
  ^bb0(%bi: f32, %pi: f32, %out: f32):
    %s = arith.addf %bi, %pi : f32
    linalg.yield %s : f32
  } -> tensor<2x4x6xf32>
  return %y : tensor<2x4x6xf32>
}

// -----

#a = affine_map<(d0, d1, d2) -> (d0, d2)>
#b = affine_map<(d0, d1, d2) -> (d2, d1)>
#c = affine_map<(d0, d1, d2) -> (d0, d1)>
#id = affine_map<(d0, d1) -> (d0, d1)>
#last = affine_map<(d0, d1) -> (d1)>

// A kernel that does more (a residual) keeps the rest of its work and
// reads the biased product.
// CHECK-LABEL: func.func @residual(
// CHECK-SAME: %{{.*}}: tensor<8x4xf32>, %{{.*}}: tensor<4x6xf32>, %[[BIAS:.*]]: tensor<6xf32>, %[[R:.*]]: tensor<8x6xf32>
// CHECK: %[[B:.*]] = linalg.generic {{.*}} ins(%[[BIAS]] : tensor<6xf32>) {{.*}} attrs = {kiln.gemm_bias}
// CHECK: %[[P:.*]] = linalg.generic {{.*}} outs(%[[B]] : tensor<8x6xf32>) attrs = {kiln.matmul = {}}
// CHECK: linalg.generic {{.*}} ins(%[[P]], %[[R]] : tensor<8x6xf32>, tensor<8x6xf32>)
// CHECK-NEXT: ^bb0(%[[PI:.*]]: f32, %[[RI:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT: %[[S:.*]] = arith.addf %[[PI]], %[[RI]] : f32
// CHECK-NEXT: linalg.yield %[[S]]
func.func @residual(%x: tensor<8x4xf32>, %w: tensor<4x6xf32>, %bias: tensor<6xf32>, %r: tensor<8x6xf32>) -> tensor<8x6xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x6xf32>
  %fill = linalg.fill ins(%zero : f32) outs(%e : tensor<8x6xf32>) -> tensor<8x6xf32>
  %p = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%x, %w : tensor<8x4xf32>, tensor<4x6xf32>) outs(%fill : tensor<8x6xf32>) attrs = {kiln.matmul = {}} {
  ^bb0(%l: f32, %rr: f32, %acc: f32):
    %m = arith.mulf %l, %rr : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<8x6xf32>
  %o = tensor.empty() : tensor<8x6xf32>
  %y = linalg.generic {indexing_maps = [#id, #last, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%p, %bias, %r : tensor<8x6xf32>, tensor<6xf32>, tensor<8x6xf32>) outs(%o : tensor<8x6xf32>) {
  ^bb0(%pi: f32, %bi: f32, %ri: f32, %out: f32):
    %s = arith.addf %pi, %bi : f32
    %t = arith.addf %s, %ri : f32
    linalg.yield %t : f32
  } -> tensor<8x6xf32>
  return %y : tensor<8x6xf32>
}

// -----

#a = affine_map<(d0, d1, d2) -> (d0, d2)>
#b = affine_map<(d0, d1, d2) -> (d2, d1)>
#c = affine_map<(d0, d1, d2) -> (d0, d1)>
#id = affine_map<(d0, d1) -> (d0, d1)>
#first = affine_map<(d0, d1) -> (d0)>
#last = affine_map<(d0, d1) -> (d1)>

// Left alone: a vector along the rows (no epilogue adds that), and a
// product whose element is used twice.
// CHECK-LABEL: func.func @not_a_bias(
// CHECK-NOT: kiln.gemm_bias
// CHECK: linalg.fill
// CHECK-LABEL: func.func @used_twice(
// CHECK-NOT: kiln.gemm_bias
func.func @not_a_bias(%x: tensor<8x4xf32>, %w: tensor<4x6xf32>, %v: tensor<8xf32>) -> tensor<8x6xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x6xf32>
  %fill = linalg.fill ins(%zero : f32) outs(%e : tensor<8x6xf32>) -> tensor<8x6xf32>
  %p = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%x, %w : tensor<8x4xf32>, tensor<4x6xf32>) outs(%fill : tensor<8x6xf32>) attrs = {kiln.matmul = {}} {
  ^bb0(%l: f32, %r: f32, %acc: f32):
    %m = arith.mulf %l, %r : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<8x6xf32>
  %o = tensor.empty() : tensor<8x6xf32>
  %y = linalg.generic {indexing_maps = [#id, #first, #id], iterator_types = ["parallel", "parallel"]} ins(%p, %v : tensor<8x6xf32>, tensor<8xf32>) outs(%o : tensor<8x6xf32>) {
  ^bb0(%pi: f32, %vi: f32, %out: f32):
    %s = arith.addf %pi, %vi : f32
    linalg.yield %s : f32
  } -> tensor<8x6xf32>
  return %y : tensor<8x6xf32>
}

func.func @used_twice(%x: tensor<8x4xf32>, %w: tensor<4x6xf32>, %bias: tensor<6xf32>) -> tensor<8x6xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x6xf32>
  %fill = linalg.fill ins(%zero : f32) outs(%e : tensor<8x6xf32>) -> tensor<8x6xf32>
  %p = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%x, %w : tensor<8x4xf32>, tensor<4x6xf32>) outs(%fill : tensor<8x6xf32>) attrs = {kiln.matmul = {}} {
  ^bb0(%l: f32, %r: f32, %acc: f32):
    %m = arith.mulf %l, %r : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<8x6xf32>
  %o = tensor.empty() : tensor<8x6xf32>
  %y = linalg.generic {indexing_maps = [#id, #last, #id], iterator_types = ["parallel", "parallel"]} ins(%p, %bias : tensor<8x6xf32>, tensor<6xf32>) outs(%o : tensor<8x6xf32>) {
  ^bb0(%pi: f32, %bi: f32, %out: f32):
    %s = arith.addf %pi, %bi : f32
    %t = arith.mulf %s, %pi : f32
    linalg.yield %t : f32
  } -> tensor<8x6xf32>
  return %y : tensor<8x6xf32>
}
