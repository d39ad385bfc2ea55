// RUN: kiln-opt %s --kiln-gpu-outline-kernels --kiln-gpu-emulate --split-input-file --verify-diagnostics | FileCheck %s

// A launch of 2 blocks of 256 threads becomes two loops calling the kernel,
// now a private host function taking the block and thread index first; the
// gpu.module (with the copy of the constant it read) is gone.
// CHECK-NOT: gpu.container_module
// CHECK: memref.global "private" constant @scale
// CHECK-LABEL: func.func @step(
// CHECK-SAME: %[[X:[a-z0-9]+]]: memref<300xf32>, %[[Y:[a-z0-9]+]]: memref<300xf32>
// CHECK: scf.for %[[B:.*]] = %{{.*}} to %{{.*}} step
// CHECK: scf.for %[[T:.*]] = %{{.*}} to %{{.*}} step
// CHECK: func.call @emulated_step_k0(%[[B]], %[[T]], %[[X]], %[[Y]])
// CHECK-NOT: gpu.
// CHECK: func.func private @emulated_step_k0(%[[BI:.*]]: index, %[[TI:.*]]: index, %{{.*}}: memref<300xf32>, %{{.*}}: memref<300xf32>)
// CHECK: memref.get_global @scale
// CHECK: %[[BASE:.*]] = arith.muli %[[BI]], %{{.*}} : index
// CHECK: arith.addi %[[BASE]], %[[TI]] : index
// CHECK: scf.if
// CHECK: return
// CHECK-NOT: gpu.module
memref.global "private" constant @scale : memref<f32> = dense<3.0>
func.func @step(%x: memref<300xf32>, %y: memref<300xf32>) {
  %s = memref.get_global @scale : memref<f32>
  linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> ()>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%x, %s : memref<300xf32>, memref<f32>) outs(%y : memref<300xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    linalg.yield %m : f32
  }
  return
}

// -----

// Only what kiln-gpu-outline-kernels writes can be emulated: launches along
// x, kernels reading the x indices.
module attributes {gpu.container_module} {
  func.func @two_d(%x: memref<4xf32>) {
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    // expected-error @+1 {{emulates only launches along x}}
    gpu.launch_func @k::@f blocks in (%c1, %c2, %c1) threads in (%c1, %c1, %c1) args(%x : memref<4xf32>)
    return
  }
  gpu.module @k {
    gpu.func @f(%x: memref<4xf32>) kernel {
      gpu.return
    }
  }
}

// -----

module attributes {gpu.container_module} {
  gpu.module @k {
    gpu.func @f(%x: memref<4xf32>) kernel {
      // expected-error @+1 {{cannot be emulated on the host}}
      %t = gpu.thread_id y
      gpu.return
    }
  }
}

// -----

// A weight-gradient product with the bias gradient as its second output
// (kiln-gemm-bias-grad): the outliner erases both zero fills for cuBLASLt,
// the emulator gives them back and splits the sum off after the product,
// over the k rows of the transposed left operand, widened from bf16.
// CHECK-LABEL: func.func @bias_grad(
// CHECK-SAME: %[[DY:[a-z0-9]+]]: memref<8x6xbf16>, %[[X:[a-z0-9]+]]: memref<8x5xbf16>, %[[DW:[a-z0-9]+]]: memref<6x5xf32>, %[[DB:[a-z0-9]+]]: memref<6xf32>
// CHECK: linalg.fill ins(%{{.*}} : f32) outs(%[[DW]] :
// CHECK-NEXT: linalg.generic {{.*}} ins(%[[DY]], %[[X]] : {{.*}}) outs(%[[DW]] : memref<6x5xf32>) attrs = {kiln.matmul = {transpose_lhs}}
// CHECK-NOT: linalg.index
// CHECK: linalg.yield
// CHECK: linalg.fill ins(%{{.*}} : f32) outs(%[[DB]] :
// CHECK-NEXT: linalg.generic {{.*}} iterator_types = ["reduction", "parallel"]} ins(%[[DY]] : memref<8x6xbf16>) outs(%[[DB]] : memref<6xf32>)
// CHECK-NEXT: ^bb0(%[[IN:.*]]: bf16, %[[ACC:.*]]: f32):
// CHECK-NEXT: %[[WIDE:.*]] = arith.extf %[[IN]]
// CHECK-NEXT: %[[SUM:.*]] = arith.addf %[[ACC]], %[[WIDE]]
// CHECK-NEXT: linalg.yield %[[SUM]]
// CHECK-NOT: bias_grad
#at = affine_map<(d0, d1, d2) -> (d2, d0)>
#b = affine_map<(d0, d1, d2) -> (d2, d1)>
#c = affine_map<(d0, d1, d2) -> (d0, d1)>
#v = affine_map<(d0, d1, d2) -> (d0)>
func.func @bias_grad(%dy: memref<8x6xbf16>, %x: memref<8x5xbf16>, %dw: memref<6x5xf32>, %db: memref<6xf32>) {
  %zero = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : index
  linalg.fill ins(%zero : f32) outs(%dw : memref<6x5xf32>)
  linalg.fill ins(%zero : f32) outs(%db : memref<6xf32>)
  linalg.generic {indexing_maps = [#at, #b, #c, #v], iterator_types = ["parallel", "parallel", "reduction"], kiln.matmul = {bias_grad, bias_grad_of_lhs, transpose_lhs}} ins(%dy, %x : memref<8x6xbf16>, memref<8x5xbf16>) outs(%dw, %db : memref<6x5xf32>, memref<6xf32>) {
  ^bb0(%l: bf16, %r: bf16, %acc: f32, %vacc: f32):
    %lw = arith.extf %l : bf16 to f32
    %rw = arith.extf %r : bf16 to f32
    %m = arith.mulf %lw, %rw : f32
    %s = arith.addf %acc, %m : f32
    %i = linalg.index 1 : index
    %first = arith.cmpi eq, %i, %c0 : index
    %t = arith.select %first, %lw, %zero : f32
    %vs = arith.addf %vacc, %t : f32
    linalg.yield %s, %vs : f32, f32
  }
  return
}

// -----

// A layer norm calls the host version's _typed_ entry point: its input and
// residual with their element types (0: f32, 1: bf16: a residual a product
// stored in bf16), the scale, bias, output and sum, the output's type, the
// copy and its type, then the shape and epsilon.
// CHECK: func.func private @kiln_layer_norm_forward_typed_host(!llvm.ptr, i64, !llvm.ptr, i64, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i64, !llvm.ptr, i64, i64, i64, f64)
// CHECK-LABEL: func.func @layer_norm_copy(
// CHECK-NOT: kiln.fused_layer_norm
// CHECK-DAG: %[[ROWS:.*]] = arith.constant 4 : i64
// CHECK-DAG: %[[COLS:.*]] = arith.constant 8 : i64
// CHECK: call @kiln_layer_norm_forward_typed_host(%{{[^,]*}}, %c0_i64{{(_[0-9]+)?}}, %{{[^,]*}}, %c1_i64{{(_[0-9]+)?}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %c0_i64{{(_[0-9]+)?}}, %{{[^,]*}}, %c1_i64{{(_[0-9]+)?}}, %[[ROWS]], %[[COLS]], %{{[^,]*}})
func.func @layer_norm_copy(%x: memref<4x8xf32>, %r: memref<4x8xbf16>, %g: memref<8xf32>, %y: memref<4x8xf32>, %s: memref<4x8xf32>, %c: memref<4x8xbf16>) {
  kiln.fused_layer_norm %x, %g residual %r into %y, %s, %c : (memref<4x8xf32>, memref<8xf32>, memref<4x8xbf16>, memref<4x8xf32>, memref<4x8xf32>, memref<4x8xbf16>) -> ()
  return
}

// -----

// A product that stores its f32 sum rounded to bf16 (kiln-amp's
// `round_once`, as cuBLASLt does) sums into an f32 buffer of its own on the
// host: the output's zero fill widened into it, the product, then the sum
// rounded into the output once, and the buffer freed.
// CHECK-LABEL: func.func @round_once(
// CHECK-SAME: %[[A:[a-z0-9]+]]: memref<4x8xbf16>, %[[B:[a-z0-9]+]]: memref<8x16xbf16>, %[[C:[a-z0-9]+]]: memref<4x16xbf16>
// CHECK: linalg.fill ins(%{{.*}} : bf16) outs(%[[C]] :
// CHECK-NEXT: %[[SUM:.*]] = memref.alloc() : memref<4x16xf32>
// CHECK-NEXT: linalg.generic {{.*}} ins(%[[C]] : memref<4x16xbf16>) outs(%[[SUM]] : memref<4x16xf32>)
// CHECK: arith.extf
// CHECK: linalg.generic {{.*}} ins(%[[A]], %[[B]] : memref<4x8xbf16>, memref<8x16xbf16>) outs(%[[SUM]] : memref<4x16xf32>) attrs = {kiln.matmul = {}}
// CHECK-NEXT: ^bb0(%{{.*}}: bf16, %{{.*}}: bf16, %[[ACC:.*]]: f32):
// CHECK-NOT: truncf
// CHECK: arith.addf %[[ACC]], %{{.*}} : f32
// CHECK-NOT: truncf
// CHECK: linalg.yield
// CHECK: linalg.generic {{.*}} ins(%[[SUM]] : memref<4x16xf32>) outs(%[[C]] : memref<4x16xbf16>)
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK: memref.dealloc %[[SUM]]
// CHECK-NOT: round_once
#a = affine_map<(d0, d1, d2) -> (d0, d2)>
#b = affine_map<(d0, d1, d2) -> (d2, d1)>
#c = affine_map<(d0, d1, d2) -> (d0, d1)>
func.func @round_once(%a: memref<4x8xbf16>, %b: memref<8x16xbf16>, %c: memref<4x16xbf16>) {
  %zero = arith.constant 0.0 : bf16
  linalg.fill ins(%zero : bf16) outs(%c : memref<4x16xbf16>)
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"], kiln.matmul = {round_once}} ins(%a, %b : memref<4x8xbf16>, memref<8x16xbf16>) outs(%c : memref<4x16xbf16>) {
  ^bb0(%l: bf16, %r: bf16, %acc: bf16):
    %accw = arith.extf %acc : bf16 to f32
    %lw = arith.extf %l : bf16 to f32
    %rw = arith.extf %r : bf16 to f32
    %m = arith.mulf %lw, %rw : f32
    %s = arith.addf %accw, %m : f32
    %t = arith.truncf %s : f32 to bf16
    linalg.yield %t : bf16
  }
  return
}
