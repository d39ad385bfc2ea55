// RUN: kiln-opt %s -split-input-file -verify-diagnostics --kiln-plan-memory | FileCheck %s

// Every static top-level memref.alloc becomes a memref.view into a trailing
// memref<Nxi8> {kiln.arena} argument. Live intervals run from the alloc to
// the last use of the buffer or of a view of it; buffers are placed largest
// first, each in the smallest 64-byte aligned gap free for its interval
// (best fit), unless placing each at the lowest free offset (first fit)
// makes a smaller arena.

// The 64-byte buffer is dead (and its dealloc dropped) before the 32-byte one
// is allocated: both at offset 0 of a 64-byte arena.
// CHECK-LABEL: func.func @disjoint(
// CHECK-SAME: %[[X:[^:]*]]: memref<16xf32>, %[[OUT:[^:]*]]: memref<16xf32>, %[[ARENA:[^:]*]]: memref<64xi8> {kiln.arena})
// CHECK-SAME: attributes {kiln.arena_bytes = 64 : i64, kiln.arena_peak
// CHECK-NOT: memref.alloc
// CHECK: %[[OFF_A:.*]] = arith.constant 0 : index
// CHECK: %[[A:.*]] = memref.view %[[ARENA]][%[[OFF_A]]][] : memref<64xi8> to memref<16xf32>
// CHECK: memref.copy %[[X]], %[[A]]
// CHECK: memref.copy %[[A]], %[[OUT]]
// CHECK-NOT: memref.dealloc
// CHECK: %[[OFF_B:.*]] = arith.constant 0 : index
// CHECK: %[[B:.*]] = memref.view %[[ARENA]][%[[OFF_B]]][] : memref<64xi8> to memref<8xf32>
// CHECK: memref.copy %{{.*}}, %[[B]]
// CHECK-NOT: memref.alloc
// CHECK-NOT: memref.dealloc
// CHECK: return
func.func @disjoint(%x: memref<16xf32>, %out: memref<16xf32>) {
  %a = memref.alloc() : memref<16xf32>
  memref.copy %x, %a : memref<16xf32> to memref<16xf32>
  memref.copy %a, %out : memref<16xf32> to memref<16xf32>
  memref.dealloc %a : memref<16xf32>
  %b = memref.alloc() : memref<8xf32>
  %head = memref.subview %x[0] [8] [1] : memref<16xf32> to memref<8xf32, strided<[1]>>
  memref.copy %head, %b : memref<8xf32, strided<[1]>> to memref<8xf32>
  memref.dealloc %b : memref<8xf32>
  return
}

// -----

// Both alive at once: the larger (80 bytes) at 0, the other (12 bytes) at the
// next 64-byte boundary after it, 128; the arena is 128 + 64 bytes.
// CHECK-LABEL: func.func @overlapping(
// CHECK-SAME: %[[ARENA:[^:]*]]: memref<192xi8> {kiln.arena})
// CHECK-SAME: attributes {kiln.arena_bytes = 192 : i64, kiln.arena_peak
// CHECK: %[[OFF_S:.*]] = arith.constant 128 : index
// CHECK: %[[S:.*]] = memref.view %[[ARENA]][%[[OFF_S]]][] : memref<192xi8> to memref<3xf32>
// CHECK: %[[OFF_L:.*]] = arith.constant 0 : index
// CHECK: %[[L:.*]] = memref.view %[[ARENA]][%[[OFF_L]]][] : memref<192xi8> to memref<20xf32>
// CHECK: memref.copy %{{.*}}, %[[S]]
// CHECK: memref.copy %{{.*}}, %[[L]]
// CHECK: memref.copy %[[S]], %{{.*}}
func.func @overlapping(%x: memref<3xf32>, %y: memref<20xf32>) {
  %small = memref.alloc() : memref<3xf32>
  %large = memref.alloc() : memref<20xf32>
  memref.copy %x, %small : memref<3xf32> to memref<3xf32>
  memref.copy %y, %large : memref<20xf32> to memref<20xf32>
  memref.copy %small, %x : memref<3xf32> to memref<3xf32>
  return
}

// -----

// A use through a view keeps the buffer alive: %a is last read through its
// collapsed view after %b is written, so %b may not reuse %a's bytes.
// CHECK-LABEL: func.func @alive_through_view(
// CHECK-SAME: %[[ARENA:[^:]*]]: memref<128xi8> {kiln.arena})
// CHECK-SAME: attributes {kiln.arena_bytes = 128 : i64, kiln.arena_peak
// CHECK: %[[OFF_A:.*]] = arith.constant 0 : index
// CHECK: memref.view %[[ARENA]][%[[OFF_A]]][] : memref<128xi8> to memref<2x8xf32>
// CHECK: %[[OFF_B:.*]] = arith.constant 64 : index
// CHECK: memref.view %[[ARENA]][%[[OFF_B]]][] : memref<128xi8> to memref<16xf32>
func.func @alive_through_view(%x: memref<2x8xf32>, %out: memref<16xf32>) {
  %a = memref.alloc() : memref<2x8xf32>
  memref.copy %x, %a : memref<2x8xf32> to memref<2x8xf32>
  %flat = memref.collapse_shape %a [[0, 1]] : memref<2x8xf32> into memref<16xf32>
  %b = memref.alloc() : memref<16xf32>
  memref.copy %out, %b : memref<16xf32> to memref<16xf32>
  memref.copy %flat, %out : memref<16xf32> to memref<16xf32>
  memref.copy %b, %out : memref<16xf32> to memref<16xf32>
  return
}

// -----

// Largest first: %big (256 bytes, alive
// throughout) at 0; %mid (128 bytes) and %late (64 bytes) never live at
// the same time, so both go to 256.
// CHECK-LABEL: func.func @reuse(
// CHECK-SAME: %[[ARENA:[^:]*]]: memref<384xi8> {kiln.arena})
// CHECK-SAME: attributes {kiln.arena_bytes = 384 : i64, kiln.arena_peak
// CHECK: %[[C0:.*]] = arith.constant 0 : index
// CHECK: memref.view %[[ARENA]][%[[C0]]][] : memref<384xi8> to memref<64xf32>
// CHECK: %[[C256:.*]] = arith.constant 256 : index
// CHECK: memref.view %[[ARENA]][%[[C256]]][] : memref<384xi8> to memref<32xf32>
// CHECK: %[[C256_2:.*]] = arith.constant 256 : index
// CHECK: memref.view %[[ARENA]][%[[C256_2]]][] : memref<384xi8> to memref<16xf32>
func.func @reuse(%x: memref<64xf32>, %y: memref<32xf32>, %z: memref<16xf32>) {
  %big = memref.alloc() : memref<64xf32>
  memref.copy %x, %big : memref<64xf32> to memref<64xf32>
  %mid = memref.alloc() : memref<32xf32>
  memref.copy %y, %mid : memref<32xf32> to memref<32xf32>
  memref.copy %mid, %y : memref<32xf32> to memref<32xf32>
  %late = memref.alloc() : memref<16xf32>
  memref.copy %z, %late : memref<16xf32> to memref<16xf32>
  memref.copy %late, %z : memref<16xf32> to memref<16xf32>
  memref.copy %big, %x : memref<64xf32> to memref<64xf32>
  return
}

// -----

// A buffer used inside a loop is alive for the whole loop.
// CHECK-LABEL: func.func @used_in_loop(
// CHECK-SAME: attributes {kiln.arena_bytes = 128 : i64, kiln.arena_peak
// CHECK: arith.constant 0 : index
// CHECK: memref.view
// CHECK: arith.constant 64 : index
// CHECK: memref.view
// CHECK: scf.for
func.func @used_in_loop(%x: memref<4xf32>, %n: index) {
  %a = memref.alloc() : memref<16xf32>
  %b = memref.alloc() : memref<4xf32>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    %v = memref.load %a[%i] : memref<16xf32>
    memref.store %v, %b[%c0] : memref<4xf32>
  }
  return
}

// -----

func.func @alloc_in_loop(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  scf.for %i = %c0 to %n step %c1 {
    // expected-error @+1 {{kiln-plan-memory: only statically shaped, top-level allocations can be planned}}
    %a = memref.alloc() : memref<4xf32>
    memref.store %zero, %a[%c0] : memref<4xf32>
  }
  return
}

// -----

func.func @dynamic_shape(%n: index) {
  // expected-error @+1 {{kiln-plan-memory: only statically shaped, top-level allocations can be planned}}
  %a = memref.alloc(%n) : memref<?xf32>
  return
}

// -----

func.func @returned() -> memref<4xf32> {
  %a = memref.alloc() : memref<4xf32>
  // expected-error @+1 {{kiln-plan-memory: a transient buffer escapes through the return value}}
  return %a : memref<4xf32>
}

// -----

func.func @returned_through_view() -> memref<4xf32, strided<[1]>> {
  %a = memref.alloc() : memref<8xf32>
  %head = memref.subview %a[0] [4] [1] : memref<8xf32> to memref<4xf32, strided<[1]>>
  // expected-error @+1 {{kiln-plan-memory: a transient buffer escapes through the return value}}
  return %head : memref<4xf32, strided<[1]>>
}

// -----

// A buffer yielded out of an scf.if stays alive as long as the result does:
// %t must not reuse the memory of %a or %b.
// CHECK-LABEL: func.func @through_if(
// CHECK-SAME: memref<192xi8> {kiln.arena}) attributes {kiln.arena_bytes = 192 : i64, kiln.arena_peak
// CHECK-DAG: memref.view %{{.*}}[%c0{{.*}}][]
// CHECK-DAG: memref.view %{{.*}}[%c64{{.*}}][]
// CHECK-DAG: memref.view %{{.*}}[%c128{{.*}}][]
func.func @through_if(%c: i1, %x: memref<16xf32>, %out: memref<16xf32>) {
  %a = memref.alloc() : memref<16xf32>
  %b = memref.alloc() : memref<16xf32>
  memref.copy %x, %a : memref<16xf32> to memref<16xf32>
  memref.copy %x, %b : memref<16xf32> to memref<16xf32>
  %r = scf.if %c -> memref<16xf32> {
    scf.yield %a : memref<16xf32>
  } else {
    scf.yield %b : memref<16xf32>
  }
  %t = memref.alloc() : memref<16xf32>
  memref.copy %x, %t : memref<16xf32> to memref<16xf32>
  memref.copy %r, %out : memref<16xf32> to memref<16xf32>
  memref.copy %t, %out : memref<16xf32> to memref<16xf32>
  return
}

// -----

// index elements take 8 bytes.
// CHECK-LABEL: func.func @index_elements(
// CHECK-SAME: attributes {kiln.arena_bytes = 64 : i64, kiln.arena_peak
func.func @index_elements(%out: memref<4xindex>) {
  %a = memref.alloc() : memref<4xindex>
  memref.copy %a, %out : memref<4xindex> to memref<4xindex>
  return
}

// -----

// Best fit: when %d is placed, %a and %c are dead; the buffers alive with it
// (%b at 128, %e at 256) leave the gaps [0, 128) and [192, 256). First fit
// would take 0; best fit takes the 64-byte gap at 192, which %d fills
// exactly, and the arena is no larger (320 bytes either way).
// CHECK-LABEL: func.func @best_fit(
// CHECK-SAME: attributes {kiln.arena_bytes = 320 : i64, kiln.arena_peak = {activations = 320 : i64, gradients = 0 : i64, live = 320 : i64, workspace = 0 : i64}}
// CHECK: %[[A:.*]] = arith.constant 0 : index
// CHECK: memref.view %{{.*}}[%[[A]]][] : memref<320xi8> to memref<32xf32>
// CHECK: %[[B:.*]] = arith.constant 128 : index
// CHECK: memref.view %{{.*}}[%[[B]]][] : memref<320xi8> to memref<16xf32>
// CHECK: %[[C:.*]] = arith.constant 192 : index
// CHECK: memref.view %{{.*}}[%[[C]]][] : memref<320xi8> to memref<16xf32>
// CHECK: %[[E:.*]] = arith.constant 256 : index
// CHECK: memref.view %{{.*}}[%[[E]]][] : memref<320xi8> to memref<16xf32>
// CHECK: %[[D:.*]] = arith.constant 192 : index
// CHECK: memref.view %{{.*}}[%[[D]]][] : memref<320xi8> to memref<16xf32>
func.func @best_fit(%x: memref<16xf32>, %big: memref<32xf32>) {
  %a = memref.alloc() : memref<32xf32>
  %b = memref.alloc() : memref<16xf32>
  %c = memref.alloc() : memref<16xf32>
  %e = memref.alloc() : memref<16xf32>
  memref.copy %big, %a : memref<32xf32> to memref<32xf32>
  memref.copy %x, %c : memref<16xf32> to memref<16xf32>
  memref.copy %x, %b : memref<16xf32> to memref<16xf32>
  memref.copy %x, %e : memref<16xf32> to memref<16xf32>
  %d = memref.alloc() : memref<16xf32>
  memref.copy %x, %d : memref<16xf32> to memref<16xf32>
  memref.copy %b, %x : memref<16xf32> to memref<16xf32>
  memref.copy %e, %x : memref<16xf32> to memref<16xf32>
  memref.copy %d, %x : memref<16xf32> to memref<16xf32>
  return
}

// -----

// What the arena holds at its peak, by the phase of each buffer's first
// writer (kiln-train-step marks the phases in locations): %act is a forward
// value still read by the backward pass, %g a backward value the optimizer
// update reads (a gradient), %w a backward temporary. The live buffers are
// largest once %w is written: 64 + 64 + 128 bytes.
// CHECK-LABEL: func.func @phases(
// CHECK-SAME: kiln.arena_peak = {activations = 64 : i64, gradients = 64 : i64, live = 256 : i64, workspace = 128 : i64}
func.func @phases(%x: memref<16xf32>, %y: memref<32xf32>, %out: memref<16xf32>) {
  %act = memref.alloc() : memref<16xf32>
  memref.copy %x, %act : memref<16xf32> to memref<16xf32>
  %g = memref.alloc() : memref<16xf32>
  memref.copy %act, %g : memref<16xf32> to memref<16xf32> loc(fused<"kiln.backward">[unknown])
  %w = memref.alloc() : memref<32xf32>
  memref.copy %y, %w : memref<32xf32> to memref<32xf32> loc(fused<"kiln.backward">[unknown])
  memref.copy %act, %out : memref<16xf32> to memref<16xf32> loc(fused<"kiln.backward">[unknown])
  memref.copy %w, %y : memref<32xf32> to memref<32xf32> loc(fused<"kiln.backward">[unknown])
  memref.copy %g, %out : memref<16xf32> to memref<16xf32> loc(fused<"kiln.optimizer">[unknown])
  return
}

// -----

// A reduce-scatter reads its input until the wait the target puts before
// the next op touching its input or output: the input (%in, 64 bytes at 0)
// stays alive as long as the output (%shard) does, so %tmp, allocated after
// the collective, does not take its place but the next 64 bytes.
// CHECK-LABEL: func.func @collective_input(
// CHECK-SAME: %[[ARENA:[^:]*]]: memref<192xi8> {kiln.arena})
// CHECK: %[[OFF_IN:.*]] = arith.constant 0 : index
// CHECK: %[[IN:.*]] = memref.view %[[ARENA]][%[[OFF_IN]]][] : memref<192xi8> to memref<16xf32>
// CHECK: %[[SHARD:.*]] = memref.view %[[ARENA]][%{{.*}}][] : memref<192xi8> to memref<8xf32>
// CHECK: kiln.reduce_scatter_mean %[[IN]], %[[SHARD]]
// CHECK: %[[OFF_T:.*]] = arith.constant 64 : index
// CHECK: memref.view %[[ARENA]][%[[OFF_T]]][] : memref<192xi8> to memref<16xf32>
func.func @collective_input(%x: memref<16xf32>, %out: memref<8xf32>, %out2: memref<16xf32>) {
  %in = memref.alloc() : memref<16xf32>
  memref.copy %x, %in : memref<16xf32> to memref<16xf32>
  %shard = memref.alloc() : memref<8xf32>
  kiln.reduce_scatter_mean %in, %shard {ranks = 2 : i64} : (memref<16xf32>, memref<8xf32>) -> ()
  %tmp = memref.alloc() : memref<16xf32>
  memref.copy %x, %tmp : memref<16xf32> to memref<16xf32>
  memref.copy %tmp, %out2 : memref<16xf32> to memref<16xf32>
  memref.copy %shard, %out : memref<8xf32> to memref<8xf32>
  return
}
