// RUN: kiln-opt %s --kiln-simd-loops | FileCheck %s

// A marked loop of loads, stores and arithmetic becomes omp.simd around an
// omp.loop_nest with its bounds and body: here an in-place update whose
// input and output may be one buffer, and a broadcast scalar.
// CHECK-LABEL: func.func @update(
// CHECK-SAME: %[[P:[^:]*]]: memref<4x256xf32>, %[[G:[^:]*]]: memref<4x256xf32>, %[[S:[^:]*]]: memref<f32>, %[[OUT:[^:]*]]: memref<4x256xf32>
// CHECK: scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK-NEXT: omp.simd {
// CHECK-NEXT: omp.loop_nest (%[[J:.*]]) : index = (%c0) to (%c256) step (%c1) {
// CHECK-NEXT: %[[A:.*]] = memref.load %[[P]][%[[I]], %[[J]]]
// CHECK-NEXT: %[[B:.*]] = memref.load %[[G]][%[[I]], %[[J]]]
// CHECK-NEXT: %[[K:.*]] = memref.load %[[S]][]
// CHECK-NEXT: %[[Q:.*]] = math.sqrt %[[B]]
// CHECK-NEXT: %[[D:.*]] = arith.divf %[[K]], %[[Q]]
// CHECK-NEXT: %[[R:.*]] = arith.subf %[[A]], %[[D]]
// CHECK-NEXT: memref.store %[[R]], %[[OUT]][%[[I]], %[[J]]]
// CHECK-NEXT: omp.yield
// CHECK-NOT: kiln.parallel
// CHECK: return
func.func @update(%p: memref<4x256xf32>, %g: memref<4x256xf32>, %s: memref<f32>, %out: memref<4x256xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c256 = arith.constant 256 : index
  scf.for %i = %c0 to %c4 step %c1 {
    scf.for %j = %c0 to %c256 step %c1 {
      %a = memref.load %p[%i, %j] : memref<4x256xf32>
      %b = memref.load %g[%i, %j] : memref<4x256xf32>
      %k = memref.load %s[] : memref<f32>
      %q = math.sqrt %b : f32
      %d = arith.divf %k, %q : f32
      %r = arith.subf %a, %d : f32
      memref.store %r, %out[%i, %j] : memref<4x256xf32>
    } {kiln.parallel}
  }
  return
}

// Left as loops, the mark gone: an unmarked loop; a loop with a call, one
// with a nested loop, one carrying a value, one storing to an element that
// does not move with it.
// CHECK-LABEL: func.func @kept(
// CHECK-NOT: omp.
// CHECK-NOT: kiln.parallel
// CHECK: return
func.func private @f(f32)
func.func @kept(%a: memref<8xf32>, %b: memref<8x8xf32>, %s: memref<f32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %zero = arith.constant 0.0 : f32
  scf.for %i = %c0 to %c8 step %c1 {
    %x = memref.load %a[%i] : memref<8xf32>
    memref.store %x, %a[%i] : memref<8xf32>
  }
  scf.for %i = %c0 to %c8 step %c1 {
    %x = memref.load %a[%i] : memref<8xf32>
    func.call @f(%x) : (f32) -> ()
  } {kiln.parallel}
  scf.for %i = %c0 to %c8 step %c1 {
    scf.for %j = %c0 to %c8 step %c1 {
      %x = memref.load %b[%i, %j] : memref<8x8xf32>
      memref.store %x, %b[%i, %j] : memref<8x8xf32>
    }
  } {kiln.parallel}
  %sum = scf.for %i = %c0 to %c8 step %c1 iter_args(%acc = %zero) -> f32 {
    %x = memref.load %a[%i] : memref<8xf32>
    %y = arith.addf %acc, %x : f32
    scf.yield %y : f32
  } {kiln.parallel}
  scf.for %i = %c0 to %c8 step %c1 {
    %x = memref.load %a[%i] : memref<8xf32>
    memref.store %x, %s[] : memref<f32>
  } {kiln.parallel}
  memref.store %sum, %s[] : memref<f32>
  return
}
