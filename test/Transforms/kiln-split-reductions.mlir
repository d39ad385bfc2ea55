// RUN: kiln-opt %s --kiln-split-reductions="max-threads=256 min-rows=8" --split-input-file | FileCheck %s

#id = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#col = affine_map<(d0, d1, d2) -> (d2)>

// A bias gradient: [4, 16, 32] summed into [32]. 64 rows, 32 columns: at
// most 256 / 32 = 8 groups of at least 8 rows, so 8 groups of 8. Every
// input is read as [8, 8, 32]; the partial sums (loops group, column, row
// in group) go into zeros of [8, 32], and the second sum adds the groups
// into the original output.
// CHECK-LABEL: func.func @bias_grad(
// CHECK-SAME: %[[DY:.*]]: tensor<4x16x32xf32>, %[[X:.*]]: tensor<4x16x32xf32>, %[[INIT:.*]]: tensor<32xf32>
// CHECK: %[[DYC:.*]] = tensor.collapse_shape %[[DY]] {{\[}}[0, 1], [2]] : tensor<4x16x32xf32> into tensor<64x32xf32>
// CHECK: %[[DYS:.*]] = tensor.expand_shape %[[DYC]] {{\[}}[0, 1], [2]] output_shape [8, 8, 32] : tensor<64x32xf32> into tensor<8x8x32xf32>
// CHECK: %[[XS:.*]] = tensor.expand_shape %{{.*}} : tensor<64x32xf32> into tensor<8x8x32xf32>
// CHECK: %[[ZEROS:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<8x32xf32>)
// CHECK: %[[PARTIAL:.*]] = linalg.generic {indexing_maps = [#[[IN:.*]], #[[IN]], #[[PART:.*]]], iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[DYS]], %[[XS]] : tensor<8x8x32xf32>, tensor<8x8x32xf32>) outs(%[[ZEROS]] : tensor<8x32xf32>)
// CHECK: arith.mulf
// CHECK: arith.addf
// CHECK: %[[SUM:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%[[PARTIAL]] : tensor<8x32xf32>) outs(%[[INIT]] : tensor<32xf32>)
// CHECK: return %[[SUM]]
func.func @bias_grad(%dy: tensor<4x16x32xf32>, %x: tensor<4x16x32xf32>, %init: tensor<32xf32>) -> tensor<32xf32> {
  %r = linalg.generic {indexing_maps = [#id, #id, #col], iterator_types = ["reduction", "reduction", "parallel"]} ins(%dy, %x : tensor<4x16x32xf32>, tensor<4x16x32xf32>) outs(%init : tensor<32xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<32xf32>
  return %r : tensor<32xf32>
}

// -----

#id2 = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#col2 = affine_map<(d0, d1) -> (d1)>

// Left alone: a row sum (the reduction is inner: each thread already reads
// its own row), a max (not a sum), and a sum with as many columns as
// threads allowed.
// CHECK-LABEL: func.func @row_sum(
// CHECK-NOT: tensor.expand_shape
// CHECK-LABEL: func.func @column_max(
// CHECK-NOT: tensor.expand_shape
// CHECK-LABEL: func.func @wide(
// CHECK-NOT: tensor.expand_shape
func.func @row_sum(%x: tensor<64x128xf32>, %init: tensor<64xf32>) -> tensor<64xf32> {
  %r = linalg.generic {indexing_maps = [#id2, #row], iterator_types = ["parallel", "reduction"]} ins(%x : tensor<64x128xf32>) outs(%init : tensor<64xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  } -> tensor<64xf32>
  return %r : tensor<64xf32>
}

func.func @column_max(%x: tensor<128x16xf32>, %init: tensor<16xf32>) -> tensor<16xf32> {
  %r = linalg.generic {indexing_maps = [#id2, #col2], iterator_types = ["reduction", "parallel"]} ins(%x : tensor<128x16xf32>) outs(%init : tensor<16xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.maximumf %acc, %a : f32
    linalg.yield %s : f32
  } -> tensor<16xf32>
  return %r : tensor<16xf32>
}

func.func @wide(%x: tensor<128x256xf32>, %init: tensor<256xf32>) -> tensor<256xf32> {
  %r = linalg.generic {indexing_maps = [#id2, #col2], iterator_types = ["reduction", "parallel"]} ins(%x : tensor<128x256xf32>) outs(%init : tensor<256xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  } -> tensor<256xf32>
  return %r : tensor<256xf32>
}
