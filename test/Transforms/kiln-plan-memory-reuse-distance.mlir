// RUN: kiln-opt %s -split-input-file --kiln-plan-memory | FileCheck %s --check-prefix=PLAIN
// RUN: kiln-opt %s -split-input-file "--kiln-plan-memory=reuse-distance=2" | FileCheck %s --check-prefix=APART
// RUN: kiln-opt %s -split-input-file "--kiln-plan-memory=reuse-distance=1" | FileCheck %s --check-prefix=NEXT
// RUN: kiln-opt %s -split-input-file "--kiln-plan-memory=reuse-distance=4" | FileCheck %s --check-prefix=FOUR

// %b is first written by the op right after the last use of %a; %big is
// written last, after two more ops, so the 4096 bytes it takes are free
// before. Without a reuse distance %b takes %a's bytes (0). With one of 2
// ops it gets its own (64): the copy into %b no longer writes what the copy
// before it reads, so the two could run at once. The arena stays at 4096
// bytes. With a distance of 1, %b starts 1 op after %a's last use: within
// it too. The views and the allocations count no ops.

// PLAIN-LABEL: func.func @apart(
// PLAIN-SAME: attributes {kiln.arena_bytes = 4096 : i64
// PLAIN: %[[OFF_A:.*]] = arith.constant 0 : index
// PLAIN: memref.view %{{.*}}[%[[OFF_A]]][] : memref<4096xi8> to memref<16xf32>
// PLAIN: %[[OFF_B:.*]] = arith.constant 0 : index
// PLAIN: memref.view %{{.*}}[%[[OFF_B]]][] : memref<4096xi8> to memref<16xf32>

// APART-LABEL: func.func @apart(
// APART-SAME: attributes {kiln.arena_bytes = 4096 : i64
// APART: %[[OFF_A:.*]] = arith.constant 0 : index
// APART: memref.view %{{.*}}[%[[OFF_A]]][] : memref<4096xi8> to memref<16xf32>
// APART: %[[OFF_B:.*]] = arith.constant 64 : index
// APART: memref.view %{{.*}}[%[[OFF_B]]][] : memref<4096xi8> to memref<16xf32>

// NEXT-LABEL: func.func @apart(
// NEXT: memref.view %{{.*}}[%c0{{.*}}][] : memref<4096xi8> to memref<16xf32>
// NEXT: memref.view %{{.*}}[%c64{{.*}}][] : memref<4096xi8> to memref<16xf32>
func.func @apart(%x: memref<16xf32>, %y: memref<16xf32>, %z: memref<16xf32>,
                 %in: memref<1024xf32>, %out: memref<1024xf32>) {
  %a = memref.alloc() : memref<16xf32>
  memref.copy %x, %a : memref<16xf32> to memref<16xf32>
  %head = memref.subview %a[0] [8] [1] : memref<16xf32> to memref<8xf32, strided<[1]>>
  %tail = memref.subview %y[0] [8] [1] : memref<16xf32> to memref<8xf32, strided<[1]>>
  memref.copy %head, %tail : memref<8xf32, strided<[1]>> to memref<8xf32, strided<[1]>>
  %b = memref.alloc() : memref<16xf32>
  memref.copy %x, %b : memref<16xf32> to memref<16xf32>
  memref.copy %b, %y : memref<16xf32> to memref<16xf32>
  memref.copy %x, %z : memref<16xf32> to memref<16xf32>
  memref.copy %y, %z : memref<16xf32> to memref<16xf32>
  %big = memref.alloc() : memref<1024xf32>
  memref.copy %in, %big : memref<1024xf32> to memref<1024xf32>
  memref.copy %big, %out : memref<1024xf32> to memref<1024xf32>
  return
}

// -----

// Two ops apart: %b starts 2 ops after %a's last use, outside a distance of
// 1, within one of 2.

// PLAIN-LABEL: func.func @two_ops_apart(
// PLAIN: memref.view %{{.*}}[%c0{{.*}}][] : memref<4096xi8> to memref<16xf32>
// PLAIN: memref.view %{{.*}}[%c0{{.*}}][] : memref<4096xi8> to memref<16xf32>
// APART-LABEL: func.func @two_ops_apart(
// APART: memref.view %{{.*}}[%c0{{.*}}][] : memref<4096xi8> to memref<16xf32>
// APART: memref.view %{{.*}}[%c64{{.*}}][] : memref<4096xi8> to memref<16xf32>
// NEXT-LABEL: func.func @two_ops_apart(
// NEXT: memref.view %{{.*}}[%c0{{.*}}][] : memref<4096xi8> to memref<16xf32>
// NEXT: memref.view %{{.*}}[%c0{{.*}}][] : memref<4096xi8> to memref<16xf32>
func.func @two_ops_apart(%x: memref<16xf32>, %y: memref<16xf32>,
                         %z: memref<16xf32>,
                         %in: memref<1024xf32>, %out: memref<1024xf32>) {
  %a = memref.alloc() : memref<16xf32>
  memref.copy %x, %a : memref<16xf32> to memref<16xf32>
  memref.copy %a, %y : memref<16xf32> to memref<16xf32>
  memref.copy %x, %z : memref<16xf32> to memref<16xf32>
  %b = memref.alloc() : memref<16xf32>
  memref.copy %x, %b : memref<16xf32> to memref<16xf32>
  memref.copy %b, %y : memref<16xf32> to memref<16xf32>
  memref.copy %x, %z : memref<16xf32> to memref<16xf32>
  memref.copy %y, %z : memref<16xf32> to memref<16xf32>
  memref.copy %x, %z : memref<16xf32> to memref<16xf32>
  %big = memref.alloc() : memref<1024xf32>
  memref.copy %in, %big : memref<1024xf32> to memref<1024xf32>
  memref.copy %big, %out : memref<1024xf32> to memref<1024xf32>
  return
}

// -----

// Where keeping off everything within the distance finds no room, a buffer
// keeps off what is within half of it, a quarter, and so on. The arena is
// %big's 192 bytes, written 3 ops after %buffer's last use. With a
// distance of 4, %near (128 bytes, 1 op before %buffer) takes bytes 0 to
// 128, %far (3 ops before %buffer) bytes 128 to 192. Keeping %buffer off
// all three leaves no room; off those within 2 ops (%near alone), %buffer
// takes %far's bytes, not those of %near, which the plain placement gives
// it.

// PLAIN-LABEL: func.func @farthest(
// PLAIN-SAME: attributes {kiln.arena_bytes = 192 : i64
// PLAIN-COUNT-3: memref.view %{{.*}}[%c0{{.*}}][] : memref<192xi8>
// FOUR-LABEL: func.func @farthest(
// FOUR-SAME: attributes {kiln.arena_bytes = 192 : i64
// FOUR: memref.view %{{.*}}[%c128{{.*}}][] : memref<192xi8> to memref<16xf32>
// FOUR: memref.view %{{.*}}[%c0{{.*}}][] : memref<192xi8> to memref<32xf32>
// FOUR: memref.view %{{.*}}[%c128{{.*}}][] : memref<192xi8> to memref<16xf32>
// FOUR: memref.view %{{.*}}[%c0{{.*}}][] : memref<192xi8> to memref<48xf32>
func.func @farthest(%x: memref<16xf32>, %y: memref<16xf32>,
                    %z: memref<16xf32>,
                    %in32: memref<32xf32>, %out32: memref<32xf32>,
                    %in48: memref<48xf32>, %out48: memref<48xf32>) {
  %far = memref.alloc() : memref<16xf32>
  memref.copy %x, %far : memref<16xf32> to memref<16xf32>
  memref.copy %far, %y : memref<16xf32> to memref<16xf32>
  %near = memref.alloc() : memref<32xf32>
  memref.copy %in32, %near : memref<32xf32> to memref<32xf32>
  memref.copy %near, %out32 : memref<32xf32> to memref<32xf32>
  %buffer = memref.alloc() : memref<16xf32>
  memref.copy %x, %buffer : memref<16xf32> to memref<16xf32>
  memref.copy %buffer, %y : memref<16xf32> to memref<16xf32>
  memref.copy %x, %z : memref<16xf32> to memref<16xf32>
  memref.copy %y, %z : memref<16xf32> to memref<16xf32>
  %big = memref.alloc() : memref<48xf32>
  memref.copy %in48, %big : memref<48xf32> to memref<48xf32>
  memref.copy %big, %out48 : memref<48xf32> to memref<48xf32>
  return
}

// -----

// No room but %a's bytes: %b takes them, and the arena does not grow.

// PLAIN-LABEL: func.func @no_room(
// PLAIN-SAME: attributes {kiln.arena_bytes = 64 : i64
// APART-LABEL: func.func @no_room(
// APART-SAME: attributes {kiln.arena_bytes = 64 : i64
// APART: %[[OFF_A:.*]] = arith.constant 0 : index
// APART: memref.view %{{.*}}[%[[OFF_A]]][] : memref<64xi8> to memref<16xf32>
// APART: %[[OFF_B:.*]] = arith.constant 0 : index
// APART: memref.view %{{.*}}[%[[OFF_B]]][] : memref<64xi8> to memref<16xf32>
func.func @no_room(%x: memref<16xf32>, %y: memref<16xf32>) {
  %a = memref.alloc() : memref<16xf32>
  memref.copy %x, %a : memref<16xf32> to memref<16xf32>
  memref.copy %a, %y : memref<16xf32> to memref<16xf32>
  %b = memref.alloc() : memref<16xf32>
  memref.copy %x, %b : memref<16xf32> to memref<16xf32>
  memref.copy %b, %y : memref<16xf32> to memref<16xf32>
  return
}

// -----

// A buffer kept apart can still push a later one past the arena: %d keeps
// off %c's bytes (0) and takes 64 to 128, inside %big's 128 bytes; %e,
// alive beside both, then finds no room below 128, and the arena would be
// 192 bytes, more than 1/16 above the plain placement's 128. That one is
// kept: %d in %c's bytes, %e at 64.

// PLAIN-LABEL: func.func @grows(
// PLAIN-SAME: attributes {kiln.arena_bytes = 128 : i64
// APART-LABEL: func.func @grows(
// APART-SAME: attributes {kiln.arena_bytes = 128 : i64
// APART: memref.view %{{.*}}[%c64{{.*}}][] : memref<128xi8> to memref<8xf32>
// APART: memref.view %{{.*}}[%c0{{.*}}][] : memref<128xi8> to memref<16xf32>
// APART: memref.view %{{.*}}[%c0{{.*}}][] : memref<128xi8> to memref<16xf32>
func.func @grows(%x: memref<16xf32>, %y: memref<16xf32>, %z: memref<16xf32>,
                 %w: memref<8xf32>,
                 %in: memref<32xf32>, %out: memref<32xf32>) {
  %e = memref.alloc() : memref<8xf32>
  memref.copy %w, %e : memref<8xf32> to memref<8xf32>
  %c = memref.alloc() : memref<16xf32>
  memref.copy %x, %c : memref<16xf32> to memref<16xf32>
  memref.copy %c, %y : memref<16xf32> to memref<16xf32>
  %d = memref.alloc() : memref<16xf32>
  memref.copy %x, %d : memref<16xf32> to memref<16xf32>
  memref.copy %d, %y : memref<16xf32> to memref<16xf32>
  memref.copy %e, %w : memref<8xf32> to memref<8xf32>
  memref.copy %x, %z : memref<16xf32> to memref<16xf32>
  memref.copy %y, %z : memref<16xf32> to memref<16xf32>
  memref.copy %x, %z : memref<16xf32> to memref<16xf32>
  %big = memref.alloc() : memref<32xf32>
  memref.copy %in, %big : memref<32xf32> to memref<32xf32>
  memref.copy %big, %out : memref<32xf32> to memref<32xf32>
  return
}
