// RUN: kiln-opt %s --kiln-fuse-elementwise | FileCheck %s
// RUN: kiln-opt %s --kiln-fuse-elementwise="updates-per-loop=1" | FileCheck %s --check-prefix=ONE

#id = affine_map<(d0, d1) -> (d0, d1)>
#tr = affine_map<(d0, d1) -> (d1, d0)>
#id1 = affine_map<(d0) -> (d0)>
#scalar = affine_map<() -> ()>
#bcast = affine_map<(d0) -> ()>
#lhs = affine_map<(m, n, k) -> (m, k)>
#rhs = affine_map<(m, n, k) -> (k, n)>
#out = affine_map<(m, n, k) -> (m, n)>

// A computing producer with one user fuses into it.
// CHECK-LABEL: func.func @single_user(
// CHECK-SAME: %[[X:.*]]: tensor<4xf32>, %[[Y:.*]]: tensor<4xf32>
// CHECK: linalg.generic {{.*}} ins(%[[X]], %[[Y]] :
// CHECK: math.exp
// CHECK: arith.addf
// CHECK-NOT: linalg.generic
func.func @single_user(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  %e = tensor.empty() : tensor<4xf32>
  %a = linalg.generic {indexing_maps = [#id1, #id1], iterator_types = ["parallel"]}
      ins(%x : tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%in: f32, %o: f32):
    %r = math.exp %in : f32
    linalg.yield %r : f32
  } -> tensor<4xf32>
  %b = linalg.generic {indexing_maps = [#id1, #id1, #id1], iterator_types = ["parallel"]}
      ins(%a, %y : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%in: f32, %in2: f32, %o: f32):
    %r = arith.addf %in, %in2 : f32
    linalg.yield %r : f32
  } -> tensor<4xf32>
  return %b : tensor<4xf32>
}

// A computing producer with two users stays a kernel of its own: each user
// would recompute it.
// CHECK-LABEL: func.func @several_users(
// CHECK-SAME: %[[X:.*]]: tensor<4xf32>, %[[Y:.*]]: tensor<4xf32>
// CHECK: %[[A:.*]] = linalg.generic {{.*}} ins(%[[X]] :
// CHECK: math.exp
// CHECK: linalg.generic {{.*}} ins(%[[A]], %[[Y]] :
// CHECK: linalg.generic {{.*}} ins(%[[A]], %[[Y]] :
func.func @several_users(%x: tensor<4xf32>, %y: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %e = tensor.empty() : tensor<4xf32>
  %a = linalg.generic {indexing_maps = [#id1, #id1], iterator_types = ["parallel"]}
      ins(%x : tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%in: f32, %o: f32):
    %r = math.exp %in : f32
    linalg.yield %r : f32
  } -> tensor<4xf32>
  %b = linalg.generic {indexing_maps = [#id1, #id1, #id1], iterator_types = ["parallel"]}
      ins(%a, %y : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%in: f32, %in2: f32, %o: f32):
    %r = arith.addf %in, %in2 : f32
    linalg.yield %r : f32
  } -> tensor<4xf32>
  %c = linalg.generic {indexing_maps = [#id1, #id1, #id1], iterator_types = ["parallel"]}
      ins(%a, %y : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%in: f32, %in2: f32, %o: f32):
    %r = arith.mulf %in, %in2 : f32
    linalg.yield %r : f32
  } -> tensor<4xf32>
  return %b, %c : tensor<4xf32>, tensor<4xf32>
}

// A transposition only moves data: it fuses into both of its users, which
// then read %x through the transposed map, and it disappears.
// CHECK-LABEL: func.func @transpose_several_users(
// CHECK-SAME: %[[X:.*]]: tensor<3x4xf32>, %[[Y:.*]]: tensor<4x3xf32>
// CHECK: linalg.generic {{.*}} ins(%[[X]], %[[Y]] :
// CHECK: arith.addf
// CHECK: linalg.generic {{.*}} ins(%[[X]], %[[Y]] :
// CHECK: arith.mulf
// CHECK-NOT: linalg.generic
func.func @transpose_several_users(%x: tensor<3x4xf32>, %y: tensor<4x3xf32>) -> (tensor<4x3xf32>, tensor<4x3xf32>) {
  %e = tensor.empty() : tensor<4x3xf32>
  %t = linalg.generic {indexing_maps = [#tr, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<3x4xf32>) outs(%e : tensor<4x3xf32>) {
  ^bb0(%in: f32, %o: f32):
    linalg.yield %in : f32
  } -> tensor<4x3xf32>
  %b = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%t, %y : tensor<4x3xf32>, tensor<4x3xf32>) outs(%e : tensor<4x3xf32>) {
  ^bb0(%in: f32, %in2: f32, %o: f32):
    %r = arith.addf %in, %in2 : f32
    linalg.yield %r : f32
  } -> tensor<4x3xf32>
  %c = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%t, %y : tensor<4x3xf32>, tensor<4x3xf32>) outs(%e : tensor<4x3xf32>) {
  ^bb0(%in: f32, %in2: f32, %o: f32):
    %r = arith.mulf %in, %in2 : f32
    linalg.yield %r : f32
  } -> tensor<4x3xf32>
  return %b, %c : tensor<4x3xf32>, tensor<4x3xf32>
}

// A returned value is not fused, even one that only moves data: the
// consumer reads the materialized transposition.
// CHECK-LABEL: func.func @returned(
// CHECK-SAME: %[[X:.*]]: tensor<3x4xf32>
// CHECK: %[[T:.*]] = linalg.generic {{.*}} ins(%[[X]] :
// CHECK: %[[B:.*]] = linalg.generic {{.*}} ins(%[[T]] :
// CHECK: math.exp
// CHECK: return %[[T]], %[[B]]
func.func @returned(%x: tensor<3x4xf32>) -> (tensor<4x3xf32>, tensor<4x3xf32>) {
  %e = tensor.empty() : tensor<4x3xf32>
  %t = linalg.generic {indexing_maps = [#tr, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<3x4xf32>) outs(%e : tensor<4x3xf32>) {
  ^bb0(%in: f32, %o: f32):
    linalg.yield %in : f32
  } -> tensor<4x3xf32>
  %b = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%t : tensor<4x3xf32>) outs(%e : tensor<4x3xf32>) {
  ^bb0(%in: f32, %o: f32):
    %r = math.exp %in : f32
    linalg.yield %r : f32
  } -> tensor<4x3xf32>
  return %t, %b : tensor<4x3xf32>, tensor<4x3xf32>
}

// A 0-d value computed once (a bias correction) is not fused into a
// consumer that broadcasts it over every element.
// CHECK-LABEL: func.func @broadcasting_consumer(
// CHECK-SAME: %[[S:.*]]: tensor<f32>, %[[X:.*]]: tensor<4xf32>
// CHECK: %[[C:.*]] = linalg.generic {{.*}} ins(%[[S]] : tensor<f32>)
// CHECK: math.sqrt
// CHECK: linalg.generic {{.*}} ins(%[[C]], %[[X]] :
// CHECK-NOT: math.sqrt
func.func @broadcasting_consumer(%s: tensor<f32>, %x: tensor<4xf32>) -> tensor<4xf32> {
  %e0 = tensor.empty() : tensor<f32>
  %c = linalg.generic {indexing_maps = [#scalar, #scalar], iterator_types = []}
      ins(%s : tensor<f32>) outs(%e0 : tensor<f32>) {
  ^bb0(%in: f32, %o: f32):
    %r = math.sqrt %in : f32
    linalg.yield %r : f32
  } -> tensor<f32>
  %e = tensor.empty() : tensor<4xf32>
  %b = linalg.generic {indexing_maps = [#bcast, #id1, #id1], iterator_types = ["parallel"]}
      ins(%c, %x : tensor<f32>, tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%in: f32, %in2: f32, %o: f32):
    %r = arith.mulf %in, %in2 : f32
    linalg.yield %r : f32
  } -> tensor<4xf32>
  return %b : tensor<4xf32>
}

// Nothing fuses into a matrix product marked kiln.matmul, not even a
// transposition: it must stay a plain contraction for the BLAS lowering.
// CHECK-LABEL: func.func @into_matmul(
// CHECK-SAME: %[[X:.*]]: tensor<3x2xf32>, %[[W:.*]]: tensor<3x4xf32>
// CHECK: %[[A:.*]] = linalg.generic {{.*}} ins(%[[X]] :
// CHECK: linalg.generic {{.*}} ins(%[[A]], %[[W]] :
// CHECK-SAME: kiln.matmul
func.func @into_matmul(%x: tensor<3x2xf32>, %w: tensor<3x4xf32>, %acc: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %e = tensor.empty() : tensor<2x3xf32>
  %a = linalg.generic {indexing_maps = [#tr, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<3x2xf32>) outs(%e : tensor<2x3xf32>) {
  ^bb0(%in: f32, %o: f32):
    linalg.yield %in : f32
  } -> tensor<2x3xf32>
  %p = linalg.generic {indexing_maps = [#lhs, #rhs, #out],
                       iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %w : tensor<2x3xf32>, tensor<3x4xf32>) outs(%acc : tensor<2x4xf32>)
      attrs = {kiln.matmul = {}} {
  ^bb0(%l: f32, %r: f32, %o: f32):
    %m = arith.mulf %l, %r : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x4xf32>
  return %p : tensor<2x4xf32>
}

// The same contraction without the mark reads %x through the transposed
// map.
// CHECK-LABEL: func.func @into_unmarked_contraction(
// CHECK-SAME: %[[X:.*]]: tensor<3x2xf32>, %[[W:.*]]: tensor<3x4xf32>
// CHECK-NOT: linalg.generic
// CHECK: linalg.generic {{.*}} ins(%[[X]], %[[W]] :
func.func @into_unmarked_contraction(%x: tensor<3x2xf32>, %w: tensor<3x4xf32>, %acc: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %e = tensor.empty() : tensor<2x3xf32>
  %a = linalg.generic {indexing_maps = [#tr, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<3x2xf32>) outs(%e : tensor<2x3xf32>) {
  ^bb0(%in: f32, %o: f32):
    linalg.yield %in : f32
  } -> tensor<2x3xf32>
  %p = linalg.generic {indexing_maps = [#lhs, #rhs, #out],
                       iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %w : tensor<2x3xf32>, tensor<3x4xf32>) outs(%acc : tensor<2x4xf32>) {
  ^bb0(%l: f32, %r: f32, %o: f32):
    %m = arith.mulf %l, %r : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x4xf32>
  return %p : tensor<2x4xf32>
}

// An optimizer update (its ops carry the kiln.optimizer phase): the new
// momentum %m2 is returned and read by the parameter's update. After
// fusion, the update takes the momentum's loop in: one loop computes %m2
// once, yields it first, and uses it for the new parameter.
// CHECK-LABEL: func.func @optimizer_state_merged(
// CHECK-SAME: %[[M:[^:]*]]: tensor<8xf32>, %[[G:[^:]*]]: tensor<8xf32>, %[[P:[^:]*]]: tensor<8xf32>
// CHECK: %[[U:.*]]:2 = linalg.generic {{.*}} ins(%[[M]], %[[G]], %[[P]] : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) outs(%{{.*}}, %{{.*}} : tensor<8xf32>, tensor<8xf32>)
// CHECK-NEXT: ^bb0(%[[A:.*]]: f32, %[[B:.*]]: f32, %[[C:.*]]: f32, %{{.*}}: f32, %{{.*}}: f32):
// CHECK-NEXT: %[[S:.*]] = arith.addf %[[A]], %[[B]] : f32
// CHECK-NEXT: %[[Q:.*]] = arith.subf %[[C]], %[[S]] : f32
// CHECK-NEXT: linalg.yield %[[S]], %[[Q]] : f32, f32
// CHECK-NOT: linalg.generic
// CHECK: return %[[U]]#0, %[[U]]#1
func.func @optimizer_state_merged(%m: tensor<8xf32>, %g: tensor<8xf32>, %p: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %e = tensor.empty() : tensor<8xf32> loc(fused<"kiln.optimizer">[unknown])
  %m2 = linalg.generic {indexing_maps = [#id1, #id1, #id1], iterator_types = ["parallel"]}
      ins(%m, %g : tensor<8xf32>, tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<8xf32> loc(fused<"kiln.optimizer">[unknown])
  %e2 = tensor.empty() : tensor<8xf32> loc(fused<"kiln.optimizer">[unknown])
  %p2 = linalg.generic {indexing_maps = [#id1, #id1, #id1], iterator_types = ["parallel"]}
      ins(%p, %m2 : tensor<8xf32>, tensor<8xf32>) outs(%e2 : tensor<8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %d = arith.subf %a, %b : f32
    linalg.yield %d : f32
  } -> tensor<8xf32> loc(fused<"kiln.optimizer">[unknown])
  return %m2, %p2 : tensor<8xf32>, tensor<8xf32>
}

// The same loops outside the optimizer phase stay apart: the returned %m2
// is read, not recomputed or merged.
// CHECK-LABEL: func.func @forward_state_not_merged(
// CHECK: linalg.generic
// CHECK: arith.addf
// CHECK: linalg.generic
// CHECK: arith.subf
func.func @forward_state_not_merged(%m: tensor<8xf32>, %g: tensor<8xf32>, %p: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %e = tensor.empty() : tensor<8xf32>
  %m2 = linalg.generic {indexing_maps = [#id1, #id1, #id1], iterator_types = ["parallel"]}
      ins(%m, %g : tensor<8xf32>, tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<8xf32>
  %e2 = tensor.empty() : tensor<8xf32>
  %p2 = linalg.generic {indexing_maps = [#id1, #id1, #id1], iterator_types = ["parallel"]}
      ins(%p, %m2 : tensor<8xf32>, tensor<8xf32>) outs(%e2 : tensor<8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %d = arith.subf %a, %b : f32
    linalg.yield %d : f32
  } -> tensor<8xf32>
  return %m2, %p2 : tensor<8xf32>, tensor<8xf32>
}

// Finished updates of two parameters of the same shape (results only
// returned) become one loop; the third, of another shape, stays its own.
// CHECK-LABEL: func.func @updates_by_shape(
// CHECK-SAME: %[[A:[^:]*]]: tensor<8xf32>, %[[GA:[^:]*]]: tensor<8xf32>, %[[B:[^:]*]]: tensor<8xf32>, %[[GB:[^:]*]]: tensor<8xf32>, %[[C:[^:]*]]: tensor<4xf32>, %[[GC:[^:]*]]: tensor<4xf32>
// CHECK: %[[CC:.*]] = linalg.generic {{.*}} ins(%[[C]], %[[GC]] : tensor<4xf32>, tensor<4xf32>)
// CHECK: %[[AB:.*]]:2 = linalg.generic {{.*}} ins(%[[A]], %[[GA]], %[[B]], %[[GB]] : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
// CHECK-NEXT: ^bb0(%[[X0:[^:]*]]: f32, %[[Y0:[^:]*]]: f32, %[[X1:[^:]*]]: f32, %[[Y1:[^:]*]]: f32, %{{.*}}: f32, %{{.*}}: f32):
// CHECK-NEXT: %[[R0:.*]] = arith.subf %[[X0]], %[[Y0]] : f32
// CHECK-NEXT: %[[R1:.*]] = arith.subf %[[X1]], %[[Y1]] : f32
// CHECK-NEXT: linalg.yield %[[R0]], %[[R1]] : f32, f32
// CHECK: return %[[AB]]#0, %[[AB]]#1, %[[CC]]
// With updates-per-loop=1 each parameter keeps its own loop.
// ONE-LABEL: func.func @updates_by_shape(
// ONE: %[[A:.*]] = linalg.generic {{.*}} ins(%arg0, %arg1 : tensor<8xf32>, tensor<8xf32>)
// ONE: %[[C:.*]] = linalg.generic {{.*}} ins(%arg4, %arg5 : tensor<4xf32>, tensor<4xf32>)
// ONE: %[[B:.*]] = linalg.generic {{.*}} ins(%arg2, %arg3 : tensor<8xf32>, tensor<8xf32>)
// ONE: return %[[A]], %[[B]], %[[C]]
func.func @updates_by_shape(%a: tensor<8xf32>, %ga: tensor<8xf32>, %b: tensor<8xf32>, %gb: tensor<8xf32>, %c: tensor<4xf32>, %gc: tensor<4xf32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<4xf32>) {
  %e = tensor.empty() : tensor<8xf32> loc(fused<"kiln.optimizer">[unknown])
  %a2 = linalg.generic {indexing_maps = [#id1, #id1, #id1], iterator_types = ["parallel"]}
      ins(%a, %ga : tensor<8xf32>, tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %d = arith.subf %x, %y : f32
    linalg.yield %d : f32
  } -> tensor<8xf32> loc(fused<"kiln.optimizer">[unknown])
  %e4 = tensor.empty() : tensor<4xf32> loc(fused<"kiln.optimizer">[unknown])
  %c2 = linalg.generic {indexing_maps = [#id1, #id1, #id1], iterator_types = ["parallel"]}
      ins(%c, %gc : tensor<4xf32>, tensor<4xf32>) outs(%e4 : tensor<4xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %d = arith.subf %x, %y : f32
    linalg.yield %d : f32
  } -> tensor<4xf32> loc(fused<"kiln.optimizer">[unknown])
  %e2 = tensor.empty() : tensor<8xf32> loc(fused<"kiln.optimizer">[unknown])
  %b2 = linalg.generic {indexing_maps = [#id1, #id1, #id1], iterator_types = ["parallel"]}
      ins(%b, %gb : tensor<8xf32>, tensor<8xf32>) outs(%e2 : tensor<8xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %d = arith.subf %x, %y : f32
    linalg.yield %d : f32
  } -> tensor<8xf32> loc(fused<"kiln.optimizer">[unknown])
  return %a2, %b2, %c2 : tensor<8xf32>, tensor<8xf32>, tensor<4xf32>
}

// An update whose result something else reads is not finished: it stays.
// CHECK-LABEL: func.func @update_read_again(
// CHECK: linalg.generic {{.*}} ins(%arg0, %arg1 :
// CHECK: linalg.generic {{.*}} ins(%arg2, %arg3 :
func.func @update_read_again(%a: tensor<8xf32>, %ga: tensor<8xf32>, %b: tensor<8xf32>, %gb: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %e = tensor.empty() : tensor<8xf32> loc(fused<"kiln.optimizer">[unknown])
  %a2 = linalg.generic {indexing_maps = [#id1, #id1, #id1], iterator_types = ["parallel"]}
      ins(%a, %ga : tensor<8xf32>, tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %d = arith.subf %x, %y : f32
    linalg.yield %d : f32
  } -> tensor<8xf32> loc(fused<"kiln.optimizer">[unknown])
  %r = tensor.empty() : tensor<8xf32>
  %e2 = tensor.empty() : tensor<8xf32> loc(fused<"kiln.optimizer">[unknown])
  %b2 = linalg.generic {indexing_maps = [#id1, #id1, #id1], iterator_types = ["parallel"]}
      ins(%b, %gb : tensor<8xf32>, tensor<8xf32>) outs(%e2 : tensor<8xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %d = arith.subf %x, %y : f32
    linalg.yield %d : f32
  } -> tensor<8xf32> loc(fused<"kiln.optimizer">[unknown])
  %s = linalg.generic {indexing_maps = [#id1, #id1], iterator_types = ["parallel"]}
      ins(%a2 : tensor<8xf32>) outs(%r : tensor<8xf32>) {
  ^bb0(%x: f32, %o: f32):
    %d = arith.mulf %x, %x : f32
    linalg.yield %d : f32
  } -> tensor<8xf32>
  return %a2, %b2, %s : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
}

// With --amp=fp16 a parameter's update reads the new moment twice: for the
// step and to keep it or the old one (%ok, false after an overflow). The
// moment's loop is cheap and only optimizer loops read it, element for
// element, so it fuses into both and no loop writes it to memory; they
// become one loop that yields the kept moment and parameter.
// CHECK-LABEL: func.func @skipped_update_recomputes_moment(
// CHECK-NEXT: tensor.empty
// CHECK-NEXT: %[[U:.*]]:2 = linalg.generic
// CHECK-NOT: linalg.generic
// CHECK: return %[[U]]#0, %[[U]]#1
func.func @skipped_update_recomputes_moment(%m: tensor<8xf32>, %g: tensor<8xf32>, %p: tensor<8xf32>, %ok: tensor<i1>) -> (tensor<8xf32>, tensor<8xf32>) {
  %e = tensor.empty() : tensor<8xf32> loc(fused<"kiln.optimizer">[unknown])
  %m2 = linalg.generic {indexing_maps = [#id1, #id1, #id1], iterator_types = ["parallel"]}
      ins(%m, %g : tensor<8xf32>, tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<8xf32> loc(fused<"kiln.optimizer">[unknown])
  %keptm = linalg.generic {indexing_maps = [#bcast, #id1, #id1, #id1], iterator_types = ["parallel"]}
      ins(%ok, %m2, %m : tensor<i1>, tensor<8xf32>, tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%c: i1, %a: f32, %b: f32, %o: f32):
    %s = arith.select %c, %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<8xf32> loc(fused<"kiln.optimizer">[unknown])
  %keptp = linalg.generic {indexing_maps = [#bcast, #id1, #id1, #id1], iterator_types = ["parallel"]}
      ins(%ok, %p, %m2 : tensor<i1>, tensor<8xf32>, tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%c: i1, %a: f32, %b: f32, %o: f32):
    %d = arith.subf %a, %b : f32
    %s = arith.select %c, %d, %a : f32
    linalg.yield %s : f32
  } -> tensor<8xf32> loc(fused<"kiln.optimizer">[unknown])
  return %keptm, %keptp : tensor<8xf32>, tensor<8xf32>
}

// A cheap loop whose value optimizer loops broadcast (a 0-d value, read for
// every element), or a costly one (math.exp) that two optimizer loops read,
// stays a loop of its own; only the return reads the others, which become
// one loop.
// CHECK-LABEL: func.func @kept_when_broadcast_or_costly(
// CHECK: %[[S:.*]] = linalg.generic {{.*}} ins(%{{.*}} : tensor<f32>)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: arith.mulf
// CHECK: %[[C:.*]] = linalg.generic {{.*}} ins(%{{.*}} : tensor<8xf32>)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: math.exp
// CHECK: linalg.generic {{.*}} ins(%[[S]], %[[S]], %[[C]], %[[C]] :
// CHECK-NOT: math.exp
// CHECK: return
func.func @kept_when_broadcast_or_costly(%s: tensor<f32>, %v: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %e0 = tensor.empty() : tensor<f32> loc(fused<"kiln.optimizer">[unknown])
  %e = tensor.empty() : tensor<8xf32> loc(fused<"kiln.optimizer">[unknown])
  %s2 = linalg.generic {indexing_maps = [#scalar, #scalar], iterator_types = []}
      ins(%s : tensor<f32>) outs(%e0 : tensor<f32>) {
  ^bb0(%a: f32, %o: f32):
    %x = arith.mulf %a, %a : f32
    linalg.yield %x : f32
  } -> tensor<f32> loc(fused<"kiln.optimizer">[unknown])
  %b1 = linalg.generic {indexing_maps = [#bcast, #id1], iterator_types = ["parallel"]}
      ins(%s2 : tensor<f32>) outs(%e : tensor<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %x = arith.addf %a, %a : f32
    linalg.yield %x : f32
  } -> tensor<8xf32> loc(fused<"kiln.optimizer">[unknown])
  %b2 = linalg.generic {indexing_maps = [#bcast, #id1], iterator_types = ["parallel"]}
      ins(%s2 : tensor<f32>) outs(%e : tensor<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %x = arith.mulf %a, %a : f32
    linalg.yield %x : f32
  } -> tensor<8xf32> loc(fused<"kiln.optimizer">[unknown])
  %c2 = linalg.generic {indexing_maps = [#id1, #id1], iterator_types = ["parallel"]}
      ins(%v : tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %x = math.exp %a : f32
    linalg.yield %x : f32
  } -> tensor<8xf32> loc(fused<"kiln.optimizer">[unknown])
  %d1 = linalg.generic {indexing_maps = [#id1, #id1], iterator_types = ["parallel"]}
      ins(%c2 : tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %x = arith.addf %a, %a : f32
    linalg.yield %x : f32
  } -> tensor<8xf32> loc(fused<"kiln.optimizer">[unknown])
  %d2 = linalg.generic {indexing_maps = [#id1, #id1], iterator_types = ["parallel"]}
      ins(%c2 : tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %x = arith.mulf %a, %a : f32
    linalg.yield %x : f32
  } -> tensor<8xf32> loc(fused<"kiln.optimizer">[unknown])
  return %b1, %b2, %d1, %d2 : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
}
