// RUN: kiln-opt %s -split-input-file --kiln-plan-memory | FileCheck %s --check-prefix=PLAIN
// RUN: kiln-opt %s -split-input-file "--kiln-plan-memory=reuse-distance=2" | FileCheck %s --check-prefix=APART
// RUN: kiln-opt %s -split-input-file "--kiln-plan-memory=reuse-distance=1" | FileCheck %s --check-prefix=NEXT

// %b is first written by the op right after the last use of %a. Without a
// reuse distance it takes %a's bytes (4096, after the 4096-byte %big). With
// one of 2 ops it gets its own (4160): the copy into %b no longer writes
// what the copy before it reads, so the two could run at once. The arena
// grows from 4160 to 4224 bytes, less than 1/16, so that placement is kept.
// With a distance of 1, %b starts 1 op after %a's last use: within it too.
// The views and the allocations count no ops.

// PLAIN-LABEL: func.func @apart(
// PLAIN-SAME: attributes {kiln.arena_bytes = 4160 : i64
// PLAIN: %[[OFF_A:.*]] = arith.constant 4096 : index
// PLAIN: memref.view %{{.*}}[%[[OFF_A]]][] : memref<4160xi8> to memref<16xf32>
// PLAIN: %[[OFF_B:.*]] = arith.constant 4096 : index
// PLAIN: memref.view %{{.*}}[%[[OFF_B]]][] : memref<4160xi8> to memref<16xf32>

// APART-LABEL: func.func @apart(
// APART-SAME: attributes {kiln.arena_bytes = 4224 : i64
// APART: %[[OFF_A:.*]] = arith.constant 4096 : index
// APART: memref.view %{{.*}}[%[[OFF_A]]][] : memref<4224xi8> to memref<16xf32>
// APART: %[[OFF_B:.*]] = arith.constant 4160 : index
// APART: memref.view %{{.*}}[%[[OFF_B]]][] : memref<4224xi8> to memref<16xf32>

// NEXT-LABEL: func.func @apart(
// NEXT-SAME: attributes {kiln.arena_bytes = 4224 : i64
func.func @apart(%x: memref<16xf32>, %y: memref<16xf32>,
                 %in: memref<1024xf32>, %out: memref<1024xf32>) {
  %big = memref.alloc() : memref<1024xf32>
  memref.copy %in, %big : memref<1024xf32> to memref<1024xf32>
  %a = memref.alloc() : memref<16xf32>
  memref.copy %x, %a : memref<16xf32> to memref<16xf32>
  %head = memref.subview %a[0] [8] [1] : memref<16xf32> to memref<8xf32, strided<[1]>>
  %tail = memref.subview %y[0] [8] [1] : memref<16xf32> to memref<8xf32, strided<[1]>>
  memref.copy %head, %tail : memref<8xf32, strided<[1]>> to memref<8xf32, strided<[1]>>
  %b = memref.alloc() : memref<16xf32>
  memref.copy %x, %b : memref<16xf32> to memref<16xf32>
  memref.copy %b, %y : memref<16xf32> to memref<16xf32>
  memref.copy %big, %out : memref<1024xf32> to memref<1024xf32>
  return
}

// -----

// Two ops apart: %b starts 2 ops after %a's last use, outside a distance of
// 1, within one of 2.

// PLAIN-LABEL: func.func @two_ops_apart(
// PLAIN-SAME: attributes {kiln.arena_bytes = 4160 : i64
// APART-LABEL: func.func @two_ops_apart(
// APART-SAME: attributes {kiln.arena_bytes = 4224 : i64
// NEXT-LABEL: func.func @two_ops_apart(
// NEXT-SAME: attributes {kiln.arena_bytes = 4160 : i64
func.func @two_ops_apart(%x: memref<16xf32>, %y: memref<16xf32>,
                         %z: memref<16xf32>,
                         %in: memref<1024xf32>, %out: memref<1024xf32>) {
  %big = memref.alloc() : memref<1024xf32>
  memref.copy %in, %big : memref<1024xf32> to memref<1024xf32>
  %a = memref.alloc() : memref<16xf32>
  memref.copy %x, %a : memref<16xf32> to memref<16xf32>
  memref.copy %a, %y : memref<16xf32> to memref<16xf32>
  memref.copy %x, %z : memref<16xf32> to memref<16xf32>
  %b = memref.alloc() : memref<16xf32>
  memref.copy %x, %b : memref<16xf32> to memref<16xf32>
  memref.copy %b, %y : memref<16xf32> to memref<16xf32>
  memref.copy %big, %out : memref<1024xf32> to memref<1024xf32>
  return
}

// -----

// Keeping %b apart would double the arena (64 to 128 bytes), more than
// 1/16: the plain placement is kept, %b in %a's bytes.

// PLAIN-LABEL: func.func @too_costly(
// PLAIN-SAME: attributes {kiln.arena_bytes = 64 : i64
// APART-LABEL: func.func @too_costly(
// APART-SAME: attributes {kiln.arena_bytes = 64 : i64
// APART: %[[OFF_A:.*]] = arith.constant 0 : index
// APART: memref.view %{{.*}}[%[[OFF_A]]][] : memref<64xi8> to memref<16xf32>
// APART: %[[OFF_B:.*]] = arith.constant 0 : index
// APART: memref.view %{{.*}}[%[[OFF_B]]][] : memref<64xi8> to memref<16xf32>
func.func @too_costly(%x: memref<16xf32>, %y: memref<16xf32>) {
  %a = memref.alloc() : memref<16xf32>
  memref.copy %x, %a : memref<16xf32> to memref<16xf32>
  memref.copy %a, %y : memref<16xf32> to memref<16xf32>
  %b = memref.alloc() : memref<16xf32>
  memref.copy %x, %b : memref<16xf32> to memref<16xf32>
  memref.copy %b, %y : memref<16xf32> to memref<16xf32>
  return
}
