// RUN: kiln-opt %s --kiln-profile-marks | FileCheck %s

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>

// The entry calls start first, then a mark after each command: the kernel
// call, the product kiln-lower-gemm-to-blas made (its kiln.cost goes) and
// the collective; none after the team-size query, the constant or the
// return. Ids count across the module's entries.
// CHECK: memref.global @kiln_cpu_profile_slots : memref<11xi64> = dense<0> {alignment = 64 : i64}
// CHECK: llvm.mlir.global external constant @kiln_cpu_profile_table("kiln-cpu-profile 1\0Astep\09kernel\0912\0932\098\09linalg.generic 2x3 (mulf, addf)\09scale\0Astep\09gemm\09100\0912\094\09sgemm 1x2x3\09kiln-profile-marks.mlir:{{[0-9]+}}\0Astep\09collective\090\090\090\09kiln_collective_wait\09kiln-profile-marks.mlir:{{[0-9]+}}\0Aother\09kernel\090\0916\0916\09copy 16 B\09{{.*}}kiln-profile-marks.mlir:{{[0-9]+}}\0Aother\09kernel\090\0916\0916\09copy 16 B\09moved\0A\00")
// CHECK: func.func private @kiln_cpu_profile_start(memref<11xi64>)
// CHECK: func.func private @kiln_cpu_profile_mark(memref<11xi64>, i32)
// CHECK-LABEL: func.func @step(
// CHECK-NEXT: %[[SLOTS:.*]] = memref.get_global @kiln_cpu_profile_slots
// CHECK-NEXT: call @kiln_cpu_profile_start(%[[SLOTS]])
// CHECK-NEXT: call @omp_get_max_threads()
// CHECK-NEXT: arith.constant 1.0
// CHECK-NEXT: call @step_kernel0(
// CHECK-NEXT: %[[ID0:.*]] = arith.constant 0 : i32
// CHECK-NEXT: call @kiln_cpu_profile_mark(%[[SLOTS]], %[[ID0]])
// CHECK-NEXT: call @cblas_fake(
// CHECK-NOT: kiln.cost
// CHECK-NEXT: %[[ID1:.*]] = arith.constant 1 : i32
// CHECK-NEXT: call @kiln_cpu_profile_mark(%[[SLOTS]], %[[ID1]])
// CHECK-NEXT: call @kiln_collective_wait(
// CHECK-NEXT: %[[ID2:.*]] = arith.constant 2 : i32
// CHECK-NEXT: call @kiln_cpu_profile_mark(%[[SLOTS]], %[[ID2]])
// CHECK-NEXT: return
// The kernels themselves get no marks.
// CHECK-LABEL: func.func private @step_kernel0(
// CHECK-NOT: kiln_cpu_profile
// CHECK: return
// CHECK-LABEL: func.func @other(
// CHECK: call @other_kernel0(
// CHECK-NEXT: %[[ID3:.*]] = arith.constant 3 : i32
// CHECK-NEXT: call @kiln_cpu_profile_mark(%{{.*}}, %[[ID3]])
// A kernel left in the entry (here a copy) is described as one.
// CHECK-NEXT: memref.copy
// CHECK-NEXT: %[[ID4:.*]] = arith.constant 4 : i32
// CHECK-NEXT: call @kiln_cpu_profile_mark(%{{.*}}, %[[ID4]])
func.func private @omp_get_max_threads() -> i32
func.func private @cblas_fake(f32)
func.func private @kiln_collective_wait(i64)
func.func @step(%a: memref<2x3xf32>, %b: memref<2xf32>, %r: i64) {
  %threads = call @omp_get_max_threads() : () -> i32
  %one = arith.constant 1.0 : f32
  call @step_kernel0(%a, %b) : (memref<2x3xf32>, memref<2xf32>) -> ()
  call @cblas_fake(%one) {kiln.cost = {kind = "gemm", what = "sgemm 1x2x3", flops = 100 : i64, read = 12 : i64, written = 4 : i64}} : (f32) -> ()
  call @kiln_collective_wait(%r) : (i64) -> ()
  return
}
// 6 iterations of 2 floating-point operations; reads the 24 bytes of %x
// and, as the body reads the output, its 8; writes 8. The constant is no
// operation.
func.func private @step_kernel0(%x: memref<2x3xf32>, %y: memref<2xf32>)
    attributes {passthrough = ["noinline"]} {
  linalg.generic {indexing_maps = [#id, #row],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<2x3xf32>) outs(%y : memref<2xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %two = arith.constant 2.0 : f32
    %p = arith.mulf %in, %two : f32
    %s = arith.addf %p, %acc : f32
    linalg.yield %s : f32
  } loc("scale")
  return
}
func.func @other(%a: memref<4xf32>, %b: memref<4xf32>) {
  call @other_kernel0(%a, %b) : (memref<4xf32>, memref<4xf32>) -> ()
  memref.copy %b, %a : memref<4xf32> to memref<4xf32> loc("moved")
  return
}
func.func private @other_kernel0(%s: memref<4xf32>, %d: memref<4xf32>)
    attributes {passthrough = ["noinline"]} {
  memref.copy %s, %d : memref<4xf32> to memref<4xf32>
  return
}

// A module without entry functions is left as it is.
// RUN: echo 'func.func private @f(memref<4xf32>)' | kiln-opt --kiln-profile-marks | FileCheck %s --check-prefix=EMPTY
// EMPTY-NOT: kiln_cpu_profile
