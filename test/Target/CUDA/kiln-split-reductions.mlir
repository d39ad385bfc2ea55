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

// A row's sum (softmax's denominator: it also reads the row's maximum, and
// a vector along the row) in 32 interleaved parts of 4: part g sums
// elements g, g + 32, g + 64, g + 96, read as [64, 4, 32]; the per-row
// maximum keeps its map, the vector is read as [4, 32].
// CHECK-DAG: #[[ELEM:.*]] = affine_map<(d0, d1, d2) -> (d0, d2, d1)>
// CHECK-DAG: #[[ROW3:.*]] = affine_map<(d0, d1, d2) -> (d0)>
// CHECK-DAG: #[[VEC:.*]] = affine_map<(d0, d1, d2) -> (d2, d1)>
// CHECK-DAG: #[[PART:.*]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-LABEL: func.func @row_sum(
// CHECK-SAME: %[[X:.*]]: tensor<64x128xf32>, %[[MAX:.*]]: tensor<64xf32>, %[[G:.*]]: tensor<128xf32>, %[[INIT:.*]]: tensor<64xf32>
// CHECK-DAG: %[[XS:.*]] = tensor.expand_shape %[[X]] {{\[}}[0], [1, 2]] output_shape [64, 4, 32] : tensor<64x128xf32> into tensor<64x4x32xf32>
// CHECK-DAG: %[[GS:.*]] = tensor.expand_shape %[[G]] {{\[}}[0, 1]] output_shape [4, 32] : tensor<128xf32> into tensor<4x32xf32>
// CHECK: %[[ZEROS:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<64x32xf32>)
// CHECK: %[[PARTS:.*]] = linalg.generic {indexing_maps = [#[[ELEM]], #[[ROW3]], #[[VEC]], #[[PART]]], iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[XS]], %[[MAX]], %[[GS]] : tensor<64x4x32xf32>, tensor<64xf32>, tensor<4x32xf32>) outs(%[[ZEROS]] : tensor<64x32xf32>)
// CHECK: math.exp
// CHECK: %[[SUM:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%[[PARTS]] : tensor<64x32xf32>) outs(%[[INIT]] : tensor<64xf32>)
// CHECK: return %[[SUM]]
func.func @row_sum(%x: tensor<64x128xf32>, %max: tensor<64xf32>, %g: tensor<128xf32>, %init: tensor<64xf32>) -> tensor<64xf32> {
  %r = linalg.generic {indexing_maps = [#id2, #row, #col2, #row], iterator_types = ["parallel", "reduction"]} ins(%x, %max, %g : tensor<64x128xf32>, tensor<64xf32>, tensor<128xf32>) outs(%init : tensor<64xf32>) {
  ^bb0(%a: f32, %m: f32, %w: f32, %acc: f32):
    %d = arith.subf %a, %m : f32
    %e = math.exp %d : f32
    %t = arith.mulf %e, %w : f32
    %s = arith.addf %acc, %t : f32
    linalg.yield %s : f32
  } -> tensor<64xf32>
  return %r : tensor<64xf32>
}

// -----

#id2 = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#col2 = affine_map<(d0, d1) -> (d1)>

// A column maximum splits like a sum, from -inf, combining with maximumf.
// CHECK-LABEL: func.func @column_max(
// CHECK: tensor.expand_shape %{{.*}} {{\[}}[0, 1], [2]] output_shape [16, 8, 16]
// CHECK: %[[LOW:.*]] = arith.constant 0xFF800000 : f32
// CHECK: linalg.fill ins(%[[LOW]] : f32) outs(%{{.*}} : tensor<16x16xf32>)
// CHECK: arith.maximumf
// CHECK: linalg.generic {{.*}} ins(%{{.*}} : tensor<16x16xf32>) outs(%{{.*}} : tensor<16xf32>)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: arith.maximumf
func.func @column_max(%x: tensor<128x16xf32>, %init: tensor<16xf32>) -> tensor<16xf32> {
  %r = linalg.generic {indexing_maps = [#id2, #col2], iterator_types = ["reduction", "parallel"]} ins(%x : tensor<128x16xf32>) outs(%init : tensor<16xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.maximumf %acc, %a : f32
    linalg.yield %s : f32
  } -> tensor<16xf32>
  return %r : tensor<16xf32>
}

// -----

#id2 = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#col2 = affine_map<(d0, d1) -> (d1)>

// Left alone: a sum with as many columns as threads allowed, a short row,
// a body that reads a loop index, a product (not a combine), and a matrix
// product (the library's).
// CHECK-LABEL: func.func @wide(
// CHECK-NOT: tensor.expand_shape
// CHECK-LABEL: func.func @short_row(
// CHECK-NOT: tensor.expand_shape
// CHECK-LABEL: func.func @indexed(
// CHECK-NOT: tensor.expand_shape
// CHECK-LABEL: func.func @row_product(
// CHECK-NOT: tensor.expand_shape
// CHECK-LABEL: func.func @matmul(
// CHECK-NOT: tensor.expand_shape
func.func @wide(%x: tensor<128x256xf32>, %init: tensor<256xf32>) -> tensor<256xf32> {
  %r = linalg.generic {indexing_maps = [#id2, #col2], iterator_types = ["reduction", "parallel"]} ins(%x : tensor<128x256xf32>) outs(%init : tensor<256xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  } -> tensor<256xf32>
  return %r : tensor<256xf32>
}

func.func @short_row(%x: tensor<64x32xf32>, %init: tensor<64xf32>) -> tensor<64xf32> {
  %r = linalg.generic {indexing_maps = [#id2, #row], iterator_types = ["parallel", "reduction"]} ins(%x : tensor<64x32xf32>) outs(%init : tensor<64xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  } -> tensor<64xf32>
  return %r : tensor<64xf32>
}

func.func @indexed(%x: tensor<64x128xf32>, %init: tensor<64xf32>) -> tensor<64xf32> {
  %r = linalg.generic {indexing_maps = [#id2, #row], iterator_types = ["parallel", "reduction"]} ins(%x : tensor<64x128xf32>) outs(%init : tensor<64xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %j = linalg.index 1 : index
    %i = arith.index_cast %j : index to i32
    %f = arith.sitofp %i : i32 to f32
    %t = arith.mulf %a, %f : f32
    %s = arith.addf %acc, %t : f32
    linalg.yield %s : f32
  } -> tensor<64xf32>
  return %r : tensor<64xf32>
}

func.func @row_product(%x: tensor<64x128xf32>, %init: tensor<64xf32>) -> tensor<64xf32> {
  %r = linalg.generic {indexing_maps = [#id2, #row], iterator_types = ["parallel", "reduction"]} ins(%x : tensor<64x128xf32>) outs(%init : tensor<64xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.mulf %acc, %a : f32
    linalg.yield %s : f32
  } -> tensor<64xf32>
  return %r : tensor<64xf32>
}

func.func @matmul(%a: tensor<64x128xf32>, %b: tensor<16x128xf32>, %init: tensor<64x16xf32>) -> tensor<64x16xf32> {
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %b : tensor<64x128xf32>, tensor<16x128xf32>) outs(%init : tensor<64x16xf32>) attrs = {kiln.matmul = {transpose_rhs}} {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<64x16xf32>
  return %r : tensor<64x16xf32>
}
