// RUN: kiln-opt %s --kiln-amp | FileCheck %s
// RUN: kiln-opt %s --kiln-amp=type=f16 | FileCheck %s --check-prefix=F16
// RUN: not kiln-opt %s --kiln-amp=type=fp8 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: kiln-amp: type must be bf16 or f16, not 'fp8'

// With type=f16 the same ops round to f16 instead.
// F16-LABEL: func.func @step(
// F16-COUNT-3: arith.truncf %{{.*}} : f32 to f16
// F16: linalg.generic {{.*}} ins(%{{.*}}, %{{.*}} : tensor<4x8xf16>, tensor<8x16xf16>) outs(%{{.*}} : tensor<4x16xf32>) attrs = {kiln.matmul = {}}
// F16-NEXT: ^bb0(%{{.*}}: f16, %{{.*}}: f16, %{{.*}}: f32):
// F16-NOT: bf16

#a = affine_map<(d0, d1, d2) -> (d0, d2)>
#b = affine_map<(d0, d1, d2) -> (d2, d1)>
#c = affine_map<(d0, d1, d2) -> (d0, d1)>
#id = affine_map<(d0, d1) -> (d0, d1)>

// Both products read %w: it is rounded once. Each product reads bf16
// elements, widens them exactly and accumulates in f32 as before. The
// elementwise op and the f32 results are untouched.
// CHECK-LABEL: func.func @step(
// CHECK-SAME: %[[X:.*]]: tensor<4x8xf32>, %[[W:.*]]: tensor<8x16xf32>, %[[Y:.*]]: tensor<4x8xf32>
// CHECK-DAG: %[[WB:.*]] = linalg.generic {{.*}} ins(%[[W]] : tensor<8x16xf32>) outs(%{{.*}} : tensor<8x16xbf16>)
// CHECK-DAG: %[[XB:.*]] = linalg.generic {{.*}} ins(%[[X]] : tensor<4x8xf32>) outs(%{{.*}} : tensor<4x8xbf16>)
// CHECK-DAG: %[[YB:.*]] = linalg.generic {{.*}} ins(%[[Y]] : tensor<4x8xf32>) outs(%{{.*}} : tensor<4x8xbf16>)
// CHECK: ^bb0(%[[IN:.*]]: f32, %{{.*}}: bf16):
// CHECK-NEXT: %[[R:.*]] = arith.truncf %[[IN]] : f32 to bf16
// CHECK-NEXT: linalg.yield %[[R]] : bf16
// CHECK: linalg.generic {{.*}} ins(%[[XB]], %[[WB]] : tensor<4x8xbf16>, tensor<8x16xbf16>) outs(%{{.*}} : tensor<4x16xf32>) attrs = {kiln.matmul = {}}
// CHECK-NEXT: ^bb0(%[[A:.*]]: bf16, %[[B:.*]]: bf16, %[[ACC:.*]]: f32):
// CHECK-NEXT: %[[BW:.*]] = arith.extf %[[B]] : bf16 to f32
// CHECK-NEXT: %[[AW:.*]] = arith.extf %[[A]] : bf16 to f32
// CHECK-NEXT: %[[M:.*]] = arith.mulf %[[AW]], %[[BW]] : f32
// CHECK-NEXT: %[[S:.*]] = arith.addf %[[ACC]], %[[M]] : f32
// CHECK: linalg.generic {{.*}} ins(%[[YB]], %[[WB]] : tensor<4x8xbf16>, tensor<8x16xbf16>)
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel"]} ins(%{{.*}}, %{{.*}} : tensor<4x16xf32>, tensor<4x16xf32>)
// CHECK: return {{.*}} : tensor<4x16xf32>
func.func @step(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %y: tensor<4x8xf32>) -> tensor<4x16xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %p = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"], kiln.matmul = {}} ins(%x, %w : tensor<4x8xf32>, tensor<8x16xf32>) outs(%init : tensor<4x16xf32>) {
  ^bb0(%l: f32, %r: f32, %o: f32):
    %m = arith.mulf %l, %r : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  } -> tensor<4x16xf32>
  %q = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"], kiln.matmul = {}} ins(%y, %w : tensor<4x8xf32>, tensor<8x16xf32>) outs(%init : tensor<4x16xf32>) {
  ^bb0(%l: f32, %r: f32, %o: f32):
    %m = arith.mulf %l, %r : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  } -> tensor<4x16xf32>
  %sum = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%p, %q : tensor<4x16xf32>, tensor<4x16xf32>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%l: f32, %r: f32, %o: f32):
    %s = arith.addf %l, %r : f32
    linalg.yield %s : f32
  } -> tensor<4x16xf32>
  return %sum : tensor<4x16xf32>
}

// An operand computed by an elementwise op is rounded by that op, which
// writes the rounded copy as one more result: no rounding kernel, no second
// read. Seen through a reshape (the rounded copy is reshaped the same way)
// and from a transpose (which becomes such an op). A result the product
// alone read is no longer written in f32; one that others read still is.
// CHECK-LABEL: func.func @producers(
// CHECK-SAME: %[[A:.*]]: tensor<2x4x8xf32>, %[[B:.*]]: tensor<8x8xf32>, %[[T:.*]]: tensor<8x16xf32>
// CHECK: %[[G:.*]] = linalg.generic {{.*}} ins(%[[A]] : tensor<2x4x8xf32>) outs(%{{.*}} : tensor<2x4x8xbf16>)
// CHECK-NEXT: ^bb0(%[[IN:.*]]: f32, %{{.*}}: bf16):
// CHECK-NEXT: %[[E:.*]] = math.exp %[[IN]] : f32
// CHECK-NEXT: %[[R:.*]] = arith.truncf %[[E]] : f32 to bf16
// CHECK-NEXT: linalg.yield %[[R]] : bf16
// CHECK: %[[GC:.*]] = tensor.collapse_shape %[[G]] {{\[}}[0, 1], [2]] : tensor<2x4x8xbf16> into tensor<8x8xbf16>
// CHECK: %[[N:.*]]:2 = linalg.generic {{.*}} ins(%[[B]] : tensor<8x8xf32>) outs(%{{.*}}, %{{.*}} : tensor<8x8xf32>, tensor<8x8xbf16>)
// CHECK: %[[TT:.*]] = linalg.generic {{.*}} ins(%[[T]] : tensor<8x16xf32>) outs(%{{.*}} : tensor<16x8xbf16>)
// CHECK-NOT: linalg.transpose
// CHECK: linalg.generic {{.*}} ins(%[[GC]], %[[N]]#1 : tensor<8x8xbf16>, tensor<8x8xbf16>) outs(%{{.*}} : tensor<8x8xf32>) attrs = {kiln.matmul = {}}
// CHECK: linalg.generic {{.*}} ins(%[[TT]], %[[N]]#1 : tensor<16x8xbf16>, tensor<8x8xbf16>) outs(%{{.*}} : tensor<16x8xf32>) attrs = {kiln.matmul = {}}
// CHECK: return %{{.*}}, %{{.*}}, %[[N]]#0
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @producers(%a: tensor<2x4x8xf32>, %b: tensor<8x8xf32>, %t: tensor<8x16xf32>) -> (tensor<8x8xf32>, tensor<16x8xf32>, tensor<8x8xf32>) {
  %zero = arith.constant 0.0 : f32
  %ea = tensor.empty() : tensor<2x4x8xf32>
  %g = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%a : tensor<2x4x8xf32>) outs(%ea : tensor<2x4x8xf32>) {
  ^bb0(%x: f32, %o: f32):
    %e = math.exp %x : f32
    linalg.yield %e : f32
  } -> tensor<2x4x8xf32>
  %gc = tensor.collapse_shape %g [[0, 1], [2]] : tensor<2x4x8xf32> into tensor<8x8xf32>
  %eb = tensor.empty() : tensor<8x8xf32>
  %n = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%b : tensor<8x8xf32>) outs(%eb : tensor<8x8xf32>) {
  ^bb0(%x: f32, %o: f32):
    %m = arith.negf %x : f32
    linalg.yield %m : f32
  } -> tensor<8x8xf32>
  %et = tensor.empty() : tensor<16x8xf32>
  %tt = linalg.transpose ins(%t : tensor<8x16xf32>) outs(%et : tensor<16x8xf32>) permutation = [1, 0]
  %init = linalg.fill ins(%zero : f32) outs(%eb : tensor<8x8xf32>) -> tensor<8x8xf32>
  %p = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"], kiln.matmul = {}} ins(%gc, %n : tensor<8x8xf32>, tensor<8x8xf32>) outs(%init : tensor<8x8xf32>) {
  ^bb0(%l: f32, %r: f32, %o: f32):
    %m = arith.mulf %l, %r : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  } -> tensor<8x8xf32>
  %init2 = linalg.fill ins(%zero : f32) outs(%et : tensor<16x8xf32>) -> tensor<16x8xf32>
  %q = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"], kiln.matmul = {}} ins(%tt, %n : tensor<16x8xf32>, tensor<8x8xf32>) outs(%init2 : tensor<16x8xf32>) {
  ^bb0(%l: f32, %r: f32, %o: f32):
    %m = arith.mulf %l, %r : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  } -> tensor<16x8xf32>
  return %p, %q, %n : tensor<8x8xf32>, tensor<16x8xf32>, tensor<8x8xf32>
}

// A concatenation of pieces each computed by an elementwise op (attention's
// q, k and v gradients into the qkv projection's) is rounded as the same
// slices of the pieces, each rounded by its op: no kernel rounds the whole,
// and the f32 concatenation nothing else reads goes, with the pieces' f32
// results.
// CHECK-LABEL: func.func @concatenation(
// CHECK-SAME: %[[X:.*]]: tensor<8x4xf32>, %[[Y:.*]]: tensor<8x4xf32>, %[[W:.*]]: tensor<8x8xf32>
// CHECK: %[[PX:.*]] = linalg.generic {{.*}} ins(%[[X]] : tensor<8x4xf32>) outs(%{{.*}} : tensor<8x4xbf16>)
// CHECK: %[[PY:.*]] = linalg.generic {{.*}} ins(%[[Y]] : tensor<8x4xf32>) outs(%{{.*}} : tensor<8x4xbf16>)
// CHECK-NOT: tensor.insert_slice
// CHECK: %[[E:.*]] = tensor.empty() : tensor<8x8xbf16>
// CHECK: %[[I0:.*]] = tensor.insert_slice %[[PX]] into %[[E]][0, 0] [8, 4] [1, 1] : tensor<8x4xbf16> into tensor<8x8xbf16>
// CHECK: %[[I1:.*]] = tensor.insert_slice %[[PY]] into %[[I0]][0, 4] [8, 4] [1, 1] : tensor<8x4xbf16> into tensor<8x8xbf16>
// CHECK-NOT: tensor.insert_slice
// CHECK: linalg.generic {{.*}} ins(%[[I1]], %{{.*}} : tensor<8x8xbf16>, tensor<8x8xbf16>) {{.*}} attrs = {kiln.matmul = {}}
// A piece that is an argument, which no op computes, leaves the whole to a
// rounding kernel after the concatenation.
// CHECK-LABEL: func.func @concatenation_of_an_argument(
// CHECK: %[[C:.*]] = tensor.insert_slice %arg1 into %{{.*}}[0, 4] [8, 4] [1, 1] : tensor<8x4xf32> into tensor<8x8xf32>
// CHECK: %[[R:.*]] = linalg.generic {{.*}} ins(%[[C]] : tensor<8x8xf32>) outs(%{{.*}} : tensor<8x8xbf16>)
// CHECK: linalg.generic {{.*}} ins(%[[R]], %{{.*}} : tensor<8x8xbf16>, tensor<8x8xbf16>) {{.*}} attrs = {kiln.matmul = {}}
func.func @concatenation(%x: tensor<8x4xf32>, %y: tensor<8x4xf32>, %w: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %zero = arith.constant 0.0 : f32
  %e4 = tensor.empty() : tensor<8x4xf32>
  %px = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<8x4xf32>) outs(%e4 : tensor<8x4xf32>) {
  ^bb0(%v: f32, %o: f32):
    %m = arith.negf %v : f32
    linalg.yield %m : f32
  } -> tensor<8x4xf32>
  %py = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%y : tensor<8x4xf32>) outs(%e4 : tensor<8x4xf32>) {
  ^bb0(%v: f32, %o: f32):
    %m = math.exp %v : f32
    linalg.yield %m : f32
  } -> tensor<8x4xf32>
  %e8 = tensor.empty() : tensor<8x8xf32>
  %i0 = tensor.insert_slice %px into %e8[0, 0] [8, 4] [1, 1] : tensor<8x4xf32> into tensor<8x8xf32>
  %i1 = tensor.insert_slice %py into %i0[0, 4] [8, 4] [1, 1] : tensor<8x4xf32> into tensor<8x8xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e8 : tensor<8x8xf32>) -> tensor<8x8xf32>
  %p = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"], kiln.matmul = {}} ins(%i1, %w : tensor<8x8xf32>, tensor<8x8xf32>) outs(%init : tensor<8x8xf32>) {
  ^bb0(%l: f32, %r: f32, %o: f32):
    %m = arith.mulf %l, %r : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  } -> tensor<8x8xf32>
  return %p : tensor<8x8xf32>
}

func.func @concatenation_of_an_argument(%x: tensor<8x4xf32>, %y: tensor<8x4xf32>, %w: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %zero = arith.constant 0.0 : f32
  %e4 = tensor.empty() : tensor<8x4xf32>
  %px = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<8x4xf32>) outs(%e4 : tensor<8x4xf32>) {
  ^bb0(%v: f32, %o: f32):
    %m = arith.negf %v : f32
    linalg.yield %m : f32
  } -> tensor<8x4xf32>
  %e8 = tensor.empty() : tensor<8x8xf32>
  %i0 = tensor.insert_slice %px into %e8[0, 0] [8, 4] [1, 1] : tensor<8x4xf32> into tensor<8x8xf32>
  %i1 = tensor.insert_slice %y into %i0[0, 4] [8, 4] [1, 1] : tensor<8x4xf32> into tensor<8x8xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e8 : tensor<8x8xf32>) -> tensor<8x8xf32>
  %p = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"], kiln.matmul = {}} ins(%i1, %w : tensor<8x8xf32>, tensor<8x8xf32>) outs(%init : tensor<8x8xf32>) {
  ^bb0(%l: f32, %r: f32, %o: f32):
    %m = arith.mulf %l, %r : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  } -> tensor<8x8xf32>
  return %p : tensor<8x8xf32>
}
