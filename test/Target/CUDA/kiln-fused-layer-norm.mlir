// RUN: kiln-opt %s -split-input-file --kiln-fused-layer-norm | FileCheck %s
// RUN: kiln-opt %s -split-input-file --kiln-fused-layer-norm --kiln-decompose --convert-kiln-to-linalg --canonicalize --kiln-amp=type=bf16 --canonicalize | FileCheck %s --check-prefix=AMP
// RUN: kiln-opt %s -split-input-file --kiln-fused-layer-norm --kiln-decompose --convert-kiln-to-linalg --one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map" | FileCheck %s --check-prefix=BUF
// RUN: kiln-opt %s -split-input-file --kiln-fused-layer-norm --kiln-decompose --convert-kiln-to-linalg --one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map" --kiln-gpu-emulate | FileCheck %s --check-prefix=EMU

// A layer norm over the trailing dimensions becomes the row kernels' op on
// the [leading, normalized] matrix, the scale and bias flattened with it,
// and the result reshaped back.
// CHECK-LABEL: func.func @forward(
// CHECK-SAME: %[[X:.*]]: tensor<2x3x4xf32>, %[[G:.*]]: tensor<3x4xf32>, %[[B:.*]]: tensor<3x4xf32>
// CHECK-DAG: %[[B1:.*]] = kiln.reshape %[[B]] : tensor<3x4xf32> to tensor<12xf32>
// CHECK-DAG: %[[X2:.*]] = kiln.reshape %[[X]] : tensor<2x3x4xf32> to tensor<2x12xf32>
// CHECK-DAG: %[[G1:.*]] = kiln.reshape %[[G]] : tensor<3x4xf32> to tensor<12xf32>
// CHECK: %[[Y:.*]] = kiln.fused_layer_norm %[[X2]], %[[G1]] bias %[[B1]] {epsilon = 1.000000e-03 : f64} : (tensor<2x12xf32>, tensor<12xf32>, tensor<12xf32>) -> tensor<2x12xf32>
// CHECK: %[[R:.*]] = kiln.reshape %[[Y]] : tensor<2x12xf32> to tensor<2x3x4xf32>
// CHECK: return %[[R]]
func.func @forward(%x: tensor<2x3x4xf32>, %g: tensor<3x4xf32>, %b: tensor<3x4xf32>) -> tensor<2x3x4xf32> {
  %y = kiln.layer_norm %x, %g bias %b : tensor<3x4xf32> {axis = 1 : i64, epsilon = 1.0e-3 : f64} : tensor<2x3x4xf32>, tensor<3x4xf32>
  return %y : tensor<2x3x4xf32>
}

// -----

// The gradient, with its partial sums: 40 rows are two blocks of 32. After
// bufferization it writes four new buffers; emulated, it is a call into
// the runtime's host version with their addresses, the shape and epsilon.
// CHECK-LABEL: func.func @grad(
// CHECK: %[[G:.*]]:4 = kiln.fused_layer_norm_grad %arg0, %arg1, %arg2 : (tensor<40x16xf32>, tensor<16xf32>, tensor<40x16xf32>) -> (tensor<40x16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<2x2x16xf32>)
// CHECK: return %[[G]]#0, %[[G]]#1, %[[G]]#2
// BUF-LABEL: func.func @grad(
// BUF-DAG: %[[DX:.*]] = memref.alloc() {{.*}} : memref<40x16xf32>
// BUF-DAG: %[[DG:.*]] = memref.alloc() {{.*}} : memref<16xf32>
// BUF-DAG: %[[DB:.*]] = memref.alloc() {{.*}} : memref<16xf32>
// BUF-DAG: %[[P:.*]] = memref.alloc() {{.*}} : memref<2x2x16xf32>
// BUF: kiln.fused_layer_norm_grad %arg0, %arg1, %arg2 into %[[DX]], %[[DG]], %[[DB]], %[[P]]
// BUF: return %[[DX]], %[[DG]], %[[DB]]
// EMU: func.func private @kiln_layer_norm_backward_typed_host(!llvm.ptr, !llvm.ptr, !llvm.ptr, i64, !llvm.ptr, i64, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64, i64, f64)
// EMU-LABEL: func.func @grad(
// EMU-NOT: kiln.fused_layer_norm_grad
// EMU-DAG: %[[ROWS:.*]] = arith.constant 40 : i64
// EMU-DAG: %[[COLS:.*]] = arith.constant 16 : i64
// EMU-DAG: %[[EPS:.*]] = arith.constant 1.000000e-05 : f64
// EMU: call @kiln_layer_norm_backward_typed_host({{.*}}, %[[ROWS]], %[[COLS]], %[[EPS]])
func.func @grad(%x: tensor<40x16xf32>, %g: tensor<16xf32>, %dy: tensor<40x16xf32>) -> (tensor<40x16xf32>, tensor<16xf32>, tensor<16xf32>) {
  %dx, %dg, %db = kiln.layer_norm_grad %x, %g, %dy {axis = 1 : i64} : tensor<40x16xf32>, tensor<16xf32>
  return %dx, %dg, %db : tensor<40x16xf32>, tensor<16xf32>, tensor<16xf32>
}

// -----

// Under kiln-amp, a layer norm only products read writes its result
// rounded. Emulated without kiln-amp, the host version writes f32 (output
// type 0).
// AMP-LABEL: func.func @only_products(
// AMP: %[[Y:.*]] = kiln.fused_layer_norm %arg0, %arg1 {{.*}} -> tensor<8x16xbf16>
// AMP-NOT: kiln.fused_layer_norm
// AMP: linalg.generic {{.*}} ins(%[[Y]], %{{.*}} : tensor<8x16xbf16>, tensor<16x4xbf16>) {{.*}} attrs = {kiln.matmul
// EMU-LABEL: func.func @only_products(
// EMU: call @kiln_layer_norm_forward_typed_host(%{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %c0_i64{{(_[0-9]+)?}},
func.func @only_products(%x: tensor<8x16xf32>, %g: tensor<16xf32>, %w: tensor<16x4xf32>) -> tensor<8x4xf32> {
  %y = kiln.layer_norm %x, %g {axis = 1 : i64} : tensor<8x16xf32>, tensor<16xf32>
  %p = kiln.matmul %y, %w : tensor<8x16xf32>, tensor<16x4xf32>
  return %p : tensor<8x4xf32>
}

// -----

// A result read elsewhere too stays f32, and the same layer norm also
// writes it rounded, a copy (its last result) for the product: no kernel
// rounds it after.
// AMP-LABEL: func.func @read_elsewhere(
// AMP: %[[Y:.*]]:2 = kiln.fused_layer_norm %arg0, %arg1 : (tensor<8x16xf32>, tensor<16xf32>) -> (tensor<8x16xf32>, tensor<8x16xbf16>)
// AMP-NOT: arith.truncf
// AMP: linalg.generic {{.*}} ins(%[[Y]]#1, %{{.*}} : tensor<8x16xbf16>, tensor<16x4xbf16>)
// AMP: return %{{.*}}, %[[Y]]#0
func.func @read_elsewhere(%x: tensor<8x16xf32>, %g: tensor<16xf32>, %w: tensor<16x4xf32>) -> (tensor<8x4xf32>, tensor<8x16xf32>) {
  %y = kiln.layer_norm %x, %g {axis = 1 : i64} : tensor<8x16xf32>, tensor<16xf32>
  %p = kiln.matmul %y, %w : tensor<8x16xf32>, tensor<16x4xf32>
  return %p, %y : tensor<8x4xf32>, tensor<8x16xf32>
}

// -----

// A post-norm block: the layer norm of a residual's sum is the next
// residual and the next product's operand, so it writes the sum, its f32
// result and the copy.
// AMP-LABEL: func.func @post_norm(
// AMP: %[[Y:.*]]:3 = kiln.fused_layer_norm %arg0, %arg2 residual %arg1 : (tensor<8x16xf32>, tensor<16xf32>, tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xbf16>)
// AMP-NOT: arith.truncf
// AMP: linalg.generic {{.*}} ins(%[[Y]]#2, %{{.*}} : tensor<8x16xbf16>, tensor<16x4xbf16>)
// AMP: return %{{.*}}, %[[Y]]#0
func.func @post_norm(%x: tensor<8x16xf32>, %r: tensor<8x16xf32>, %g: tensor<16xf32>, %w: tensor<16x4xf32>) -> (tensor<8x4xf32>, tensor<8x16xf32>) {
  %s = kiln.add %x, %r : tensor<8x16xf32>
  %y = kiln.layer_norm %s, %g {axis = 1 : i64} : tensor<8x16xf32>, tensor<16xf32>
  %p = kiln.matmul %y, %w : tensor<8x16xf32>, tensor<16x4xf32>
  return %p, %y : tensor<8x4xf32>, tensor<8x16xf32>
}

// -----

// The kernels take f32 only: an f16 layer norm stays for kiln-decompose.
// CHECK-LABEL: func.func @f16(
// CHECK-NEXT: kiln.layer_norm
// CHECK-NOT: kiln.fused_layer_norm
func.func @f16(%x: tensor<4x16xf16>, %g: tensor<16xf16>) -> tensor<4x16xf16> {
  %y = kiln.layer_norm %x, %g {axis = 1 : i64} : tensor<4x16xf16>, tensor<16xf16>
  return %y : tensor<4x16xf16>
}

// -----

// A residual connection's sum is added (and returned) by the layer norm's
// kernel; what read the sum reads the op's second result. Emulated, the
// host version gets the residual and the sum's buffer after the input.
// CHECK-LABEL: func.func @residual(
// CHECK: %[[Y:.*]]:2 = kiln.fused_layer_norm %arg0, %arg2 residual %arg1 {{.*}} -> (tensor<8x16xf32>, tensor<8x16xf32>)
// CHECK-NOT: kiln.add
// CHECK: return %[[Y]]#0, %[[Y]]#1
// EMU-LABEL: func.func @residual(
// EMU: call @kiln_layer_norm_forward_typed_host({{.*}}) : (!llvm.ptr, i64, !llvm.ptr, i64, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i64, !llvm.ptr, i64, i64, i64, f64)
func.func @residual(%x: tensor<8x16xf32>, %r: tensor<8x16xf32>, %g: tensor<16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>) {
  %s = kiln.add %x, %r : tensor<8x16xf32>
  %y = kiln.layer_norm %s, %g {axis = 1 : i64} : tensor<8x16xf32>, tensor<16xf32>
  return %y, %s : tensor<8x16xf32>, tensor<8x16xf32>
}

// -----

// A sum read before the layer norm stays an add of its own.
// CHECK-LABEL: func.func @residual_read_before(
// CHECK: %[[S:.*]] = kiln.add %arg0, %arg1
// CHECK: kiln.exp %[[S]]
// CHECK: kiln.fused_layer_norm %[[S]], %arg2 : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
func.func @residual_read_before(%x: tensor<8x16xf32>, %r: tensor<8x16xf32>, %g: tensor<16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>) {
  %s = kiln.add %x, %r : tensor<8x16xf32>
  %e = kiln.exp %s : tensor<8x16xf32>
  %y = kiln.layer_norm %s, %g {axis = 1 : i64} : tensor<8x16xf32>, tensor<16xf32>
  return %y, %e : tensor<8x16xf32>, tensor<8x16xf32>
}

// -----

// The input's gradient, added only to the residual connection's, is
// accumulated onto it by the kernel, where the add was.
// CHECK-LABEL: func.func @accumulate(
// CHECK: %[[G:.*]]:4 = kiln.fused_layer_norm_grad %arg0, %arg1, %arg2 accumulate %arg3 :
// CHECK-NOT: kiln.add
// CHECK: return %[[G]]#0, %[[G]]#1, %[[G]]#2
// EMU-LABEL: func.func @accumulate(
// EMU: call @kiln_layer_norm_backward_typed_host({{.*}}) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, i64, !llvm.ptr, i64, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64, i64, f64)
func.func @accumulate(%x: tensor<8x16xf32>, %g: tensor<16xf32>, %dy: tensor<8x16xf32>, %other: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<16xf32>, tensor<16xf32>) {
  %dx, %dg, %db = kiln.layer_norm_grad %x, %g, %dy {axis = 1 : i64} : tensor<8x16xf32>, tensor<16xf32>
  %t = kiln.add %other, %dx : tensor<8x16xf32>
  return %t, %dg, %db : tensor<8x16xf32>, tensor<16xf32>, tensor<16xf32>
}

// -----

// Not when the scale's gradient is read before the add.
// CHECK-LABEL: func.func @accumulate_read_between(
// CHECK: %[[G:.*]]:4 = kiln.fused_layer_norm_grad %arg0, %arg1, %arg2 :
// CHECK: kiln.exp %[[G]]#1
// CHECK: kiln.add %arg3, %[[G]]#0
func.func @accumulate_read_between(%x: tensor<8x16xf32>, %g: tensor<16xf32>, %dy: tensor<8x16xf32>, %other: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<16xf32>, tensor<16xf32>) {
  %dx, %dg, %db = kiln.layer_norm_grad %x, %g, %dy {axis = 1 : i64} : tensor<8x16xf32>, tensor<16xf32>
  %e = kiln.exp %dg : tensor<16xf32>
  %t = kiln.add %other, %dx : tensor<8x16xf32>
  return %t, %e, %db : tensor<8x16xf32>, tensor<16xf32>, tensor<16xf32>
}

// -----

// A product of the residual's sum itself reads it rounded by a kernel of
// its own: the layer norm rounds only its result.
// AMP-LABEL: func.func @sum_to_product(
// AMP: %[[Y:.*]]:2 = kiln.fused_layer_norm %arg0, %arg2 residual %arg1 {{.*}} -> (tensor<8x16xbf16>, tensor<8x16xf32>)
// AMP: %[[S:.*]] = linalg.generic {{.*}} ins(%[[Y]]#1 : tensor<8x16xf32>) outs(%{{.*}} : tensor<8x16xbf16>)
// AMP: linalg.generic {{.*}} ins(%[[S]], %{{.*}} : tensor<8x16xbf16>, tensor<16x4xbf16>)
// AMP: linalg.generic {{.*}} ins(%[[Y]]#0, %{{.*}} : tensor<8x16xbf16>, tensor<16x4xbf16>)
func.func @sum_to_product(%x: tensor<8x16xf32>, %r: tensor<8x16xf32>, %g: tensor<16xf32>, %w: tensor<16x4xf32>) -> (tensor<8x4xf32>, tensor<8x4xf32>) {
  %s = kiln.add %x, %r : tensor<8x16xf32>
  %y = kiln.layer_norm %s, %g {axis = 1 : i64} : tensor<8x16xf32>, tensor<16xf32>
  %q = kiln.matmul %s, %w : tensor<8x16xf32>, tensor<16x4xf32>
  %p = kiln.matmul %y, %w : tensor<8x16xf32>, tensor<16x4xf32>
  return %p, %q : tensor<8x4xf32>, tensor<8x4xf32>
}
