// RUN: kiln-opt %s --kiln-gpu-outline-kernels --cse --split-input-file --verify-diagnostics | FileCheck %s

// One step with each kind of kernel. What stays in @step is the program the
// runtime issues: launches on argument and arena buffers, and the products
// for cuBLASLt (the first one's zero fill is gone and it overwrites its
// output; the second accumulates).
// CHECK-LABEL: func.func @step(
// CHECK-SAME: %[[X:[a-z0-9]+]]: memref<4x300xf32>, %[[W:[a-z0-9]+]]: memref<300x8xf32>, %[[OUT:[a-z0-9]+]]: memref<4x8xf32>, %[[ARENA:[a-z0-9]+]]: memref<9728xi8>
// CHECK: %[[T:.*]] = memref.view %[[ARENA]][%c0][]
// 4 x 300 = 1200 points: 5 blocks of 256 threads.
// CHECK: %[[C5:.*]] = arith.constant 5 : index
// CHECK: %[[C256:.*]] = arith.constant 256 : index
// CHECK: gpu.launch_func @kiln_kernels::@step_k0 blocks in (%[[C5]], %{{.*}}, %{{.*}}) threads in (%[[C256]], %{{.*}}, %{{.*}}) args(%[[X]] : memref<4x300xf32>, %[[T]] : memref<4x300xf32>)
// CHECK-NOT: linalg.fill
// CHECK: linalg.generic {{.*}} ins(%[[T]], %[[W]] : {{.*}}) outs(%[[OUT]] : {{.*}}) attrs = {kiln.matmul = {overwrite}}
// CHECK: linalg.generic {{.*}} ins(%[[T]], %[[W]] : {{.*}}) outs(%[[OUT]] : {{.*}}) attrs = {kiln.matmul = {}}
// The row sums read a subview of the arena slot: the kernel gets the slot
// and takes the subview itself. One thread per row.
// CHECK: %[[SUMS:.*]] = memref.view %[[ARENA]][%c9600][] {{.*}} to memref<4xf32>
// CHECK: gpu.launch_func @kiln_kernels::@step_k1 blocks in (%{{.*}}, %{{.*}}, %{{.*}}) threads in (%[[C4:.*]], %{{.*}}, %{{.*}}) args(%[[T]] : memref<4x300xf32>, %[[SUMS]] : memref<4xf32>)
// CHECK: %[[TOTAL:.*]] = memref.view %[[ARENA]][%c4800][] {{.*}} to memref<f32>
// A full reduction has no parallel loop: one block of one thread.
// CHECK: gpu.launch_func @kiln_kernels::@step_k2 blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%[[SUMS]] : memref<4xf32>, %[[TOTAL]] : memref<f32>)
// Two fills of the same shape on different slots launch one kernel.
// CHECK: gpu.launch_func @kiln_kernels::@step_k3 {{.*}} args(%[[SUMS]] : memref<4xf32>)
// CHECK: %[[OTHER:.*]] = memref.view %[[ARENA]][%c9664][]
// CHECK: gpu.launch_func @kiln_kernels::@step_k3 {{.*}} args(%[[OTHER]] : memref<4xf32>)
// A loop the lowering wrote (iterations may depend on each other) runs on
// one thread.
// CHECK: gpu.launch_func @kiln_kernels::@step_k5 blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%[[SUMS]] : memref<4xf32>, %[[TOTAL]] : memref<f32>)
// A scatter-add (each iteration adds into an element of a buffer nothing
// else in the loop reads) runs a thread per iteration, adding atomically.
// CHECK: gpu.launch_func @kiln_kernels::@step_k6 blocks in (%c1, %c1, %c1) threads in (%c32, %c1, %c1) args(%{{.*}} : memref<4x8xi64>, %[[T]] : memref<4x300xf32>, %[[OUT]] : memref<4x8xf32>)
// CHECK-NEXT: return

// The constant table the first kernel reads is copied into the kernels'
// module. Thread blockIdx.x * 256 + threadIdx.x computes point (i / 300,
// i % 300) if i < 1200.
// CHECK: gpu.module @kiln_kernels {
// CHECK: memref.global "private" constant @table
// CHECK: gpu.func @step_k0(%[[A0:.*]]: memref<4x300xf32>, %[[A1:.*]]: memref<4x300xf32>) kernel {
// CHECK: memref.get_global @table
// CHECK: %[[B:.*]] = gpu.block_id x
// CHECK: %[[TH:.*]] = gpu.thread_id x
// CHECK: %[[BASE:.*]] = arith.muli %[[B]], %{{.*}} : index
// CHECK: %[[I:.*]] = arith.addi %[[BASE]], %[[TH]] : index
// CHECK: %[[C1200:.*]] = arith.constant 1200 : index
// CHECK: %[[IN:.*]] = arith.cmpi ult, %[[I]], %[[C1200]] : index
// CHECK: scf.if %[[IN]] {
// CHECK: arith.remui %[[I]], %{{.*}} : index
// CHECK: arith.divui %[[I]], %{{.*}} : index
// CHECK: arith.mulf
// CHECK: gpu.return
// A row sum: each thread loads its element once, carries the sum through
// the loop in a register and stores it once.
// CHECK: gpu.func @step_k1(%[[S0:.*]]: memref<4x300xf32>, %[[S1:.*]]: memref<4xf32>) kernel {
// CHECK-NEXT: memref.subview %[[S0]][0, 0] [4, 8] [1, 1]
// CHECK: scf.if
// CHECK: %[[ROW:.*]] = affine.apply
// CHECK-NEXT: %[[FIRST:.*]] = memref.load %[[S1]][%[[ROW]]]
// CHECK-NEXT: %[[RS:.*]] = scf.for %{{.*}} = %c0 to %c8 step %c1 iter_args(%[[RACC:.*]] = %[[FIRST]]) -> (f32)
// CHECK-NOT: memref.store
// CHECK: arith.addf %[[RACC]], %{{.*}} : f32
// CHECK: scf.yield
// CHECK-NEXT: }
// CHECK-NEXT: memref.store %[[RS]], %[[S1]][%[[ROW]]]
// CHECK: gpu.func @step_k2(
// CHECK-NOT: gpu.thread_id
// CHECK: scf.for
// CHECK: gpu.func @step_k3(
// CHECK-NOT: gpu.func @step_k4(
// CHECK: gpu.func @step_k5(
// CHECK-NOT: gpu.thread_id
// CHECK: scf.for
// CHECK: arith.mulf
// CHECK: gpu.func @step_k6(
// CHECK: %[[I6:.*]] = arith.addi %{{.*}}, %{{.*}} : index
// CHECK: arith.cmpi ult, %[[I6]], %c32
// CHECK-NOT: scf.for
// CHECK: memref.atomic_rmw addf %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}] : (f32, memref<4x8xf32>) -> f32

#id2 = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#mm_a = affine_map<(d0, d1, d2) -> (d0, d2)>
#mm_b = affine_map<(d0, d1, d2) -> (d2, d1)>
#mm_c = affine_map<(d0, d1, d2) -> (d0, d1)>
memref.global "private" constant @table : memref<300xf32> = dense<2.0>

func.func @step(%x: memref<4x300xf32>, %w: memref<300x8xf32>, %out: memref<4x8xf32>, %arena: memref<9728xi8> {kiln.arena}) {
  %c0 = arith.constant 0 : index
  %c4800 = arith.constant 4800 : index
  %c9600 = arith.constant 9600 : index
  %zero = arith.constant 0.0 : f32
  %t = memref.view %arena[%c0][] : memref<9728xi8> to memref<4x300xf32>
  %table = memref.get_global @table : memref<300xf32>
  linalg.generic {indexing_maps = [#id2, affine_map<(d0, d1) -> (d1)>, #id2], iterator_types = ["parallel", "parallel"]} ins(%x, %table : memref<4x300xf32>, memref<300xf32>) outs(%t : memref<4x300xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    linalg.yield %m : f32
  }
  linalg.fill ins(%zero : f32) outs(%out : memref<4x8xf32>)
  linalg.generic {indexing_maps = [#mm_a, #mm_b, #mm_c], iterator_types = ["parallel", "parallel", "reduction"], kiln.matmul = {}} ins(%t, %w : memref<4x300xf32>, memref<300x8xf32>) outs(%out : memref<4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#mm_a, #mm_b, #mm_c], iterator_types = ["parallel", "parallel", "reduction"], kiln.matmul = {}} ins(%t, %w : memref<4x300xf32>, memref<300x8xf32>) outs(%out : memref<4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  }
  %sums = memref.view %arena[%c9600][] : memref<9728xi8> to memref<4xf32>
  %rows = memref.subview %t[0, 0] [4, 8] [1, 1] : memref<4x300xf32> to memref<4x8xf32, strided<[300, 1]>>
  linalg.generic {indexing_maps = [#id2, #row], iterator_types = ["parallel", "reduction"]} ins(%rows : memref<4x8xf32, strided<[300, 1]>>) outs(%sums : memref<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %o, %a : f32
    linalg.yield %s : f32
  }
  %total = memref.view %arena[%c4800][] : memref<9728xi8> to memref<f32>
  linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> ()>], iterator_types = ["reduction"]} ins(%sums : memref<4xf32>) outs(%total : memref<f32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %o, %a : f32
    linalg.yield %s : f32
  }
  linalg.fill ins(%zero : f32) outs(%sums : memref<4xf32>)
  %c9664 = arith.constant 9664 : index
  %other = memref.view %arena[%c9664][] : memref<9728xi8> to memref<4xf32>
  linalg.fill ins(%zero : f32) outs(%other : memref<4xf32>)
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  scf.for %i = %c0 to %c4 step %c1 {
    %v = memref.load %sums[%i] : memref<4xf32>
    %acc = memref.load %total[] : memref<f32>
    %n = arith.mulf %v, %acc : f32
    memref.store %n, %total[] : memref<f32>
  }
  %c8 = arith.constant 8 : index
  %c7 = arith.constant 7 : index
  %c4864 = arith.constant 4864 : index
  %cols = memref.view %arena[%c4864][] : memref<9728xi8> to memref<4x8xi64>
  scf.for %i = %c0 to %c4 step %c1 {
    scf.for %j = %c0 to %c8 step %c1 {
      %raw = memref.load %cols[%i, %j] : memref<4x8xi64>
      %col = arith.index_cast %raw : i64 to index
      %clamped = arith.minsi %col, %c7 : index
      %u = memref.load %t[%i, %j] : memref<4x300xf32>
      %old = memref.load %out[%i, %clamped] : memref<4x8xf32>
      %new = arith.addf %old, %u : f32
      memref.store %new, %out[%i, %clamped] : memref<4x8xf32>
    }
  }
  return
}

// -----

// A kernel reading a buffer the runtime does not know (here one allocated
// in the function) cannot be launched.
func.func @unknown_buffer(%out: memref<4xf32>) {
  %zero = arith.constant 0.0 : f32
  %tmp = memref.alloc() : memref<4xf32>
  // expected-error @+1 {{reads a value that cannot be passed to a GPU kernel}}
  linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%tmp : memref<4xf32>) outs(%out : memref<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  }
  return
}

// -----

// A kernel over an empty buffer has nothing to do: it is not launched.
// CHECK-LABEL: func.func @empty(
// CHECK-NOT: gpu.launch_func
// CHECK: return
func.func @empty(%out: memref<0x4xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%out : memref<0x4xf32>)
  return
}

// -----

// A sum over the leading (batch) dimension, out[i, j] += x[b, i, j], as the
// gradient of a broadcast position embedding is: its parallel dimensions
// become the threads (16 x 32 = 512: 2 blocks of 256), and each thread adds
// its element's 4 terms in order, in a register between one load and one
// store. In the op's own order the reduction would
// be a sequential loop around the parallel one, and the kernel one thread.
// CHECK-LABEL: func.func @batch_sum(
// CHECK: %[[C2:.*]] = arith.constant 2 : index
// CHECK: %[[C256:.*]] = arith.constant 256 : index
// CHECK: gpu.launch_func @kiln_kernels::@batch_sum_k0 blocks in (%[[C2]], %{{.*}}, %{{.*}}) threads in (%[[C256]], %{{.*}}, %{{.*}})
// CHECK: gpu.func @batch_sum_k0(%[[XK:.*]]: memref<4x16x32xf32>, %[[OUTK:.*]]: memref<16x32xf32>) kernel
// CHECK: %[[LINEAR:.*]] = arith.addi
// CHECK: scf.if
// CHECK: %[[J:.*]] = arith.remui %[[LINEAR]], %c32
// CHECK: %[[I:.*]] = arith.divui %[[LINEAR]], %c32
// CHECK: %[[II:.*]] = affine.apply #{{.*}}(%[[I]])
// CHECK: %[[JJ:.*]] = affine.apply #{{.*}}(%[[J]])
// CHECK: %[[OLD:.*]] = memref.load %[[OUTK]][%[[II]], %[[JJ]]]
// CHECK: %[[SUM:.*]] = scf.for %[[B:.*]] = %c0 to %c4 step %c1 iter_args(%[[ACC:.*]] = %[[OLD]]) -> (f32)
// CHECK: %[[BB:.*]] = affine.apply #{{.*}}(%[[B]])
// CHECK: %[[X:.*]] = memref.load %[[XK]][%[[BB]], %[[II]], %[[JJ]]]
// CHECK: %[[NEW:.*]] = arith.addf %[[ACC]], %[[X]]
// CHECK: scf.yield %[[NEW]]
// CHECK: memref.store %[[SUM]], %[[OUTK]][%[[II]], %[[JJ]]]
func.func @batch_sum(%x: memref<4x16x32xf32>, %out: memref<16x32xf32>) {
  linalg.generic {indexing_maps = [affine_map<(b, i, j) -> (b, i, j)>, affine_map<(b, i, j) -> (i, j)>], iterator_types = ["reduction", "parallel", "parallel"]} ins(%x : memref<4x16x32xf32>) outs(%out : memref<16x32xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %o, %a : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// The same sum with the batch dimension marked parallel, which the output
// does not index: as threads, the 4 of each element would all add into it
// at once. It runs as the sum above, the dimension a loop in each thread.
// CHECK-LABEL: func.func @unindexed_parallel(
// CHECK: gpu.launch_func @kiln_kernels::@unindexed_parallel_k0 blocks in (%[[C2]], %{{.*}}, %{{.*}}) threads in (%[[C256]], %{{.*}}, %{{.*}})
// CHECK: gpu.func @unindexed_parallel_k0(%[[XK:.*]]: memref<4x16x32xf32>, %[[OUTK:.*]]: memref<16x32xf32>) kernel
// CHECK: %[[OLD:.*]] = memref.load %[[OUTK]]
// CHECK: %[[SUM:.*]] = scf.for %{{.*}} = %c0 to %c4 step %c1 iter_args(%[[ACC:.*]] = %[[OLD]]) -> (f32)
// CHECK: arith.addf %[[ACC]]
// CHECK: memref.store %[[SUM]], %[[OUTK]]
func.func @unindexed_parallel(%x: memref<4x16x32xf32>, %out: memref<16x32xf32>) {
  linalg.generic {indexing_maps = [affine_map<(b, i, j) -> (b, i, j)>, affine_map<(b, i, j) -> (i, j)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%x : memref<4x16x32xf32>) outs(%out : memref<16x32xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %o, %a : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A loop nest adding into a fixed row (the gradient of an embedding whose
// ids are all the same, as BERT's token types): the loop that picks the
// element (%j) becomes the threads (32), and each thread sums its column's
// 64 terms in order in a register, loaded and stored once. No atomics: the
// elements the threads write are distinct.
// CHECK-LABEL: func.func @fixed_row_sum(
// CHECK: gpu.launch_func @kiln_kernels::@fixed_row_sum_k0 blocks in (%c1, %c1, %c1) threads in (%c32, %c1, %c1)
// CHECK: gpu.func @fixed_row_sum_k0(%[[XK:.*]]: memref<64x32xf32>, %[[OUTK:.*]]: memref<2x32xf32>) kernel
// CHECK: %[[J:.*]] = arith.addi
// CHECK: scf.if
// CHECK: %[[INIT:.*]] = memref.load %[[OUTK]][%c0, %[[J]]]
// CHECK: %[[SUM:.*]] = scf.for %[[T:.*]] = %c0 to %c64 step %c1 iter_args(%[[ACC:.*]] = %[[INIT]]) -> (f32)
// CHECK: %[[V:.*]] = memref.load %[[XK]][%[[T]], %[[J]]]
// CHECK: %[[NEXT:.*]] = arith.addf %[[ACC]], %[[V]]
// CHECK: scf.yield %[[NEXT]]
// CHECK: memref.store %[[SUM]], %[[OUTK]][%c0, %[[J]]]
// CHECK-NOT: atomic_rmw
func.func @fixed_row_sum(%x: memref<64x32xf32>, %out: memref<2x32xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %c64 = arith.constant 64 : index
  scf.for %t = %c0 to %c64 step %c1 {
    scf.for %j = %c0 to %c32 step %c1 {
      %v = memref.load %x[%t, %j] : memref<64x32xf32>
      %old = memref.load %out[%c0, %j] : memref<2x32xf32>
      %new = arith.addf %old, %v : f32
      memref.store %new, %out[%c0, %j] : memref<2x32xf32>
    }
  }
  return
}

// -----

// The same nest adding every term into one element has no loop that picks
// the element: it stays one thread, which keeps the sum in a register
// through both loops (in their order) and stores it once.
// CHECK-LABEL: func.func @one_element_sum(
// CHECK: gpu.launch_func @kiln_kernels::@one_element_sum_k0 blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1)
// CHECK: gpu.func @one_element_sum_k0(%[[XK:.*]]: memref<64x32xf32>, %[[OUTK:.*]]: memref<2x32xf32>) kernel
// CHECK-NOT: gpu.thread_id
// CHECK: %[[INIT:.*]] = memref.load %[[OUTK]][%c0, %c0]
// CHECK: %[[SUM:.*]] = scf.for %[[T:.*]] = %c0 to %c64 step %c1 iter_args(%[[ACC:.*]] = %[[INIT]]) -> (f32)
// CHECK: %[[ROW:.*]] = scf.for %[[J:.*]] = %c0 to %c32 step %c1 iter_args(%[[ACC2:.*]] = %[[ACC]]) -> (f32)
// CHECK: %[[V:.*]] = memref.load %[[XK]][%[[T]], %[[J]]]
// CHECK: %[[NEXT:.*]] = arith.addf %[[ACC2]], %[[V]]
// CHECK: scf.yield %[[NEXT]]
// CHECK: scf.yield %[[ROW]]
// CHECK: memref.store %[[SUM]], %[[OUTK]][%c0, %c0]
// CHECK-NOT: memref.store
func.func @one_element_sum(%x: memref<64x32xf32>, %out: memref<2x32xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %c64 = arith.constant 64 : index
  scf.for %t = %c0 to %c64 step %c1 {
    scf.for %j = %c0 to %c32 step %c1 {
      %v = memref.load %x[%t, %j] : memref<64x32xf32>
      %old = memref.load %out[%c0, %c0] : memref<2x32xf32>
      %new = arith.addf %old, %v : f32
      memref.store %new, %out[%c0, %c0] : memref<2x32xf32>
    }
  }
  return
}

// -----

// A loop the lowering wrote as parallel (kiln-attention-kernel's, after
// bufferization) is a kernel with a thread per point; the label its
// location carries (kiln.kernel.LABEL) ends the kernel's name.
// CHECK-LABEL: func.func @labelled(
// CHECK: gpu.launch_func @kiln_kernels::@labelled_k0_attention blocks in (%c1, %c1, %c1) threads in (%c6, %c1, %c1)
// CHECK: gpu.func @labelled_k0_attention(
// CHECK: gpu.block_id x
// CHECK: gpu.thread_id x
func.func @labelled(%x: memref<2x3xf32>, %out: memref<2x3xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  scf.parallel (%i, %j) = (%c0, %c0) to (%c2, %c3) step (%c1, %c1) {
    %v = memref.load %x[%i, %j] : memref<2x3xf32>
    %w = arith.addf %v, %v : f32
    memref.store %w, %out[%i, %j] : memref<2x3xf32>
  } loc(fused<"kiln.kernel.attention">["labelled.mlir":1:1])
  return
}

// -----

// A reduction whose output was filled just before starts each element's
// sum from the fill's value (-inf for a maximum) instead of reading it back,
// and the fill is no kernel: one launch. Where something else comes between
// (here a kernel reading the filled buffer), the fill stays a kernel.
// CHECK-LABEL: func.func @filled_reduction(
// CHECK: gpu.launch_func @kiln_kernels::@filled_reduction_k0
// CHECK-NOT: gpu.launch_func
// CHECK: return
// CHECK-LABEL: func.func @fill_read_between(
// CHECK-COUNT-3: gpu.launch_func
// CHECK-NOT: gpu.launch_func
// CHECK: gpu.func @filled_reduction_k0(%[[X:.*]]: memref<4x8xf32>, %[[M:.*]]: memref<4xf32>) kernel
// CHECK: scf.if
// CHECK-NOT: memref.load %[[M]]
// CHECK: %[[NEG:.*]] = arith.constant 0xFF800000 : f32
// CHECK-NEXT: %[[MAX:.*]] = scf.for %{{.*}} iter_args(%[[ACC:.*]] = %[[NEG]]) -> (f32)
// CHECK: arith.maximumf %[[ACC]], %{{.*}} : f32
// CHECK: memref.store %[[MAX]], %[[M]]
func.func @filled_reduction(%x: memref<4x8xf32>, %m: memref<4xf32>) {
  %neg = arith.constant 0xFF800000 : f32
  linalg.fill ins(%neg : f32) outs(%m : memref<4xf32>)
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>], iterator_types = ["parallel", "reduction"]} ins(%x : memref<4x8xf32>) outs(%m : memref<4xf32>) {
  ^bb0(%v: f32, %o: f32):
    %r = arith.maximumf %o, %v : f32
    linalg.yield %r : f32
  }
  return
}

func.func @fill_read_between(%x: memref<4x8xf32>, %m: memref<4xf32>, %y: memref<4xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%m : memref<4xf32>)
  linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]} ins(%m : memref<4xf32>) outs(%y : memref<4xf32>) {
  ^bb0(%v: f32, %o: f32):
    %e = math.exp %v : f32
    linalg.yield %e : f32
  }
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>], iterator_types = ["parallel", "reduction"]} ins(%x : memref<4x8xf32>) outs(%m : memref<4xf32>) {
  ^bb0(%v: f32, %o: f32):
    %r = arith.addf %o, %v : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// A reduction with two outputs (kiln-merge-sibling-reductions), each
// filled just before it: both sums start from their fill's value in a
// register, and neither fill launches a kernel.
// CHECK-LABEL: func.func @two_sums(
// CHECK-NOT: linalg.fill
// CHECK: gpu.launch_func @kiln_kernels::@two_sums_k0
// CHECK-NOT: gpu.launch_func
// CHECK: return
// CHECK: gpu.func @two_sums_k0(%[[X:.*]]: memref<8x4xf32>, %[[A:.*]]: memref<4xf32>, %[[B:.*]]: memref<4xf32>) kernel
// CHECK-NOT: memref.load %[[A]]
// CHECK-NOT: memref.load %[[B]]
// CHECK: %[[SUMS:.*]]:2 = scf.for %{{.*}} iter_args(%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) -> (f32, f32)
// CHECK-DAG: memref.store %[[SUMS]]#{{[01]}}, %[[A]]
// CHECK-DAG: memref.store %[[SUMS]]#{{[01]}}, %[[B]]
func.func @two_sums(%x: memref<8x4xf32>, %a: memref<4xf32>, %b: memref<4xf32>) {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  linalg.fill ins(%zero : f32) outs(%a : memref<4xf32>)
  linalg.fill ins(%one : f32) outs(%b : memref<4xf32>)
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (j)>], iterator_types = ["reduction", "parallel"]} ins(%x : memref<8x4xf32>) outs(%a, %b : memref<4xf32>, memref<4xf32>) {
  ^bb0(%v: f32, %s: f32, %p: f32):
    %r = arith.addf %s, %v : f32
    %q = arith.mulf %p, %v : f32
    linalg.yield %r, %q : f32, f32
  }
  return
}

// -----

// A product with a bias-gradient output that cuBLASLt cannot take with its
// epilogue (here the vector's zero fill is not just before it: a kernel
// comes between) is the product and the sum again: the product goes to the
// library, the sum is a kernel of a thread per element of the vector, not
// one per element of the product (each would write its column's sum).
// CHECK-LABEL: func.func @bias_grad_split(
// CHECK-SAME: %[[DY:[a-z0-9]+]]: memref<8x6xf32>, %[[X:[a-z0-9]+]]: memref<8x5xf32>, %[[DW:[a-z0-9]+]]: memref<6x5xf32>, %[[DB:[a-z0-9]+]]: memref<6xf32>, %[[Y:[a-z0-9]+]]: memref<4xf32>
// (The sum starts from the vector's fill, which launches nothing.)
// CHECK: gpu.launch_func @kiln_kernels::@bias_grad_split_k0 {{.*}} args(%[[Y]] : memref<4xf32>)
// CHECK-NEXT: linalg.generic {{.*}} ins(%[[DY]], %[[X]] : {{.*}}) outs(%[[DW]] : memref<6x5xf32>) attrs = {kiln.matmul = {overwrite, transpose_lhs}}
// CHECK: gpu.launch_func @kiln_kernels::@bias_grad_split_k1 blocks in (%c1, %c1, %c1) threads in (%c6, %c1, %c1) args(%[[DY]] : memref<8x6xf32>, %[[DB]] : memref<6xf32>)
// CHECK-NOT: gpu.launch_func
// CHECK-NOT: bias_grad,
#at = affine_map<(d0, d1, d2) -> (d2, d0)>
#b = affine_map<(d0, d1, d2) -> (d2, d1)>
#c = affine_map<(d0, d1, d2) -> (d0, d1)>
#v = affine_map<(d0, d1, d2) -> (d0)>
func.func @bias_grad_split(%dy: memref<8x6xf32>, %x: memref<8x5xf32>, %dw: memref<6x5xf32>, %db: memref<6xf32>, %y: memref<4xf32>) {
  %zero = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : index
  linalg.fill ins(%zero : f32) outs(%db : memref<6xf32>)
  linalg.fill ins(%zero : f32) outs(%y : memref<4xf32>)
  linalg.fill ins(%zero : f32) outs(%dw : memref<6x5xf32>)
  linalg.generic {indexing_maps = [#at, #b, #c, #v], iterator_types = ["parallel", "parallel", "reduction"], kiln.matmul = {bias_grad, bias_grad_of_lhs, transpose_lhs}} ins(%dy, %x : memref<8x6xf32>, memref<8x5xf32>) outs(%dw, %db : memref<6x5xf32>, memref<6xf32>) {
  ^bb0(%l: f32, %r: f32, %acc: f32, %vacc: f32):
    %m = arith.mulf %l, %r : f32
    %s = arith.addf %acc, %m : f32
    %i = linalg.index 1 : index
    %first = arith.cmpi eq, %i, %c0 : index
    %t = arith.select %first, %l, %zero : f32
    %vs = arith.addf %vacc, %t : f32
    linalg.yield %s, %vs : f32, f32
  }
  return
}
