// RUN: kiln-opt %s -split-input-file --kiln-update-in-place | FileCheck %s

#id = affine_map<(d0) -> (d0)>


// p' = p - g: the kernel reads p only at the element it writes, after every
// other read of p, so it writes the parameter's storage and the copy and the
// buffer go.
// CHECK-LABEL: func.func @sgd(
// CHECK-SAME: %[[G:[^:]*]]: memref<8xf32>, %[[P:[^:]*]]: memref<8xf32> {kiln.param = "w"}, %[[OUT:[^:]*]]: memref<8xf32> {kiln.update = "w"})
// CHECK-NOT: memref.alloc
// CHECK: linalg.generic {{.*}} ins(%[[P]], %[[G]] : memref<8xf32>, memref<8xf32>) outs(%[[OUT]] : memref<8xf32>)
// CHECK-NOT: memref.copy
// CHECK: return
func.func @sgd(%g: memref<8xf32>, %p: memref<8xf32> {kiln.param = "w"},
               %out: memref<8xf32> {kiln.update = "w"}) {
  %new = memref.alloc() : memref<8xf32>
  linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
      ins(%p, %g : memref<8xf32>, memref<8xf32>) outs(%new : memref<8xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %d = arith.subf %a, %b : f32
    linalg.yield %d : f32
  }
  memref.copy %new, %out : memref<8xf32> to memref<8xf32>
  return
}

// -----

#id = affine_map<(d0) -> (d0)>

// A later kernel still reads the old p: the update moves down past it.
// CHECK-LABEL: func.func @sink(
// CHECK-SAME: %[[G:[^:]*]]: memref<8xf32>, %[[P:[^:]*]]: memref<8xf32> {kiln.param = "w"}, %[[OUT:[^:]*]]: memref<8xf32> {kiln.update = "w"}, %[[Y:[^:]*]]: memref<8xf32>)
// CHECK: linalg.generic {{.*}} ins(%[[P]] : memref<8xf32>) outs(%[[Y]] : memref<8xf32>)
// CHECK: linalg.generic {{.*}} ins(%[[P]], %[[G]] : memref<8xf32>, memref<8xf32>) outs(%[[OUT]] : memref<8xf32>)
// CHECK-NOT: memref.copy
func.func @sink(%g: memref<8xf32>, %p: memref<8xf32> {kiln.param = "w"},
                %out: memref<8xf32> {kiln.update = "w"}, %y: memref<8xf32>) {
  %new = memref.alloc() : memref<8xf32>
  linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
      ins(%p, %g : memref<8xf32>, memref<8xf32>) outs(%new : memref<8xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %d = arith.subf %a, %b : f32
    linalg.yield %d : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%p : memref<8xf32>) outs(%y : memref<8xf32>) {
  ^bb0(%a: f32, %c: f32):
    linalg.yield %a : f32
  }
  memref.copy %new, %out : memref<8xf32> to memref<8xf32>
  return
}

// -----

#id = affine_map<(d0) -> (d0)>

// The later reader of the old p overwrites the update's input g first: the
// update cannot move past it, so the copy stays.
// CHECK-LABEL: func.func @blocked(
// CHECK: %[[NEW:.*]] = memref.alloc()
// CHECK: memref.copy %[[NEW]], %{{.*}}
func.func @blocked(%g: memref<8xf32>, %p: memref<8xf32> {kiln.param = "w"},
                   %out: memref<8xf32> {kiln.update = "w"}) {
  %new = memref.alloc() : memref<8xf32>
  linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
      ins(%p, %g : memref<8xf32>, memref<8xf32>) outs(%new : memref<8xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %d = arith.subf %a, %b : f32
    linalg.yield %d : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%p : memref<8xf32>) outs(%g : memref<8xf32>) {
  ^bb0(%a: f32, %c: f32):
    linalg.yield %a : f32
  }
  memref.copy %new, %out : memref<8xf32> to memref<8xf32>
  return
}

// -----

#id = affine_map<(d0) -> (d0)>

// The update reads p at other elements than it writes (a reduction over p):
// writing in place would read overwritten values.
// CHECK-LABEL: func.func @not_elementwise(
// CHECK: memref.copy
#row = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1, d0)>
func.func @not_elementwise(%p: memref<4x4xf32> {kiln.param = "w"},
                           %out: memref<4x4xf32> {kiln.update = "w"}) {
  %new = memref.alloc() : memref<4x4xf32>
  linalg.generic {indexing_maps = [#col, #row], iterator_types = ["parallel", "parallel"]}
      ins(%p : memref<4x4xf32>) outs(%new : memref<4x4xf32>) {
  ^bb0(%a: f32, %c: f32):
    linalg.yield %a : f32
  }
  memref.copy %new, %out : memref<4x4xf32> to memref<4x4xf32>
  return
}

// -----

#id = affine_map<(d0) -> (d0)>

// Two updates that each need the other's old value (SGD with momentum whose
// decayed gradient was recomputed in both kernels): the buffer's update
// moves below w's and writes in place; w's then keeps its copy, since the
// storage it would write is one the buffer's update still reads.
// CHECK-LABEL: func.func @each_needs_the_other(
// CHECK-SAME: %[[OUTB:[^:]*]]: memref<8xf32> {kiln.update = "buf"}, %[[OUTP:[^:]*]]: memref<8xf32> {kiln.update = "w"})
// CHECK: %[[NEWP:.*]] = memref.alloc()
// CHECK: linalg.generic {{.*}} outs(%[[NEWP]] : memref<8xf32>)
// CHECK: linalg.generic {{.*}} outs(%[[OUTB]] : memref<8xf32>)
// CHECK: memref.copy %[[NEWP]], %[[OUTP]]
func.func @each_needs_the_other(%g: memref<8xf32>,
    %b: memref<8xf32> {kiln.param = "buf"}, %p: memref<8xf32> {kiln.param = "w"},
    %outb: memref<8xf32> {kiln.update = "buf"}, %outp: memref<8xf32> {kiln.update = "w"}) {
  %newb = memref.alloc() : memref<8xf32>
  linalg.generic {indexing_maps = [#id, #id, #id, #id], iterator_types = ["parallel"]}
      ins(%b, %g, %p : memref<8xf32>, memref<8xf32>, memref<8xf32>) outs(%newb : memref<8xf32>) {
  ^bb0(%x: f32, %y: f32, %z: f32, %c: f32):
    %s = arith.addf %x, %y : f32
    %t = arith.addf %s, %z : f32
    linalg.yield %t : f32
  }
  %newp = memref.alloc() : memref<8xf32>
  linalg.generic {indexing_maps = [#id, #id, #id, #id], iterator_types = ["parallel"]}
      ins(%p, %b, %g : memref<8xf32>, memref<8xf32>, memref<8xf32>) outs(%newp : memref<8xf32>) {
  ^bb0(%x: f32, %y: f32, %z: f32, %c: f32):
    %s = arith.addf %x, %y : f32
    %t = arith.subf %s, %z : f32
    linalg.yield %t : f32
  }
  memref.copy %newb, %outb : memref<8xf32> to memref<8xf32>
  memref.copy %newp, %outp : memref<8xf32> to memref<8xf32>
  return
}

// -----

#id = affine_map<(d0) -> (d0)>

// One loop writes both the new momentum and the new parameter (as
// kiln-fuse-elementwise merges an optimizer update): each output goes
// straight to its own storage.
// CHECK-LABEL: func.func @state_and_param(
// CHECK-SAME: %[[G:[^:]*]]: memref<8xf32>, %[[M:[^:]*]]: memref<8xf32> {kiln.param = "m"}, %[[P:[^:]*]]: memref<8xf32> {kiln.param = "w"}, %[[MOUT:[^:]*]]: memref<8xf32> {kiln.update = "m"}, %[[POUT:[^:]*]]: memref<8xf32> {kiln.update = "w"})
// CHECK-NOT: memref.alloc
// CHECK: linalg.generic {{.*}} ins(%[[M]], %[[G]], %[[P]] : memref<8xf32>, memref<8xf32>, memref<8xf32>) outs(%[[MOUT]], %[[POUT]] : memref<8xf32>, memref<8xf32>)
// CHECK-NOT: memref.copy
// CHECK: return
func.func @state_and_param(%g: memref<8xf32>, %m: memref<8xf32> {kiln.param = "m"},
                           %p: memref<8xf32> {kiln.param = "w"},
                           %mout: memref<8xf32> {kiln.update = "m"},
                           %pout: memref<8xf32> {kiln.update = "w"}) {
  %newm = memref.alloc() : memref<8xf32>
  %newp = memref.alloc() : memref<8xf32>
  linalg.generic {indexing_maps = [#id, #id, #id, #id, #id], iterator_types = ["parallel"]}
      ins(%m, %g, %p : memref<8xf32>, memref<8xf32>, memref<8xf32>) outs(%newm, %newp : memref<8xf32>, memref<8xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32, %d: f32, %e: f32):
    %s = arith.addf %a, %b : f32
    %q = arith.subf %c, %s : f32
    linalg.yield %s, %q : f32, f32
  }
  memref.copy %newm, %mout : memref<8xf32> to memref<8xf32>
  memref.copy %newp, %pout : memref<8xf32> to memref<8xf32>
  return
}
