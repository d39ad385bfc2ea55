// RUN: kiln-opt %s --split-input-file --kiln-fuse-elementwise="transposes=true cheap-broadcasts=true" | FileCheck %s
// RUN: kiln-opt %s --split-input-file --kiln-fuse-elementwise | FileCheck %s --check-prefix=NAMED

#id4 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>

// Attention's query, one head's slice of the projection moved to [batch,
// heads, rows, head size], then rounded to bf16: with `transposes` the
// transposition is a linalg.generic that fuses into the rounding, one kernel
// reading the projection through the permutation. Without, it stays a
// linalg.transpose of its own.
// CHECK-LABEL: func.func @query(
// CHECK-SAME: %[[QKV:.*]]: tensor<2x5x3x16xf32>
// CHECK-NOT: linalg.transpose
// CHECK: %[[R:.*]] = linalg.generic {indexing_maps = [#[[PERM:.*]], #{{.*}}], {{.*}} ins(%[[QKV]] : tensor<2x5x3x16xf32>) outs(%{{.*}} : tensor<2x3x5x16xbf16>)
// CHECK: arith.truncf
// CHECK-NOT: linalg.generic
// CHECK: return %[[R]]
// NAMED-LABEL: func.func @query(
// NAMED: linalg.transpose
// NAMED: linalg.generic
func.func @query(%qkv: tensor<2x5x3x16xf32>) -> tensor<2x3x5x16xbf16> {
  %e = tensor.empty() : tensor<2x3x5x16xf32>
  %t = linalg.transpose ins(%qkv : tensor<2x5x3x16xf32>) outs(%e : tensor<2x3x5x16xf32>) permutation = [0, 2, 1, 3]
  %o = tensor.empty() : tensor<2x3x5x16xbf16>
  %r = linalg.generic {indexing_maps = [#id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%t : tensor<2x3x5x16xf32>) outs(%o : tensor<2x3x5x16xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %n = arith.truncf %in : f32 to bf16
    linalg.yield %n : bf16
  } -> tensor<2x3x5x16xbf16>
  return %r : tensor<2x3x5x16xbf16>
}

// -----

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#row = affine_map<(d0, d1, d2) -> (d0, d1, 0)>

// A normalization's mean per row (the row sums divided by n, [2, 3, 1])
// read by the centering through a broadcast: with `cheap-broadcasts` the
// division fuses into the centering, recomputed per element. Not so a
// producer that computes an exponential (it stays a kernel of its own;
// without the option, so does the division).
// CHECK-LABEL: func.func @mean(
// CHECK-SAME: %[[X:.*]]: tensor<2x3x8xf32>, %[[SUMS:.*]]: tensor<2x3x1xf32>
// CHECK: %[[E:.*]] = linalg.generic {{.*}} ins(%[[SUMS]] : tensor<2x3x1xf32>)
// CHECK: math.exp
// CHECK: %[[C:.*]] = linalg.generic {{.*}} ins(%[[X]], %[[SUMS]] : tensor<2x3x8xf32>, tensor<2x3x1xf32>)
// CHECK: arith.divf
// CHECK-NEXT: arith.subf
// CHECK: linalg.generic {{.*}} ins(%[[X]], %[[E]] :
// CHECK: return %[[C]]
// NAMED-LABEL: func.func @mean(
// NAMED-COUNT-4: linalg.generic
func.func @mean(%x: tensor<2x3x8xf32>, %sums: tensor<2x3x1xf32>) -> (tensor<2x3x8xf32>, tensor<2x3x8xf32>) {
  %n = arith.constant 8.0 : f32
  %e1 = tensor.empty() : tensor<2x3x1xf32>
  %mean = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%sums : tensor<2x3x1xf32>) outs(%e1 : tensor<2x3x1xf32>) {
  ^bb0(%in: f32, %out: f32):
    %d = arith.divf %in, %n : f32
    linalg.yield %d : f32
  } -> tensor<2x3x1xf32>
  %exp = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%sums : tensor<2x3x1xf32>) outs(%e1 : tensor<2x3x1xf32>) {
  ^bb0(%in: f32, %out: f32):
    %d = math.exp %in : f32
    linalg.yield %d : f32
  } -> tensor<2x3x1xf32>
  %e3 = tensor.empty() : tensor<2x3x8xf32>
  %centered = linalg.generic {indexing_maps = [#id3, #row, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%x, %mean : tensor<2x3x8xf32>, tensor<2x3x1xf32>) outs(%e3 : tensor<2x3x8xf32>) {
  ^bb0(%a: f32, %m: f32, %out: f32):
    %s = arith.subf %a, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x3x8xf32>
  %scaled = linalg.generic {indexing_maps = [#id3, #row, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%x, %exp : tensor<2x3x8xf32>, tensor<2x3x1xf32>) outs(%e3 : tensor<2x3x8xf32>) {
  ^bb0(%a: f32, %m: f32, %out: f32):
    %s = arith.mulf %a, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x3x8xf32>
  return %centered, %scaled : tensor<2x3x8xf32>, tensor<2x3x8xf32>
}
