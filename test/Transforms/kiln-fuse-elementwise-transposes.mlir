// RUN: kiln-opt %s --kiln-fuse-elementwise=transposes=true | FileCheck %s
// RUN: kiln-opt %s --kiln-fuse-elementwise | FileCheck %s --check-prefix=NAMED

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
