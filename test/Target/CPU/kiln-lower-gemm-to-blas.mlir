// RUN: kiln-opt %s --kiln-lower-gemm-to-blas | FileCheck %s

// Bufferized matrix products as convert-kiln-to-linalg marks them become
// row-major cblas_?gemm calls: C = 1 * op(A) op(B) + beta * C (beta 0 after a
// zero fill of C, which goes, and 1 otherwise), with
// CblasRowMajor = 101, CblasNoTrans = 111, CblasTrans = 112, and the leading
// dimensions the row lengths of A, B and C as stored.

#a = affine_map<(m, n, k) -> (m, k)>
#at = affine_map<(m, n, k) -> (k, m)>
#b = affine_map<(m, n, k) -> (k, n)>
#bt = affine_map<(m, n, k) -> (n, k)>
#c = affine_map<(m, n, k) -> (m, n)>
#batched_at = affine_map<(b0, b1, m, n, k) -> (b0, b1, k, m)>
#batched_b = affine_map<(b0, b1, m, n, k) -> (b0, b1, k, n)>
#batched_c = affine_map<(b0, b1, m, n, k) -> (b0, b1, m, n)>

// CHECK-DAG: func.func private @cblas_sgemm(i32, i32, i32, i32, i32, i32, f32, !llvm.ptr, i32, !llvm.ptr, i32, f32, !llvm.ptr, i32)
// CHECK-DAG: func.func private @cblas_dgemm(i32, i32, i32, i32, i32, i32, f64, !llvm.ptr, i32, !llvm.ptr, i32, f64, !llvm.ptr, i32)

// [8, 16] x [32, 16]^T: M = 8, N = 32, K = 16; A untransposed (lda = K = 16),
// B stored [N, K] and transposed (ldb = K = 16), ldc = N = 32. beta is 0, so
// the zero fill of C is dead and goes.
// CHECK-LABEL: func.func @sgemm_transpose_rhs(
// CHECK-SAME: %[[A:[^:]*]]: memref<8x16xf32>, %[[B:[^:]*]]: memref<32x16xf32>, %[[C:[^:]*]]: memref<8x32xf32>
// CHECK-NOT: linalg.fill
// CHECK-NOT: linalg.generic
// CHECK: %[[AI:.*]] = memref.extract_aligned_pointer_as_index %[[A]]
// CHECK: %[[AP:.*]] = llvm.inttoptr %{{.*}} : i64 to !llvm.ptr
// CHECK: %[[BI:.*]] = memref.extract_aligned_pointer_as_index %[[B]]
// CHECK: %[[BP:.*]] = llvm.inttoptr %{{.*}} : i64 to !llvm.ptr
// CHECK: %[[CI:.*]] = memref.extract_aligned_pointer_as_index %[[C]]
// CHECK: %[[CP:.*]] = llvm.inttoptr %{{.*}} : i64 to !llvm.ptr
// CHECK: %[[ALPHA:.*]] = arith.constant 1.000000e+00 : f32
// CHECK: %[[BETA:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: %[[ORDER:.*]] = arith.constant 101 : i32
// CHECK: %[[TA:.*]] = arith.constant 111 : i32
// CHECK: %[[TB:.*]] = arith.constant 112 : i32
// CHECK: %[[M:.*]] = arith.constant 8 : i32
// CHECK: %[[N:.*]] = arith.constant 32 : i32
// CHECK: %[[K:.*]] = arith.constant 16 : i32
// CHECK: %[[LDA:.*]] = arith.constant 16 : i32
// CHECK: %[[LDB:.*]] = arith.constant 16 : i32
// CHECK: %[[LDC:.*]] = arith.constant 32 : i32
// CHECK: call @cblas_sgemm(%[[ORDER]], %[[TA]], %[[TB]], %[[M]], %[[N]], %[[K]], %[[ALPHA]], %[[AP]], %[[LDA]], %[[BP]], %[[LDB]], %[[BETA]], %[[CP]], %[[LDC]])
// What kiln-profile-marks reports: 2 m n k operations; A, B read, C written.
// CHECK-SAME: kiln.cost = {flops = 8192 : i64, kind = "gemm", read = 2560 : i64, what = "sgemm 8x32x16 B^T", written = 1024 : i64}
// CHECK-NOT: linalg.generic
// CHECK: return
func.func @sgemm_transpose_rhs(%a: memref<8x16xf32>, %b: memref<32x16xf32>, %c: memref<8x32xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<8x32xf32>)
  linalg.generic {indexing_maps = [#a, #bt, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<8x16xf32>, memref<32x16xf32>) outs(%c : memref<8x32xf32>)
      attrs = {kiln.matmul = {transpose_rhs}} {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// [5, 4]^T x [5, 6]: M = 4, N = 6, K = 5; A stored [K, M] and transposed
// (lda = M = 4), ldb = N = 6, ldc = N = 6.
// CHECK-LABEL: func.func @sgemm_transpose_lhs(
// CHECK: %[[ORDER:.*]] = arith.constant 101 : i32
// CHECK: %[[TA:.*]] = arith.constant 112 : i32
// CHECK: %[[TB:.*]] = arith.constant 111 : i32
// CHECK: %[[M:.*]] = arith.constant 4 : i32
// CHECK: %[[N:.*]] = arith.constant 6 : i32
// CHECK: %[[K:.*]] = arith.constant 5 : i32
// CHECK: %[[LDA:.*]] = arith.constant 4 : i32
// CHECK: %[[LDB:.*]] = arith.constant 6 : i32
// CHECK: %[[LDC:.*]] = arith.constant 6 : i32
// CHECK: call @cblas_sgemm(%[[ORDER]], %[[TA]], %[[TB]], %[[M]], %[[N]], %[[K]], %{{.*}}, %{{.*}}, %[[LDA]], %{{.*}}, %[[LDB]], %{{.*}}, %{{.*}}, %[[LDC]])
func.func @sgemm_transpose_lhs(%a: memref<5x4xf32>, %b: memref<5x6xf32>, %c: memref<4x6xf32>) {
  linalg.generic {indexing_maps = [#at, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<5x4xf32>, memref<5x6xf32>) outs(%c : memref<4x6xf32>)
      attrs = {kiln.matmul = {transpose_lhs}} {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// f64, batch [2, 3]: one cblas_dgemm per batch element in an scf.for over
// 2 * 3 = 6, each operand advanced by its matrix size (M * K = 20,
// K * N = 30, M * N = 24 elements) times 8 bytes. No zero fill comes first:
// the product adds to what C holds, beta 1.
// CHECK-LABEL: func.func @dgemm_batched(
// CHECK-SAME: %[[A:[^:]*]]: memref<2x3x5x4xf64>, %[[B:[^:]*]]: memref<2x3x5x6xf64>, %[[C:[^:]*]]: memref<2x3x4x6xf64>
// CHECK-DAG: %[[LB:.*]] = arith.constant 0 : index
// CHECK-DAG: %[[UB:.*]] = arith.constant 6 : index
// CHECK-DAG: %[[STEP:.*]] = arith.constant 1 : index
// CHECK: scf.for %[[IV:.*]] = %[[LB]] to %[[UB]] step %[[STEP]] {
// CHECK: %[[AMAT:.*]] = arith.constant 20 : index
// CHECK: %[[AOFF:.*]] = arith.muli %[[IV]], %[[AMAT]] : index
// CHECK: %[[ABASE:.*]] = memref.extract_aligned_pointer_as_index %[[A]]
// CHECK: %[[ESIZE:.*]] = arith.constant 8 : index
// CHECK: %[[ABYTES:.*]] = arith.muli %[[AOFF]], %[[ESIZE]] : index
// CHECK: %[[AADDR:.*]] = arith.addi %[[ABASE]], %[[ABYTES]] : index
// CHECK: %[[BMAT:.*]] = arith.constant 30 : index
// CHECK: arith.muli %[[IV]], %[[BMAT]] : index
// CHECK: memref.extract_aligned_pointer_as_index %[[B]]
// CHECK: %[[CMAT:.*]] = arith.constant 24 : index
// CHECK: arith.muli %[[IV]], %[[CMAT]] : index
// CHECK: memref.extract_aligned_pointer_as_index %[[C]]
// CHECK: %[[ALPHA:.*]] = arith.constant 1.000000e+00 : f64
// CHECK: %[[BETA:.*]] = arith.constant 1.000000e+00 : f64
// CHECK: %[[TA:.*]] = arith.constant 112 : i32
// CHECK: %[[TB:.*]] = arith.constant 111 : i32
// CHECK: %[[M:.*]] = arith.constant 4 : i32
// CHECK: %[[N:.*]] = arith.constant 6 : i32
// CHECK: %[[K:.*]] = arith.constant 5 : i32
// CHECK: func.call @cblas_dgemm(%{{.*}}, %[[TA]], %[[TB]], %[[M]], %[[N]], %[[K]], %[[ALPHA]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[BETA]], %{{.*}}, %{{.*}}) : (i32, i32, i32, i32, i32, i32, f64, !llvm.ptr, i32, !llvm.ptr, i32, f64, !llvm.ptr, i32) -> ()
// The loop carries the cost of all six: C is read too (beta 1).
// CHECK-NEXT: } {kiln.cost = {flops = 1440 : i64, kind = "gemm", read = 3552 : i64, what = "6 x dgemm 4x6x5 A^T C+=", written = 1152 : i64}}
// CHECK-NEXT: return
func.func @dgemm_batched(%a: memref<2x3x5x4xf64>, %b: memref<2x3x5x6xf64>, %c: memref<2x3x4x6xf64>) {
  linalg.generic {indexing_maps = [#batched_at, #batched_b, #batched_c],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<2x3x5x4xf64>, memref<2x3x5x6xf64>) outs(%c : memref<2x3x4x6xf64>)
      attrs = {kiln.matmul = {transpose_lhs}} {
  ^bb0(%x: f64, %y: f64, %acc: f64):
    %p = arith.mulf %x, %y : f64
    %s = arith.addf %acc, %p : f64
    linalg.yield %s : f64
  }
  return
}

// No BLAS for integers: the generic stays.
// CHECK-LABEL: func.func @integer_stays(
// CHECK-NOT: call
// CHECK: linalg.generic
// CHECK-SAME: attrs = {kiln.matmul = {}}
// CHECK-NOT: call
// CHECK: return
func.func @integer_stays(%a: memref<2x3xi32>, %b: memref<3x4xi32>, %c: memref<2x4xi32>) {
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<2x3xi32>, memref<3x4xi32>) outs(%c : memref<2x4xi32>)
      attrs = {kiln.matmul = {}} {
  ^bb0(%x: i32, %y: i32, %acc: i32):
    %p = arith.muli %x, %y : i32
    %s = arith.addi %acc, %p : i32
    linalg.yield %s : i32
  }
  return
}

// Views whose rows are further apart than they are long (row-padded
// buffers, kiln-pad-matrix-rows) are matrices with a larger leading
// dimension: A's rows are 6 apart, and C starts at element 2 of its buffer
// (2 * 4 bytes in) with rows 8 apart.
// CHECK-LABEL: func.func @strided_rows(
// CHECK-SAME: %[[A:[^:]*]]: memref<2x3xf32, strided<[6, 1]>>, %{{[^:]*}}: memref<3x4xf32>, %[[C:[^:]*]]: memref<2x4xf32, strided<[8, 1], offset: 2>>
// CHECK: memref.extract_aligned_pointer_as_index %[[A]]
// CHECK: %[[COFF:.*]] = arith.addi %{{.*}}, %c2 : index
// CHECK: %[[CBASE:.*]] = memref.extract_aligned_pointer_as_index %[[C]]
// CHECK: arith.muli %[[COFF]], %c4
// CHECK: call @cblas_sgemm(%{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %c6_i32{{[_0-9]*}}, %{{[^,]*}}, %c4_i32{{[_0-9]*}}, %{{[^,]*}}, %{{[^,]*}}, %c8_i32{{[_0-9]*}})
func.func @strided_rows(%a: memref<2x3xf32, strided<[6, 1]>>, %b: memref<3x4xf32>, %c: memref<2x4xf32, strided<[8, 1], offset: 2>>) {
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<2x3xf32, strided<[6, 1]>>, memref<3x4xf32>) outs(%c : memref<2x4xf32, strided<[8, 1], offset: 2>>)
      attrs = {kiln.matmul = {}} {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// A batch of row-padded matrices: C's rows of 6 are 8 apart, its 3 rows
// 24 elements, and its two batch dimensions step as one (48 = 2 * 24).
// Each product's C starts 24 elements after the last one's.
// CHECK-LABEL: func.func @strided_batch(
// CHECK: scf.for %[[IV:.*]] = %{{.*}} to %{{.*}} step
// CHECK: %[[CMAT:.*]] = arith.constant 24 : index
// CHECK: arith.muli %[[IV]], %[[CMAT]] : index
// CHECK: call @cblas_dgemm({{.*}}, %c8_i32{{[_0-9]*}}) :
func.func @strided_batch(%a: memref<2x2x5x3xf64>, %b: memref<2x2x5x6xf64>, %c: memref<2x2x3x6xf64, strided<[48, 24, 8, 1]>>) {
  linalg.generic {indexing_maps = [#batched_at, #batched_b, #batched_c],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<2x2x5x3xf64>, memref<2x2x5x6xf64>) outs(%c : memref<2x2x3x6xf64, strided<[48, 24, 8, 1]>>)
      attrs = {kiln.matmul = {transpose_lhs}} {
  ^bb0(%x: f64, %y: f64, %acc: f64):
    %p = arith.mulf %x, %y : f64
    %s = arith.addf %acc, %p : f64
    linalg.yield %s : f64
  }
  return
}

// Batch dimensions that do not step as one (50 is not 2 * 24): no single
// batch stride, the generic stays.
// CHECK-LABEL: func.func @uneven_batch_stays(
// CHECK-NOT: call
// CHECK: linalg.generic
// CHECK: return
func.func @uneven_batch_stays(%a: memref<2x2x5x3xf64>, %b: memref<2x2x5x6xf64>, %c: memref<2x2x3x6xf64, strided<[50, 24, 8, 1]>>) {
  linalg.generic {indexing_maps = [#batched_at, #batched_b, #batched_c],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<2x2x5x3xf64>, memref<2x2x5x6xf64>) outs(%c : memref<2x2x3x6xf64, strided<[50, 24, 8, 1]>>)
      attrs = {kiln.matmul = {transpose_lhs}} {
  ^bb0(%x: f64, %y: f64, %acc: f64):
    %p = arith.mulf %x, %y : f64
    %s = arith.addf %acc, %p : f64
    linalg.yield %s : f64
  }
  return
}

// A view whose rows are not contiguous, or closer than they are long, is
// no matrix BLAS takes: the generic stays.
// CHECK-LABEL: func.func @strided_stays(
// CHECK-NOT: call
// CHECK: linalg.generic
// CHECK-SAME: attrs = {kiln.matmul = {}}
// CHECK-NOT: call
// CHECK: linalg.generic
// CHECK-NOT: call
// CHECK: return
func.func @strided_stays(%a: memref<2x3xf32, strided<[1, 2]>>, %b: memref<3x4xf32>, %c: memref<2x4xf32>, %d: memref<2x3xf32, strided<[2, 1]>>) {
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<2x3xf32, strided<[1, 2]>>, memref<3x4xf32>) outs(%c : memref<2x4xf32>)
      attrs = {kiln.matmul = {}} {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%d, %b : memref<2x3xf32, strided<[2, 1]>>, memref<3x4xf32>) outs(%c : memref<2x4xf32>)
      attrs = {kiln.matmul = {}} {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// Unmarked contractions are left alone.
// CHECK-LABEL: func.func @unmarked_stays(
// CHECK-NOT: call
// CHECK: linalg.generic
// CHECK-NOT: call
// CHECK: return
func.func @unmarked_stays(%a: memref<2x3xf32>, %b: memref<3x4xf32>, %c: memref<2x4xf32>) {
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<2x3xf32>, memref<3x4xf32>) outs(%c : memref<2x4xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// Products of 2^20 multiply-adds or more are shared among the OpenMP team:
// an scf.parallel over the batch and over blocks of C's rows (m >= n) or
// columns, as many blocks as the team's size (omp_get_max_threads, at run
// time) asks for, none under 32 rows or columns, one call per block with
// its row (or column) count.
#big_a = affine_map<(m, n, k) -> (m, k)>
#big_b = affine_map<(m, n, k) -> (k, n)>
#big_c = affine_map<(m, n, k) -> (m, n)>

// [256, 128] x [128, 64]: 2^21 multiply-adds, rows split: at most
// 256 / 32 = 8 blocks of `per` rows; a block starts `first` rows in, so A
// (lda 128) and C (ldc 64) advance by first * 128 and first * 64 elements,
// B not at all.
// CHECK-LABEL: func.func @shared_by_rows(
// CHECK-SAME: %[[A:[^:]*]]: memref<256x128xf32>, %[[B:[^:]*]]: memref<128x64xf32>, %[[C:[^:]*]]: memref<256x64xf32>
// CHECK: %[[T:.*]] = call @omp_get_max_threads() : () -> i32
// CHECK: %[[TI:.*]] = arith.index_cast %[[T]] : i32 to index
// CHECK: %[[WANT:.*]] = arith.ceildivsi %[[TI]], %{{.*}} : index
// CHECK: %[[ATLEAST:.*]] = arith.maxsi %[[WANT]], %{{.*}} : index
// CHECK: %[[MOST:.*]] = arith.constant 8 : index
// CHECK: %[[PARTS:.*]] = arith.minsi %[[ATLEAST]], %[[MOST]] : index
// CHECK: %[[PER:.*]] = arith.ceildivsi %{{.*}}, %[[PARTS]] : index
// CHECK: %[[BLOCKS:.*]] = arith.ceildivsi %{{.*}}, %[[PER]] : index
// CHECK: scf.parallel (%[[BI:.*]], %[[PI:.*]]) = (%{{.*}}, %{{.*}}) to (%{{.*}}, %[[BLOCKS]])
// CHECK: %[[FIRST:.*]] = arith.muli %[[PI]], %[[PER]] : index
// CHECK: %[[REST:.*]] = arith.subi %{{.*}}, %[[FIRST]] : index
// CHECK: %[[COUNT:.*]] = arith.minsi %[[PER]], %[[REST]] : index
// CHECK: %[[LDA:.*]] = arith.constant 128 : index
// CHECK: arith.muli %[[FIRST]], %[[LDA]] : index
// CHECK: memref.extract_aligned_pointer_as_index %[[A]]
// CHECK: %[[NOB:.*]] = arith.constant 0 : index
// CHECK: arith.muli %[[FIRST]], %[[NOB]] : index
// CHECK: memref.extract_aligned_pointer_as_index %[[B]]
// CHECK: %[[LDC:.*]] = arith.constant 64 : index
// CHECK: arith.muli %[[FIRST]], %[[LDC]] : index
// CHECK: memref.extract_aligned_pointer_as_index %[[C]]
// CHECK: %[[ROWS:.*]] = arith.index_cast %[[COUNT]] : index to i32
// CHECK: %[[N:.*]] = arith.constant 64 : i32
// CHECK: %[[K:.*]] = arith.constant 128 : i32
// CHECK: func.call @cblas_sgemm(%{{.*}}, %{{.*}}, %{{.*}}, %[[ROWS]], %[[N]], %[[K]],
// CHECK: scf.reduce
func.func @shared_by_rows(%a: memref<256x128xf32>, %b: memref<128x64xf32>, %c: memref<256x64xf32>) {
  linalg.generic {indexing_maps = [#big_a, #big_b, #big_c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<256x128xf32>, memref<128x64xf32>) outs(%c : memref<256x64xf32>)
      attrs = {kiln.matmul = {}} {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// [64, 32]^T x [1024, 64]^T: m = 32 < n = 1024, columns split (at most 32
// blocks). B is stored [n, k] (ldb 64): a block starts first * 64 elements
// in; A does not move; C's columns start first elements in.
// CHECK-LABEL: func.func @shared_by_columns(
// CHECK-SAME: %[[A:[^:]*]]: memref<64x32xf32>, %[[B:[^:]*]]: memref<1024x64xf32>, %[[C:[^:]*]]: memref<32x1024xf32>
// CHECK: call @omp_get_max_threads()
// CHECK: %[[MOST:.*]] = arith.constant 32 : index
// CHECK: arith.minsi %{{.*}}, %[[MOST]] : index
// CHECK: scf.parallel
// CHECK: %[[FIRST:.*]] = arith.muli
// CHECK: %[[COUNT:.*]] = arith.minsi
// CHECK: %[[NOA:.*]] = arith.constant 0 : index
// CHECK: arith.muli %[[FIRST]], %[[NOA]] : index
// CHECK: memref.extract_aligned_pointer_as_index %[[A]]
// CHECK: %[[LDB:.*]] = arith.constant 64 : index
// CHECK: arith.muli %[[FIRST]], %[[LDB]] : index
// CHECK: memref.extract_aligned_pointer_as_index %[[B]]
// CHECK: %[[ONE:.*]] = arith.constant 1 : index
// CHECK: arith.muli %[[FIRST]], %[[ONE]] : index
// CHECK: memref.extract_aligned_pointer_as_index %[[C]]
// CHECK: %[[TA:.*]] = arith.constant 112 : i32
// CHECK: %[[TB:.*]] = arith.constant 112 : i32
// CHECK: %[[M:.*]] = arith.constant 32 : i32
// CHECK: %[[COLUMNS:.*]] = arith.index_cast %[[COUNT]] : index to i32
// CHECK: func.call @cblas_sgemm(%{{.*}}, %[[TA]], %[[TB]], %[[M]], %[[COLUMNS]],
func.func @shared_by_columns(%a: memref<64x32xf32>, %b: memref<1024x64xf32>, %c: memref<32x1024xf32>) {
  linalg.generic {indexing_maps = [#at, #bt, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<64x32xf32>, memref<1024x64xf32>) outs(%c : memref<32x1024xf32>)
      attrs = {kiln.matmul = {transpose_lhs, transpose_rhs}} {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}
