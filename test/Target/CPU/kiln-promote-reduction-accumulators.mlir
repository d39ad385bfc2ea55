// RUN: kiln-opt %s --kiln-promote-reduction-accumulators | FileCheck %s

// A row sum as convert-linalg-to-parallel-loops writes it: the reduction
// loop loads and stores the row's element of the output every iteration.
// The element becomes the loop's iteration argument, loaded before and
// stored after, and its addition may be reassociated.
// CHECK-LABEL: func.func @row_sum(
// CHECK-SAME: %[[X:[^:]*]]: memref<4x1000xf32>, %[[OUT:[^:]*]]: memref<4xf32>
// CHECK: scf.parallel (%[[I:.*]]) =
// CHECK: %[[INIT:.*]] = memref.load %[[OUT]][%[[I]]] : memref<4xf32>
// CHECK: %[[SUM:.*]] = scf.for %[[J:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[ACC:.*]] = %[[INIT]]) -> (f32) {
// CHECK-NEXT: %[[V:.*]] = memref.load %[[X]][%[[I]], %[[J]]] : memref<4x1000xf32>
// CHECK-NEXT: %[[E:.*]] = math.exp %[[V]] : f32
// CHECK-NEXT: %[[NEXT:.*]] = arith.addf %[[ACC]], %[[E]] fastmath<reassoc> : f32
// CHECK-NEXT: scf.yield %[[NEXT]] : f32
// CHECK-NEXT: }
// CHECK-NEXT: memref.store %[[SUM]], %[[OUT]][%[[I]]] : memref<4xf32>
func.func @row_sum(%x: memref<4x1000xf32>, %out: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c1000 = arith.constant 1000 : index
  scf.parallel (%i) = (%c0) to (%c4) step (%c1) {
    scf.for %j = %c0 to %c1000 step %c1 {
      %v = memref.load %x[%i, %j] : memref<4x1000xf32>
      %acc = memref.load %out[%i] : memref<4xf32>
      %e = math.exp %v : f32
      %s = arith.addf %acc, %e : f32
      memref.store %s, %out[%i] : memref<4xf32>
    }
    scf.reduce
  }
  return
}

// A sum over two reduction loops: the inner one is promoted first, which
// leaves its load and store in the outer loop, promoted in turn. A maximum
// is carried too, without fastmath flags.
// CHECK-LABEL: func.func @nested_max(
// CHECK-SAME: %[[X:[^:]*]]: memref<8x16xf32>, %[[OUT:[^:]*]]: memref<f32>
// CHECK: %[[INIT:.*]] = memref.load %[[OUT]][] : memref<f32>
// CHECK: %[[OUTER:.*]] = scf.for %{{.*}} iter_args(%[[A:.*]] = %[[INIT]]) -> (f32) {
// CHECK: %[[INNER:.*]] = scf.for %{{.*}} iter_args(%[[B:.*]] = %[[A]]) -> (f32) {
// CHECK: arith.maximumf %[[B]], %{{.*}} : f32
// CHECK: scf.yield
// CHECK: scf.yield %[[INNER]] : f32
// CHECK: memref.store %[[OUTER]], %[[OUT]][] : memref<f32>
func.func @nested_max(%x: memref<8x16xf32>, %out: memref<f32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c16 = arith.constant 16 : index
  scf.for %i = %c0 to %c8 step %c1 {
    scf.for %j = %c0 to %c16 step %c1 {
      %v = memref.load %x[%i, %j] : memref<8x16xf32>
      %acc = memref.load %out[] : memref<f32>
      %m = arith.maximumf %acc, %v : f32
      memref.store %m, %out[] : memref<f32>
    }
  }
  return
}

// What stays: a store whose index moves with the loop (an elementwise
// loop), a loop that also reads another element of the accumulated buffer,
// and a loop with a call (whose effects are unknown).
// CHECK-LABEL: func.func @left_alone(
// CHECK-NOT: iter_args
// CHECK: return
func.func private @opaque(f32)
func.func @left_alone(%x: memref<16xf32>, %y: memref<16xf32>, %out: memref<16xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c15 = arith.constant 15 : index
  %c16 = arith.constant 16 : index
  scf.for %j = %c0 to %c16 step %c1 {
    %v = memref.load %x[%j] : memref<16xf32>
    memref.store %v, %y[%j] : memref<16xf32>
  }
  scf.for %j = %c0 to %c16 step %c1 {
    %v = memref.load %out[%j] : memref<16xf32>
    %acc = memref.load %out[%c0] : memref<16xf32>
    %s = arith.addf %acc, %v : f32
    memref.store %s, %out[%c0] : memref<16xf32>
  }
  scf.for %j = %c0 to %c16 step %c1 {
    %v = memref.load %x[%j] : memref<16xf32>
    %acc = memref.load %out[%c15] : memref<16xf32>
    %s = arith.addf %acc, %v : f32
    func.call @opaque(%s) : (f32) -> ()
    memref.store %s, %out[%c15] : memref<16xf32>
  }
  return
}
