// RUN: kiln-opt %s --kiln-outline-kernels | FileCheck %s

#id = affine_map<(d0) -> (d0)>

// Each kernel, a linalg op or a copy, becomes a call of a private noinline
// function that takes the kernel's operands; the constant its body reads
// is cloned in rather than passed. Functions are numbered per entry in
// kernel order; each new one goes right after the entry, so the last comes
// first. The call to an external function is no kernel and stays; the
// entry's constant, now unused, is left for the canonicalizer.
// CHECK-LABEL: func.func @step(
// CHECK-SAME: %[[A:.*]]: memref<4xf32>, %[[B:.*]]: memref<4xf32>
// CHECK-NOT: linalg.generic
// CHECK: call @step_kernel0(%[[A]], %[[B]]) : (memref<4xf32>, memref<4xf32>) -> ()
// CHECK-NEXT: call @step_kernel1(%[[B]], %[[A]]) : (memref<4xf32>, memref<4xf32>) -> ()
// CHECK-NEXT: call @external(%[[A]])
// CHECK-NEXT: return
// CHECK: func.func private @step_kernel1(%[[S:.*]]: memref<4xf32>, %[[D:.*]]: memref<4xf32>)
// CHECK-SAME: attributes {passthrough = ["noinline"]}
// CHECK-NEXT: memref.copy %[[S]], %[[D]]
// CHECK-NEXT: return
// CHECK: func.func private @step_kernel0(%[[X:.*]]: memref<4xf32>, %[[Y:.*]]: memref<4xf32>)
// CHECK-SAME: attributes {passthrough = ["noinline"]}
// CHECK-NEXT: %[[TWO:.*]] = arith.constant 2.0
// CHECK-NEXT: linalg.generic {{.*}} ins(%[[X]] : memref<4xf32>) outs(%[[Y]] : memref<4xf32>)
// CHECK: arith.mulf %{{.*}}, %[[TWO]]
// CHECK: return
func.func private @external(memref<4xf32>)
func.func @step(%a: memref<4xf32>, %b: memref<4xf32>) {
  %two = arith.constant 2.0 : f32
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%a : memref<4xf32>) outs(%b : memref<4xf32>) {
  ^bb0(%in: f32, %o: f32):
    %r = arith.mulf %in, %two : f32
    linalg.yield %r : f32
  }
  memref.copy %b, %a : memref<4xf32> to memref<4xf32>
  call @external(%a) : (memref<4xf32>) -> ()
  return
}

// A kernel whose operands do not fit the bare-pointer calling convention
// (a dynamically shaped memref) stays in the entry function.
// CHECK-LABEL: func.func @dynamic(
// CHECK-NEXT: memref.copy
// CHECK-NOT: @dynamic_kernel
func.func @dynamic(%a: memref<?xf32>, %b: memref<?xf32>) {
  memref.copy %a, %b : memref<?xf32> to memref<?xf32>
  return
}
