// RUN: kiln-opt %s --split-input-file --kiln-amp | FileCheck %s
// RUN: kiln-opt %s --split-input-file --kiln-amp=store=false | FileCheck %s --check-prefix=WIDE
// RUN: kiln-opt %s --split-input-file --kiln-amp=type=f16 | FileCheck %s --check-prefix=F16

// kiln-amp's stored activations: a product whose result only
// linalg.generic ops read, none of which passes it on to what the function
// returns, stores it in bf16. It sums in f32 (its body widens the stored
// element and rounds once, `round_once`), and each reader widens what it
// reads. With store=false it stays f32; with type=f16, f16.

#a = affine_map<(d0, d1, d2) -> (d0, d2)>
#b = affine_map<(d0, d1, d2) -> (d2, d1)>
#c = affine_map<(d0, d1, d2) -> (d0, d1)>
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>

// CHECK-LABEL: func.func @activation(
// CHECK: %[[ZERO:.*]] = arith.constant 0.000000e+00 : bf16
// CHECK: %[[FILL:.*]] = linalg.fill ins(%[[ZERO]] : bf16) outs(%{{.*}} : tensor<4x16xbf16>)
// CHECK: %[[P:.*]] = linalg.generic {{.*}} ins(%{{.*}}, %{{.*}} : tensor<4x8xbf16>, tensor<8x16xbf16>) outs(%[[FILL]] : tensor<4x16xbf16>) attrs = {kiln.matmul = {round_once}}
// CHECK-NEXT: ^bb0(%{{.*}}: bf16, %{{.*}}: bf16, %[[ACC:.*]]: bf16):
// CHECK-NEXT: %[[EXT:.*]] = arith.extf %[[ACC]] : bf16 to f32
// CHECK: %[[SUM:.*]] = arith.addf %[[EXT]], %{{.*}} : f32
// CHECK-NEXT: %[[ROUNDED:.*]] = arith.truncf %[[SUM]] : f32 to bf16
// CHECK-NEXT: linalg.yield %[[ROUNDED]] : bf16
// CHECK-NEXT: } -> tensor<4x16xbf16>
// CHECK: linalg.generic {{.*}} ins(%[[P]] : tensor<4x16xbf16>) outs(%{{.*}} : tensor<4x16xf32>)
// CHECK-NEXT: ^bb0(%[[IN:.*]]: bf16, %{{.*}}: f32):
// CHECK-NEXT: %{{.*}} = arith.extf %[[IN]] : bf16 to f32
// WIDE-LABEL: func.func @activation(
// WIDE-NOT: round_once
// WIDE: linalg.generic {{.*}} ins(%{{.*}}, %{{.*}} : tensor<4x8xbf16>, tensor<8x16xbf16>) outs(%{{.*}} : tensor<4x16xf32>) attrs = {kiln.matmul = {}}
// F16-LABEL: func.func @activation(
// F16: linalg.generic {{.*}} ins(%{{.*}}, %{{.*}} : tensor<4x8xf16>, tensor<8x16xf16>) outs(%{{.*}} : tensor<4x16xf16>) attrs = {kiln.matmul = {round_once}}
func.func @activation(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>) -> tensor<4xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %p = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"], kiln.matmul = {}} ins(%x, %w : tensor<4x8xf32>, tensor<8x16xf32>) outs(%init : tensor<4x16xf32>) {
  ^bb0(%l: f32, %r: f32, %o: f32):
    %m = arith.mulf %l, %r : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  } -> tensor<4x16xf32>
  %relu = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%p : tensor<4x16xf32>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%in: f32, %o: f32):
    %m = arith.maximumf %in, %zero : f32
    linalg.yield %m : f32
  } -> tensor<4x16xf32>
  %re = tensor.empty() : tensor<4xf32>
  %rinit = linalg.fill ins(%zero : f32) outs(%re : tensor<4xf32>) -> tensor<4xf32>
  %rows = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]} ins(%relu : tensor<4x16xf32>) outs(%rinit : tensor<4xf32>) {
  ^bb0(%in: f32, %o: f32):
    %s = arith.addf %o, %in : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  return %rows : tensor<4xf32>
}

// -----

#a = affine_map<(d0, d1, d2) -> (d0, d2)>
#b = affine_map<(d0, d1, d2) -> (d2, d1)>
#c = affine_map<(d0, d1, d2) -> (d0, d1)>
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#vec = affine_map<(d0, d1) -> (d1)>

// A linear layer's bias, added by the product's epilogue (kiln.gemm_bias),
// is read rounded, as cuBLASLt reads a bias of the output's type.
// CHECK-LABEL: func.func @bias(
// CHECK-SAME: %{{.*}}: tensor<4x8xf32>, %{{.*}}: tensor<8x16xf32>, %[[BIAS:.*]]: tensor<16xf32>
// CHECK: %[[NB:.*]] = linalg.generic {{.*}} ins(%[[BIAS]] : tensor<16xf32>) outs(%{{.*}} : tensor<16xbf16>)
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK: %[[BC:.*]] = linalg.generic {{.*}} ins(%[[NB]] : tensor<16xbf16>) outs(%{{.*}} : tensor<4x16xbf16>) attrs = {kiln.gemm_bias}
// CHECK: linalg.generic {{.*}} outs(%[[BC]] : tensor<4x16xbf16>) attrs = {kiln.matmul = {round_once}}
func.func @bias(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %bias: tensor<16xf32>) -> tensor<4xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %init = linalg.generic {indexing_maps = [#vec, #id], iterator_types = ["parallel", "parallel"], kiln.gemm_bias} ins(%bias : tensor<16xf32>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%in: f32, %o: f32):
    linalg.yield %in : f32
  } -> tensor<4x16xf32>
  %p = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"], kiln.matmul = {}} ins(%x, %w : tensor<4x8xf32>, tensor<8x16xf32>) outs(%init : tensor<4x16xf32>) {
  ^bb0(%l: f32, %r: f32, %o: f32):
    %m = arith.mulf %l, %r : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  } -> tensor<4x16xf32>
  %re = tensor.empty() : tensor<4xf32>
  %rinit = linalg.fill ins(%zero : f32) outs(%re : tensor<4xf32>) -> tensor<4xf32>
  %rows = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]} ins(%p : tensor<4x16xf32>) outs(%rinit : tensor<4xf32>) {
  ^bb0(%in: f32, %o: f32):
    %s = arith.addf %o, %in : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  return %rows : tensor<4xf32>
}

// -----

#a = affine_map<(d0, d1, d2) -> (d0, d2)>
#b = affine_map<(d0, d1, d2) -> (d2, d1)>
#c = affine_map<(d0, d1, d2) -> (d0, d1)>
#id = affine_map<(d0, d1) -> (d0, d1)>

// What flows, through elementwise ops only, into the function's results
// stays f32: a parameter's gradient on its way to the optimizer's update,
// and a result returned as it is.
// CHECK-LABEL: func.func @gradient(
// CHECK-NOT: round_once
// CHECK: return
func.func @gradient(%x: tensor<4x8xf32>, %dy: tensor<4x16xf32>, %w: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>) {
  %zero = arith.constant 0.0 : f32
  %lr = arith.constant 0.1 : f32
  %e = tensor.empty() : tensor<8x16xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<8x16xf32>) -> tensor<8x16xf32>
  %g = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d2, d0)>, affine_map<(d0, d1, d2) -> (d2, d1)>, #c], iterator_types = ["parallel", "parallel", "reduction"], kiln.matmul = {transpose_lhs}} ins(%x, %dy : tensor<4x8xf32>, tensor<4x16xf32>) outs(%init : tensor<8x16xf32>) {
  ^bb0(%l: f32, %r: f32, %o: f32):
    %m = arith.mulf %l, %r : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  } -> tensor<8x16xf32>
  %new = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%w, %g : tensor<8x16xf32>, tensor<8x16xf32>) outs(%e : tensor<8x16xf32>) {
  ^bb0(%p: f32, %d: f32, %o: f32):
    %step = arith.mulf %d, %lr : f32
    %s = arith.subf %p, %step : f32
    linalg.yield %s : f32
  } -> tensor<8x16xf32>
  %init2 = linalg.fill ins(%zero : f32) outs(%e : tensor<8x16xf32>) -> tensor<8x16xf32>
  %h = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d2, d0)>, affine_map<(d0, d1, d2) -> (d2, d1)>, #c], iterator_types = ["parallel", "parallel", "reduction"], kiln.matmul = {transpose_lhs}} ins(%x, %dy : tensor<4x8xf32>, tensor<4x16xf32>) outs(%init2 : tensor<8x16xf32>) {
  ^bb0(%l: f32, %r: f32, %o: f32):
    %m = arith.mulf %l, %r : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  } -> tensor<8x16xf32>
  return %new, %h : tensor<8x16xf32>, tensor<8x16xf32>
}

// -----

#a = affine_map<(d0, d1, d2) -> (d0, d2)>
#b = affine_map<(d0, d1, d2) -> (d2, d1)>
#c = affine_map<(d0, d1, d2) -> (d0, d1)>

// The runtime's layer-norm kernels read a plain layer norm's input in f32
// (their later passes read it again): a product it reads keeps f32.
// CHECK-LABEL: func.func @layer_norm(
// CHECK-NOT: round_once
// CHECK: kiln.fused_layer_norm
func.func @layer_norm(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %scale: tensor<16xf32>) -> tensor<4x16xbf16> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %p = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"], kiln.matmul = {}} ins(%x, %w : tensor<4x8xf32>, tensor<8x16xf32>) outs(%init : tensor<4x16xf32>) {
  ^bb0(%l: f32, %r: f32, %o: f32):
    %m = arith.mulf %l, %r : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  } -> tensor<4x16xf32>
  %y = kiln.fused_layer_norm %p, %scale {epsilon = 1.0e-5 : f64} : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xbf16>
  return %y : tensor<4x16xbf16>
}

// -----

#a = affine_map<(d0, d1, d2) -> (d0, d2)>
#b = affine_map<(d0, d1, d2) -> (d2, d1)>
#c = affine_map<(d0, d1, d2) -> (d0, d1)>
#r = affine_map<(d0) -> (d0)>

// A loss reading the logit of each row's label (tensor.extract in its
// body) reads the stored element and widens it; the logits go on to the
// loss, a reduction, and are stored.
// CHECK-LABEL: func.func @extract(
// CHECK: %[[P:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<4x16xbf16>) attrs = {kiln.matmul = {round_once}}
// CHECK: %[[E:.*]] = tensor.extract %[[P]][%{{.*}}, %{{.*}}] : tensor<4x16xbf16>
// CHECK-NEXT: %{{.*}} = arith.extf %[[E]] : bf16 to f32
func.func @extract(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %labels: tensor<4xindex>) -> tensor<f32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %p = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"], kiln.matmul = {}} ins(%x, %w : tensor<4x8xf32>, tensor<8x16xf32>) outs(%init : tensor<4x16xf32>) {
  ^bb0(%l: f32, %r: f32, %o: f32):
    %m = arith.mulf %l, %r : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  } -> tensor<4x16xf32>
  %se = tensor.empty() : tensor<f32>
  %sinit = linalg.fill ins(%zero : f32) outs(%se : tensor<f32>) -> tensor<f32>
  %loss = linalg.generic {indexing_maps = [#r, affine_map<(d0) -> ()>], iterator_types = ["reduction"]} ins(%labels : tensor<4xindex>) outs(%sinit : tensor<f32>) {
  ^bb0(%label: index, %o: f32):
    %i = linalg.index 0 : index
    %logit = tensor.extract %p[%i, %label] : tensor<4x16xf32>
    %s = arith.subf %o, %logit : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

#a = affine_map<(d0, d1, d2) -> (d0, d2)>
#b = affine_map<(d0, d1, d2) -> (d2, d1)>
#c = affine_map<(d0, d1, d2) -> (d0, d1)>

// They read a residual sum's operands in 16 bits (the later passes read the
// f32 sum they write), and the gradient's grad and accumulate.
// CHECK-LABEL: func.func @residual(
// CHECK: %[[P:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<4x16xbf16>) attrs = {kiln.matmul = {round_once}}
// CHECK: kiln.fused_layer_norm %{{.*}}, %{{.*}} residual %[[P]] : (tensor<4x16xf32>, tensor<16xf32>, tensor<4x16xbf16>)
// CHECK: %[[Q:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<4x16xbf16>) attrs = {kiln.matmul = {round_once}}
// CHECK: kiln.fused_layer_norm_grad %{{.*}}, %{{.*}}, %[[Q]] : (tensor<4x16xf32>, tensor<16xf32>, tensor<4x16xbf16>)
func.func @residual(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %stream: tensor<4x16xf32>, %scale: tensor<16xf32>) -> (tensor<4x16xbf16>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<16xf32>, tensor<16xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %p = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"], kiln.matmul = {}} ins(%x, %w : tensor<4x8xf32>, tensor<8x16xf32>) outs(%init : tensor<4x16xf32>) {
  ^bb0(%l: f32, %r: f32, %o: f32):
    %m = arith.mulf %l, %r : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  } -> tensor<4x16xf32>
  %y, %sum = kiln.fused_layer_norm %stream, %scale residual %p {epsilon = 1.0e-5 : f64} : (tensor<4x16xf32>, tensor<16xf32>, tensor<4x16xf32>) -> (tensor<4x16xbf16>, tensor<4x16xf32>)
  %init2 = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %q = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"], kiln.matmul = {}} ins(%x, %w : tensor<4x8xf32>, tensor<8x16xf32>) outs(%init2 : tensor<4x16xf32>) {
  ^bb0(%l: f32, %r: f32, %o: f32):
    %m = arith.mulf %l, %r : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  } -> tensor<4x16xf32>
  %dx, %dg, %db, %partials = kiln.fused_layer_norm_grad %sum, %scale, %q {epsilon = 1.0e-5 : f64} : (tensor<4x16xf32>, tensor<16xf32>, tensor<4x16xf32>) -> (tensor<4x16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<1x2x16xf32>)
  return %y, %sum, %dx, %dg, %db : tensor<4x16xbf16>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<16xf32>, tensor<16xf32>
}
