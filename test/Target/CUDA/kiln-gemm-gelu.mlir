// RUN: kiln-opt %s --kiln-gemm-gelu --split-input-file | FileCheck %s

// The tanh GELU of a biased product (kiln-gemm-bias's broadcast init),
// read through a reshape, as kiln-amp leaves it: the product is marked
// `gelu`, the elementwise op `kiln.gemm_epilogue`. Nothing else reads the
// product: no auxiliary output.
// CHECK-LABEL: func.func @forward(
// CHECK: linalg.generic {{.*}} attrs = {kiln.matmul = {gelu, round_once, transpose_rhs}}
// CHECK: linalg.generic {{.*}} attrs = {kiln.gemm_epilogue}
#row = affine_map<(d0, d1) -> (d1)>
#id2 = affine_map<(d0, d1) -> (d0, d1)>
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#lhs = affine_map<(d0, d1, d2) -> (d0, d2)>
#rhsT = affine_map<(d0, d1, d2) -> (d1, d2)>
#rhs = affine_map<(d0, d1, d2) -> (d2, d1)>
#out = affine_map<(d0, d1, d2) -> (d0, d1)>
func.func @forward(%x: tensor<8x32xbf16>, %w: tensor<64x32xbf16>,
                   %b: tensor<64xbf16>) -> tensor<2x4x64xbf16> {
  %c0 = arith.constant 0.797884583 : f32
  %c1 = arith.constant 4.471500e-02 : f32
  %half = arith.constant 5.000000e-01 : f32
  %one = arith.constant 1.000000e+00 : f32
  %e = tensor.empty() : tensor<8x64xbf16>
  %bias = linalg.generic {indexing_maps = [#row, #id2], iterator_types = ["parallel", "parallel"]} ins(%b : tensor<64xbf16>) outs(%e : tensor<8x64xbf16>) attrs = {kiln.gemm_bias} {
  ^bb0(%in: bf16, %o: bf16):
    linalg.yield %in : bf16
  } -> tensor<8x64xbf16>
  %p = linalg.generic {indexing_maps = [#lhs, #rhsT, #out], iterator_types = ["parallel", "parallel", "reduction"]} ins(%x, %w : tensor<8x32xbf16>, tensor<64x32xbf16>) outs(%bias : tensor<8x64xbf16>) attrs = {kiln.matmul = {round_once, transpose_rhs}} {
  ^bb0(%a: bf16, %bb: bf16, %o: bf16):
    %0 = arith.extf %o : bf16 to f32
    %1 = arith.extf %a : bf16 to f32
    %2 = arith.extf %bb : bf16 to f32
    %3 = arith.mulf %1, %2 : f32
    %4 = arith.addf %0, %3 : f32
    %5 = arith.truncf %4 : f32 to bf16
    linalg.yield %5 : bf16
  } -> tensor<8x64xbf16>
  %r = tensor.expand_shape %p [[0, 1], [2]] output_shape [2, 4, 64] : tensor<8x64xbf16> into tensor<2x4x64xbf16>
  %e3 = tensor.empty() : tensor<2x4x64xbf16>
  %g = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%r : tensor<2x4x64xbf16>) outs(%e3 : tensor<2x4x64xbf16>) {
  ^bb0(%in: bf16, %o: bf16):
    %0 = arith.extf %in : bf16 to f32
    %1 = arith.mulf %0, %half : f32
    %2 = arith.mulf %0, %0 : f32
    %3 = arith.mulf %0, %2 : f32
    %4 = arith.mulf %3, %c1 : f32
    %5 = arith.addf %0, %4 : f32
    %6 = arith.mulf %5, %c0 : f32
    %7 = math.tanh %6 : f32
    %8 = arith.addf %7, %one : f32
    %9 = arith.mulf %1, %8 : f32
    %10 = arith.truncf %9 : f32 to bf16
    linalg.yield %10 : bf16
  } -> tensor<2x4x64xbf16>
  return %g : tensor<2x4x64xbf16>
}

// -----

// In a training step the backward pass reads the product too: the
// epilogue also stores it (`gelu_aux`). The gradient's product, read only
// by the GELU's derivative at that stored product (written as autodiff
// spells it), is marked `dgelu`.
// CHECK-LABEL: func.func @step(
// CHECK: linalg.generic {{.*}} attrs = {kiln.matmul = {gelu, gelu_aux}}
// CHECK: linalg.generic {{.*}} attrs = {kiln.gemm_epilogue}
// CHECK: linalg.generic {{.*}} attrs = {kiln.matmul = {dgelu}}
// CHECK: linalg.generic {{.*}} attrs = {kiln.gemm_epilogue}
#lhs = affine_map<(d0, d1, d2) -> (d0, d2)>
#rhs = affine_map<(d0, d1, d2) -> (d2, d1)>
#out = affine_map<(d0, d1, d2) -> (d0, d1)>
#id2 = affine_map<(d0, d1) -> (d0, d1)>
func.func @step(%x: tensor<8x32xf32>, %w: tensor<32x64xf32>,
                %dy: tensor<8x16xf32>, %w2: tensor<16x64xf32>)
    -> (tensor<8x64xf32>, tensor<8x64xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %c0 = arith.constant 0.797884583 : f32
  %c1 = arith.constant 4.471500e-02 : f32
  %c3 = arith.constant 0.134144992 : f32
  %half = arith.constant 5.000000e-01 : f32
  %one = arith.constant 1.000000e+00 : f32
  %e = tensor.empty() : tensor<8x64xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<8x64xf32>) -> tensor<8x64xf32>
  %p = linalg.generic {indexing_maps = [#lhs, #rhs, #out], iterator_types = ["parallel", "parallel", "reduction"]} ins(%x, %w : tensor<8x32xf32>, tensor<32x64xf32>) outs(%f : tensor<8x64xf32>) attrs = {kiln.matmul = {}} {
  ^bb0(%a: f32, %bb: f32, %o: f32):
    %0 = arith.mulf %a, %bb : f32
    %1 = arith.addf %o, %0 : f32
    linalg.yield %1 : f32
  } -> tensor<8x64xf32>
  %e2 = tensor.empty() : tensor<8x64xf32>
  %g = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]} ins(%p : tensor<8x64xf32>) outs(%e2 : tensor<8x64xf32>) {
  ^bb0(%in: f32, %o: f32):
    %1 = arith.mulf %in, %half : f32
    %2 = arith.mulf %in, %in : f32
    %3 = arith.mulf %in, %2 : f32
    %4 = arith.mulf %3, %c1 : f32
    %5 = arith.addf %in, %4 : f32
    %6 = arith.mulf %5, %c0 : f32
    %7 = math.tanh %6 : f32
    %8 = arith.addf %7, %one : f32
    %9 = arith.mulf %1, %8 : f32
    linalg.yield %9 : f32
  } -> tensor<8x64xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e : tensor<8x64xf32>) -> tensor<8x64xf32>
  %dg = linalg.generic {indexing_maps = [#lhs, #rhs, #out], iterator_types = ["parallel", "parallel", "reduction"]} ins(%dy, %w2 : tensor<8x16xf32>, tensor<16x64xf32>) outs(%f2 : tensor<8x64xf32>) attrs = {kiln.matmul = {}} {
  ^bb0(%a: f32, %bb: f32, %o: f32):
    %0 = arith.mulf %a, %bb : f32
    %1 = arith.addf %o, %0 : f32
    linalg.yield %1 : f32
  } -> tensor<8x64xf32>
  %e3 = tensor.empty() : tensor<8x64xf32>
  %dp = linalg.generic {indexing_maps = [#id2, #id2, #id2], iterator_types = ["parallel", "parallel"]} ins(%dg, %p : tensor<8x64xf32>, tensor<8x64xf32>) outs(%e3 : tensor<8x64xf32>) {
  ^bb0(%gi: f32, %xi: f32, %o: f32):
    %0 = arith.mulf %xi, %xi : f32
    %1 = arith.mulf %0, %xi : f32
    %2 = arith.mulf %1, %c1 : f32
    %3 = arith.addf %xi, %2 : f32
    %4 = arith.mulf %3, %c0 : f32
    %5 = arith.mulf %0, %c3 : f32
    %6 = arith.addf %5, %one : f32
    %7 = math.tanh %4 : f32
    %8 = arith.addf %7, %one : f32
    %9 = arith.mulf %6, %c0 : f32
    %10 = arith.mulf %7, %7 : f32
    %11 = arith.subf %one, %10 : f32
    %12 = arith.mulf %11, %9 : f32
    %13 = arith.mulf %xi, %half : f32
    %14 = arith.mulf %13, %12 : f32
    %15 = arith.mulf %8, %half : f32
    %16 = arith.addf %15, %14 : f32
    %17 = arith.mulf %gi, %16 : f32
    linalg.yield %17 : f32
  } -> tensor<8x64xf32>
  return %g, %dp : tensor<8x64xf32>, tensor<8x64xf32>
}

// -----

// Not taken: the erf GELU (which cuBLASLt's epilogue is not), and the tanh
// GELU of a product that accumulates into another value.
// CHECK-LABEL: func.func @not_taken(
// CHECK-NOT: gelu
// CHECK-NOT: kiln.gemm_epilogue
#lhs = affine_map<(d0, d1, d2) -> (d0, d2)>
#rhs = affine_map<(d0, d1, d2) -> (d2, d1)>
#out = affine_map<(d0, d1, d2) -> (d0, d1)>
#id2 = affine_map<(d0, d1) -> (d0, d1)>
func.func @not_taken(%x: tensor<8x32xf32>, %w: tensor<32x64xf32>,
                     %acc: tensor<8x64xf32>)
    -> (tensor<8x64xf32>, tensor<8x64xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %rsqrt2 = arith.constant 0.707106769 : f32
  %c0 = arith.constant 0.797884583 : f32
  %c1 = arith.constant 4.471500e-02 : f32
  %half = arith.constant 5.000000e-01 : f32
  %one = arith.constant 1.000000e+00 : f32
  %e = tensor.empty() : tensor<8x64xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<8x64xf32>) -> tensor<8x64xf32>
  %p = linalg.generic {indexing_maps = [#lhs, #rhs, #out], iterator_types = ["parallel", "parallel", "reduction"]} ins(%x, %w : tensor<8x32xf32>, tensor<32x64xf32>) outs(%f : tensor<8x64xf32>) attrs = {kiln.matmul = {}} {
  ^bb0(%a: f32, %bb: f32, %o: f32):
    %0 = arith.mulf %a, %bb : f32
    %1 = arith.addf %o, %0 : f32
    linalg.yield %1 : f32
  } -> tensor<8x64xf32>
  %g = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]} ins(%p : tensor<8x64xf32>) outs(%e : tensor<8x64xf32>) {
  ^bb0(%in: f32, %o: f32):
    %0 = arith.mulf %in, %rsqrt2 : f32
    %1 = math.erf %0 : f32
    %2 = arith.addf %1, %one : f32
    %3 = arith.mulf %in, %half : f32
    %4 = arith.mulf %3, %2 : f32
    linalg.yield %4 : f32
  } -> tensor<8x64xf32>
  %q = linalg.generic {indexing_maps = [#lhs, #rhs, #out], iterator_types = ["parallel", "parallel", "reduction"]} ins(%x, %w : tensor<8x32xf32>, tensor<32x64xf32>) outs(%acc : tensor<8x64xf32>) attrs = {kiln.matmul = {}} {
  ^bb0(%a: f32, %bb: f32, %o: f32):
    %0 = arith.mulf %a, %bb : f32
    %1 = arith.addf %o, %0 : f32
    linalg.yield %1 : f32
  } -> tensor<8x64xf32>
  %h = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]} ins(%q : tensor<8x64xf32>) outs(%e : tensor<8x64xf32>) {
  ^bb0(%in: f32, %o: f32):
    %1 = arith.mulf %in, %half : f32
    %2 = arith.mulf %in, %in : f32
    %3 = arith.mulf %in, %2 : f32
    %4 = arith.mulf %3, %c1 : f32
    %5 = arith.addf %in, %4 : f32
    %6 = arith.mulf %5, %c0 : f32
    %7 = math.tanh %6 : f32
    %8 = arith.addf %7, %one : f32
    %9 = arith.mulf %1, %8 : f32
    linalg.yield %9 : f32
  } -> tensor<8x64xf32>
  return %g, %h : tensor<8x64xf32>, tensor<8x64xf32>
}

// -----

// The GELU's output tensor.empty is shared with another op (as CSE leaves
// equal ones): the marked op gets one of its own, so that bufferization
// cannot put its output in the bytes of the other op's result.
// CHECK-LABEL: func.func @own_output(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<8x32xbf16>
// CHECK: %[[SHARED:.*]] = tensor.empty() : tensor<8x64xbf16>
// CHECK: %[[P:.*]] = linalg.generic {{.*}} attrs = {kiln.matmul = {gelu, gelu_aux, round_once, transpose_rhs}}
// CHECK: %[[OWN:.*]] = tensor.empty() : tensor<8x64xbf16>
// CHECK: linalg.generic {{.*}} ins(%[[P]] : tensor<8x64xbf16>) outs(%[[OWN]] : tensor<8x64xbf16>) attrs = {kiln.gemm_epilogue}
// CHECK: linalg.generic {{.*}} ins(%[[P]] : tensor<8x64xbf16>) outs(%[[SHARED]] : tensor<8x64xbf16>) {
#id2 = affine_map<(d0, d1) -> (d0, d1)>
#lhs = affine_map<(d0, d1, d2) -> (d0, d2)>
#rhsT = affine_map<(d0, d1, d2) -> (d1, d2)>
#out = affine_map<(d0, d1, d2) -> (d0, d1)>
func.func @own_output(%x: tensor<8x32xbf16>, %w: tensor<64x32xbf16>)
    -> (tensor<8x64xbf16>, tensor<8x64xbf16>) {
  %c0 = arith.constant 0.797884583 : f32
  %c1 = arith.constant 4.471500e-02 : f32
  %half = arith.constant 5.000000e-01 : f32
  %one = arith.constant 1.000000e+00 : f32
  %zero = arith.constant 0.0 : bf16
  %e = tensor.empty() : tensor<8x64xbf16>
  %z = linalg.fill ins(%zero : bf16) outs(%e : tensor<8x64xbf16>) -> tensor<8x64xbf16>
  %p = linalg.generic {indexing_maps = [#lhs, #rhsT, #out], iterator_types = ["parallel", "parallel", "reduction"]} ins(%x, %w : tensor<8x32xbf16>, tensor<64x32xbf16>) outs(%z : tensor<8x64xbf16>) attrs = {kiln.matmul = {round_once, transpose_rhs}} {
  ^bb0(%a: bf16, %bb: bf16, %o: bf16):
    %0 = arith.extf %o : bf16 to f32
    %1 = arith.extf %a : bf16 to f32
    %2 = arith.extf %bb : bf16 to f32
    %3 = arith.mulf %1, %2 : f32
    %4 = arith.addf %0, %3 : f32
    %5 = arith.truncf %4 : f32 to bf16
    linalg.yield %5 : bf16
  } -> tensor<8x64xbf16>
  %g = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]} ins(%p : tensor<8x64xbf16>) outs(%e : tensor<8x64xbf16>) {
  ^bb0(%in: bf16, %o: bf16):
    %0 = arith.extf %in : bf16 to f32
    %1 = arith.mulf %0, %half : f32
    %2 = arith.mulf %0, %0 : f32
    %3 = arith.mulf %0, %2 : f32
    %4 = arith.mulf %3, %c1 : f32
    %5 = arith.addf %0, %4 : f32
    %6 = arith.mulf %5, %c0 : f32
    %7 = math.tanh %6 : f32
    %8 = arith.addf %7, %one : f32
    %9 = arith.mulf %1, %8 : f32
    %10 = arith.truncf %9 : f32 to bf16
    linalg.yield %10 : bf16
  } -> tensor<8x64xbf16>
  %n = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]} ins(%p : tensor<8x64xbf16>) outs(%e : tensor<8x64xbf16>) {
  ^bb0(%in: bf16, %o: bf16):
    %0 = arith.negf %in : bf16
    linalg.yield %0 : bf16
  } -> tensor<8x64xbf16>
  return %g, %n : tensor<8x64xbf16>, tensor<8x64xbf16>
}
