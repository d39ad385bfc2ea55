// RUN: kiln-opt %s --kiln-pad-matrix-rows --split-input-file | FileCheck %s
// RUN: kiln-opt %s --kiln-pad-matrix-rows --split-input-file --one-shot-bufferize --cse --canonicalize | FileCheck %s --check-prefix=BUFFERS
// RUN: kiln-opt %s --kiln-pad-matrix-rows=row-alignment=32 --split-input-file | FileCheck %s --check-prefix=WIDE
// RUN: not kiln-opt %s --kiln-pad-matrix-rows=row-alignment=0 --split-input-file 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: error: kiln-pad-matrix-rows: row-alignment must be at least 1 byte

#a = affine_map<(m, n, k) -> (m, k)>
#bt = affine_map<(m, n, k) -> (n, k)>
#c = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0, 0)>

// A head's logits: a product of rows of 5 f32 (20 bytes) computed into
// rows padded to 8 (32 bytes), which the softmax-like kernel after it reads
// as they are (through a reshape splitting the rows, as kiln-split-reductions
// does), and its rounded gradient, 5 bf16 (10 bytes) in rows of 8 (16
// bytes), which the next product reads. The padded tensor.empty replaces
// only the use the product's chain makes of the shared one.
// CHECK-LABEL: func.func @logits(
// CHECK-DAG: %[[SHARED:.*]] = tensor.empty() : tensor<4x5xf32>
// CHECK-DAG: %[[WHOLE:.*]] = tensor.empty() : tensor<4x8xf32>
// CHECK-DAG: %[[SLICE:.*]] = tensor.extract_slice %[[WHOLE]][0, 0] [4, 5] [1, 1] : tensor<4x8xf32> to tensor<4x5xf32>
// CHECK: %[[FILL:.*]] = linalg.fill {{.*}} outs(%[[SLICE]] : tensor<4x5xf32>)
// CHECK: %[[LOGITS:.*]] = linalg.generic {{.*}} outs(%[[FILL]] : tensor<4x5xf32>) attrs = {kiln.matmul = {transpose_rhs}}
// CHECK: linalg.generic {{.*}} ins(%[[LOGITS]] : tensor<4x5xf32>) outs(%[[SHARED]] : tensor<4x5xf32>)
// CHECK: %[[GWHOLE:.*]] = tensor.empty() : tensor<2x2x8xbf16>
// CHECK: %[[GSLICE:.*]] = tensor.extract_slice %[[GWHOLE]][0, 0, 0] [2, 2, 5] [1, 1, 1] : tensor<2x2x8xbf16> to tensor<2x2x5xbf16>
// CHECK: %[[GRAD:.*]] = linalg.generic {{.*}} outs(%[[GSLICE]] : tensor<2x2x5xbf16>)
// CHECK: %[[ROWS:.*]] = tensor.collapse_shape %[[GRAD]] {{\[\[}}0, 1], [2]] : tensor<2x2x5xbf16> into tensor<4x5xbf16>
// CHECK: linalg.generic {{.*}} ins(%[[ROWS]], %{{.*}} : tensor<4x5xbf16>, tensor<5x3xbf16>) {{.*}} attrs = {kiln.matmul = {}}
// Bufferized, the product writes and the kernels read views of the padded
// buffers: nothing is copied.
// BUFFERS-LABEL: func.func @logits(
// BUFFERS-NOT: memref.copy
// BUFFERS: %[[L:.*]] = memref.alloc() {{.*}} : memref<4x8xf32>
// BUFFERS: memref.subview %[[L]][0, 0] [4, 5] [1, 1] : memref<4x8xf32> to memref<4x5xf32, strided<[8, 1]>>
// BUFFERS: memref.expand_shape {{.*}} : memref<4x5xf32, strided<[8, 1]>> into memref<4x5x1xf32, strided<[8, 1, 1]>>
// BUFFERS: %[[G:.*]] = memref.alloc() {{.*}} : memref<2x2x8xbf16>
// BUFFERS: memref.subview %[[G]][0, 0, 0] [2, 2, 5] [1, 1, 1] : memref<2x2x8xbf16> to memref<2x2x5xbf16, strided<[16, 8, 1]>>
// BUFFERS: memref.collapse_shape {{.*}} : memref<2x2x5xbf16, strided<[16, 8, 1]>> into memref<4x5xbf16, strided<[8, 1]>>
// BUFFERS-NOT: memref.copy
// BUFFERS: return
// With rows aligned to 32 bytes, the bf16 gradient's are padded to 16.
// WIDE-LABEL: func.func @logits(
// WIDE: tensor.empty() : tensor<4x8xf32>
// WIDE: tensor.empty() : tensor<2x2x16xbf16>
func.func @logits(%h: tensor<4x3xbf16>, %w: tensor<5x3xbf16>, %w2: tensor<5x3xbf16>) -> (tensor<4x5xf32>, tensor<4x3xf32>) {
  %zero = arith.constant 0.0 : f32
  %shared = tensor.empty() : tensor<4x5xf32>
  %fill = linalg.fill ins(%zero : f32) outs(%shared : tensor<4x5xf32>) -> tensor<4x5xf32>
  %logits = linalg.generic {indexing_maps = [#a, #bt, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%h, %w : tensor<4x3xbf16>, tensor<5x3xbf16>) outs(%fill : tensor<4x5xf32>)
      attrs = {kiln.matmul = {transpose_rhs}} {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %xf = arith.extf %x : bf16 to f32
    %yf = arith.extf %y : bf16 to f32
    %p = arith.mulf %xf, %yf : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<4x5xf32>
  %split = tensor.expand_shape %logits [[0], [1, 2]] output_shape [4, 5, 1] : tensor<4x5xf32> into tensor<4x5x1xf32>
  %i0 = arith.constant 0 : index
  %e = tensor.extract %split[%i0, %i0, %i0] : tensor<4x5x1xf32>
  %exp = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%logits : tensor<4x5xf32>) outs(%shared : tensor<4x5xf32>) {
  ^bb0(%in: f32, %out: f32):
    %x = arith.subf %in, %e : f32
    %r = math.exp %x : f32
    linalg.yield %r : f32
  } -> tensor<4x5xf32>
  %g = tensor.empty() : tensor<2x2x5xbf16>
  %exp3 = tensor.expand_shape %exp [[0, 1], [2]] output_shape [2, 2, 5] : tensor<4x5xf32> into tensor<2x2x5xf32>
  %grad = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%exp3 : tensor<2x2x5xf32>) outs(%g : tensor<2x2x5xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %r = arith.truncf %in : f32 to bf16
    linalg.yield %r : bf16
  } -> tensor<2x2x5xbf16>
  %rows = tensor.collapse_shape %grad [[0, 1], [2]] : tensor<2x2x5xbf16> into tensor<4x5xbf16>
  %e2 = tensor.empty() : tensor<4x3xf32>
  %fill2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<4x3xf32>) -> tensor<4x3xf32>
  %dh = linalg.generic {indexing_maps = [#a, affine_map<(m, n, k) -> (k, n)>, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%rows, %w2 : tensor<4x5xbf16>, tensor<5x3xbf16>) outs(%fill2 : tensor<4x3xf32>)
      attrs = {kiln.matmul = {}} {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %xf = arith.extf %x : bf16 to f32
    %yf = arith.extf %y : bf16 to f32
    %p = arith.mulf %xf, %yf : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<4x3xf32>
  return %exp, %dh : tensor<4x5xf32>, tensor<4x3xf32>
}

// -----

#a = affine_map<(m, n, k) -> (m, k)>
#b = affine_map<(m, n, k) -> (k, n)>
#c = affine_map<(m, n, k) -> (m, n)>

// Left alone: rows that are already a multiple of 16 bytes (4 f32), a
// product's result the function returns (its buffer is copied out), one a
// reshape merges with its rows (a padded view cannot be), one computed
// from something other than a tensor.empty (an argument), and an operand
// that is an argument.
// CHECK-LABEL: func.func @left_alone(
// CHECK-NOT: tensor.extract_slice
// CHECK: return
func.func @left_alone(%a: tensor<4x3xf32>, %b4: tensor<3x4xf32>, %b5: tensor<3x5xf32>, %init: tensor<4x5xf32>, %x: tensor<4x5xf32>, %y: tensor<5x2xf32>) -> (tensor<4x4xf32>, tensor<4x5xf32>, tensor<20xf32>, tensor<4x5xf32>, tensor<4x2xf32>) {
  %zero = arith.constant 0.0 : f32
  %e4 = tensor.empty() : tensor<4x4xf32>
  %f4 = linalg.fill ins(%zero : f32) outs(%e4 : tensor<4x4xf32>) -> tensor<4x4xf32>
  %aligned = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b4 : tensor<4x3xf32>, tensor<3x4xf32>) outs(%f4 : tensor<4x4xf32>) attrs = {kiln.matmul = {}} {
  ^bb0(%p: f32, %q: f32, %acc: f32):
    %m = arith.mulf %p, %q : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<4x4xf32>
  %e5 = tensor.empty() : tensor<4x5xf32>
  %f5 = linalg.fill ins(%zero : f32) outs(%e5 : tensor<4x5xf32>) -> tensor<4x5xf32>
  %returned = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b5 : tensor<4x3xf32>, tensor<3x5xf32>) outs(%f5 : tensor<4x5xf32>) attrs = {kiln.matmul = {}} {
  ^bb0(%p: f32, %q: f32, %acc: f32):
    %m = arith.mulf %p, %q : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<4x5xf32>
  %e6 = tensor.empty() : tensor<4x5xf32>
  %f6 = linalg.fill ins(%zero : f32) outs(%e6 : tensor<4x5xf32>) -> tensor<4x5xf32>
  %merged = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b5 : tensor<4x3xf32>, tensor<3x5xf32>) outs(%f6 : tensor<4x5xf32>) attrs = {kiln.matmul = {}} {
  ^bb0(%p: f32, %q: f32, %acc: f32):
    %m = arith.mulf %p, %q : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<4x5xf32>
  %flat = tensor.collapse_shape %merged [[0, 1]] : tensor<4x5xf32> into tensor<20xf32>
  %onto = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b5 : tensor<4x3xf32>, tensor<3x5xf32>) outs(%init : tensor<4x5xf32>) attrs = {kiln.matmul = {}} {
  ^bb0(%p: f32, %q: f32, %acc: f32):
    %m = arith.mulf %p, %q : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<4x5xf32>
  %e7 = tensor.empty() : tensor<4x2xf32>
  %f7 = linalg.fill ins(%zero : f32) outs(%e7 : tensor<4x2xf32>) -> tensor<4x2xf32>
  %fromArg = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %y : tensor<4x5xf32>, tensor<5x2xf32>) outs(%f7 : tensor<4x2xf32>) attrs = {kiln.matmul = {}} {
  ^bb0(%p: f32, %q: f32, %acc: f32):
    %m = arith.mulf %p, %q : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<4x2xf32>
  return %aligned, %returned, %flat, %onto, %fromArg : tensor<4x4xf32>, tensor<4x5xf32>, tensor<20xf32>, tensor<4x5xf32>, tensor<4x2xf32>
}
