// RUN: kiln-opt %s --kiln-matmul-accumulate | FileCheck %s

#a = affine_map<(m, n, k) -> (m, k)>
#b = affine_map<(m, n, k) -> (k, n)>
#c = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(m, n) -> (m, n)>
#row = affine_map<(m, n) -> (n)>
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>

// A linear layer: matmul into a zero fill, then + broadcast bias. Left
// alone: fusion reads the bias in the addition's consumer, where
// accumulating would write the broadcast out first.
// CHECK-LABEL: func.func @bias(
// CHECK: linalg.fill
// CHECK: attrs = {kiln.matmul = {}}
// CHECK: linalg.generic
// CHECK: linalg.generic
// CHECK: arith.addf
func.func @bias(%x: tensor<4x3xf32>, %w: tensor<3x5xf32>, %bias: tensor<5xf32>) -> tensor<4x5xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x5xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4x5xf32>) -> tensor<4x5xf32>
  %p = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : tensor<4x3xf32>, tensor<3x5xf32>) outs(%z : tensor<4x5xf32>) attrs = {kiln.matmul = {}} {
  ^bb0(%l: f32, %r: f32, %acc: f32):
    %m = arith.mulf %l, %r : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<4x5xf32>
  %e2 = tensor.empty() : tensor<4x5xf32>
  %bb = linalg.generic {indexing_maps = [#row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%bias : tensor<5xf32>) outs(%e2 : tensor<4x5xf32>) {
  ^bb0(%v: f32, %o: f32):
    linalg.yield %v : f32
  } -> tensor<4x5xf32>
  %e3 = tensor.empty() : tensor<4x5xf32>
  %y = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%p, %bb : tensor<4x5xf32>, tensor<4x5xf32>) outs(%e3 : tensor<4x5xf32>) {
  ^bb0(%l: f32, %r: f32, %o: f32):
    %s = arith.addf %l, %r : f32
    linalg.yield %s : f32
  } -> tensor<4x5xf32>
  return %y : tensor<4x5xf32>
}

// Two gradient contributions: the later product accumulates into the
// earlier one's result.
// CHECK-LABEL: func.func @two_products(
// CHECK-SAME: %[[A:.*]]: tensor<4x3xf32>, %[[B:.*]]: tensor<3x5xf32>, %[[C:.*]]: tensor<4x3xf32>, %[[D:.*]]: tensor<3x5xf32>
// CHECK: %[[Z:.*]] = linalg.fill
// CHECK: %[[P:.*]] = linalg.generic {{.*}} ins(%[[A]], %[[B]] : {{.*}}) outs(%[[Z]] : tensor<4x5xf32>)
// CHECK: %[[Q:.*]] = linalg.generic {{.*}} ins(%[[C]], %[[D]] : {{.*}}) outs(%[[P]] : tensor<4x5xf32>)
// CHECK-NOT: linalg.generic
// CHECK: return %[[Q]]
func.func @two_products(%a: tensor<4x3xf32>, %b: tensor<3x5xf32>, %c: tensor<4x3xf32>, %d: tensor<3x5xf32>) -> tensor<4x5xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x5xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4x5xf32>) -> tensor<4x5xf32>
  %p = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : tensor<4x3xf32>, tensor<3x5xf32>) outs(%z : tensor<4x5xf32>) attrs = {kiln.matmul = {}} {
  ^bb0(%l: f32, %r: f32, %acc: f32):
    %m = arith.mulf %l, %r : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<4x5xf32>
  %z2 = linalg.fill ins(%zero : f32) outs(%e : tensor<4x5xf32>) -> tensor<4x5xf32>
  %q = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%c, %d : tensor<4x3xf32>, tensor<3x5xf32>) outs(%z2 : tensor<4x5xf32>) attrs = {kiln.matmul = {}} {
  ^bb0(%l: f32, %r: f32, %acc: f32):
    %m = arith.mulf %l, %r : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<4x5xf32>
  %e3 = tensor.empty() : tensor<4x5xf32>
  %y = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%p, %q : tensor<4x5xf32>, tensor<4x5xf32>) outs(%e3 : tensor<4x5xf32>) {
  ^bb0(%l: f32, %r: f32, %o: f32):
    %s = arith.addf %l, %r : f32
    linalg.yield %s : f32
  } -> tensor<4x5xf32>
  return %y : tensor<4x5xf32>
}

// The product is read by something else too (%p, returned), or the
// addition is a subtraction (%q): nothing changes.
// CHECK-LABEL: func.func @stays(
// CHECK: linalg.fill
// CHECK: linalg.generic {{.*}} attrs = {kiln.matmul = {}}
// CHECK: linalg.generic
// CHECK: arith.addf
// CHECK: linalg.fill
// CHECK: linalg.generic {{.*}} attrs = {kiln.matmul = {}}
// CHECK: linalg.generic
// CHECK: arith.subf
func.func @stays(%x: tensor<4x3xf32>, %w: tensor<3x5xf32>, %r: tensor<4x5xf32>) -> (tensor<4x5xf32>, tensor<4x5xf32>, tensor<4x5xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x5xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4x5xf32>) -> tensor<4x5xf32>
  %p = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : tensor<4x3xf32>, tensor<3x5xf32>) outs(%z : tensor<4x5xf32>) attrs = {kiln.matmul = {}} {
  ^bb0(%l: f32, %rr: f32, %acc: f32):
    %m = arith.mulf %l, %rr : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<4x5xf32>
  %e3 = tensor.empty() : tensor<4x5xf32>
  %y = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%p, %r : tensor<4x5xf32>, tensor<4x5xf32>) outs(%e3 : tensor<4x5xf32>) {
  ^bb0(%l: f32, %rr: f32, %o: f32):
    %s = arith.addf %l, %rr : f32
    linalg.yield %s : f32
  } -> tensor<4x5xf32>
  %z2 = linalg.fill ins(%zero : f32) outs(%e : tensor<4x5xf32>) -> tensor<4x5xf32>
  %q = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : tensor<4x3xf32>, tensor<3x5xf32>) outs(%z2 : tensor<4x5xf32>) attrs = {kiln.matmul = {}} {
  ^bb0(%l: f32, %rr: f32, %acc: f32):
    %m = arith.mulf %l, %rr : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<4x5xf32>
  %d = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%q, %r : tensor<4x5xf32>, tensor<4x5xf32>) outs(%e3 : tensor<4x5xf32>) {
  ^bb0(%l: f32, %rr: f32, %o: f32):
    %s = arith.subf %l, %rr : f32
    linalg.yield %s : f32
  } -> tensor<4x5xf32>
  return %y, %p, %d : tensor<4x5xf32>, tensor<4x5xf32>, tensor<4x5xf32>
}

// The product seen in another shape ([2 * 2, 5] as [2, 2, 5], as a linear
// layer over a batch of sequences is), added to a computed value: that is
// collapsed to the product's shape, accumulated into, and the result
// expanded back.
// CHECK-LABEL: func.func @through_expand(
// CHECK-SAME: %[[X:.*]]: tensor<4x3xf32>, %[[W:.*]]: tensor<3x5xf32>, %[[B:.*]]: tensor<2x2x5xf32>
// CHECK-NOT: linalg.fill
// CHECK: %[[T:.*]] = linalg.generic {{.*}} ins(%[[B]] : tensor<2x2x5xf32>)
// CHECK: math.exp
// CHECK: %[[C:.*]] = tensor.collapse_shape %[[T]] {{\[}}[0, 1], [2]] : tensor<2x2x5xf32> into tensor<4x5xf32>
// CHECK: %[[P:.*]] = linalg.generic {{.*}} ins(%[[X]], %[[W]] : {{.*}}) outs(%[[C]] : tensor<4x5xf32>)
// CHECK: %[[E:.*]] = tensor.expand_shape %[[P]] {{\[}}[0, 1], [2]] output_shape [2, 2, 5] : tensor<4x5xf32> into tensor<2x2x5xf32>
// CHECK-NOT: linalg.generic
// CHECK: return %[[E]]
func.func @through_expand(%x: tensor<4x3xf32>, %w: tensor<3x5xf32>, %b: tensor<2x2x5xf32>) -> tensor<2x2x5xf32> {
  %e0 = tensor.empty() : tensor<2x2x5xf32>
  %t = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%b : tensor<2x2x5xf32>) outs(%e0 : tensor<2x2x5xf32>) {
  ^bb0(%v: f32, %o: f32):
    %r = math.exp %v : f32
    linalg.yield %r : f32
  } -> tensor<2x2x5xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x5xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4x5xf32>) -> tensor<4x5xf32>
  %p = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : tensor<4x3xf32>, tensor<3x5xf32>) outs(%z : tensor<4x5xf32>) attrs = {kiln.matmul = {}} {
  ^bb0(%l: f32, %r: f32, %acc: f32):
    %m = arith.mulf %l, %r : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<4x5xf32>
  %pe = tensor.expand_shape %p [[0, 1], [2]] output_shape [2, 2, 5] : tensor<4x5xf32> into tensor<2x2x5xf32>
  %e3 = tensor.empty() : tensor<2x2x5xf32>
  %y = linalg.generic {indexing_maps = [#id3, #id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%t, %pe : tensor<2x2x5xf32>, tensor<2x2x5xf32>) outs(%e3 : tensor<2x2x5xf32>) {
  ^bb0(%l: f32, %r: f32, %o: f32):
    %s = arith.addf %l, %r : f32
    linalg.yield %s : f32
  } -> tensor<2x2x5xf32>
  return %y : tensor<2x2x5xf32>
}
