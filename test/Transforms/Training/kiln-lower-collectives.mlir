// RUN: kiln-opt %s --kiln-lower-collectives --split-input-file --verify-diagnostics | FileCheck %s

// Each buffer's reduction starts where the op was and is waited for just
// before the first later op that touches the buffer: the kernel on %other
// runs in between; the one reading a view of %grad waits for it, and the
// library call reading %bias through a pointer waits for that one.
// CHECK-DAG: func.func private @kiln_collective_all_reduce_mean_f32_begin(!llvm.ptr, i64) -> i64
// CHECK-DAG: func.func private @kiln_collective_wait(i64)
// CHECK-LABEL: func.func @step(
// CHECK-SAME: %[[GRAD:[a-z0-9]+]]: memref<4x4xf32>, %[[BIAS:[a-z0-9]+]]: memref<4xf32>, %[[OTHER:[a-z0-9]+]]: memref<4xf32>
// CHECK: %[[P:.*]] = memref.extract_aligned_pointer_as_index %[[GRAD]]
// CHECK: %[[C16:.*]] = arith.constant 16 : i64
// CHECK: %[[R0:.*]] = call @kiln_collective_all_reduce_mean_f32_begin(%{{.*}}, %[[C16]]) : (!llvm.ptr, i64) -> i64
// CHECK: memref.extract_aligned_pointer_as_index %[[BIAS]]
// CHECK: %[[R1:.*]] = call @kiln_collective_all_reduce_mean_f32_begin(%{{.*}}, %{{.*}}) : (!llvm.ptr, i64) -> i64
// CHECK-NEXT: linalg.fill {{.*}} outs(%[[OTHER]]
// CHECK-NEXT: %[[FLAT:.*]] = memref.collapse_shape %[[GRAD]]
// CHECK-NEXT: call @kiln_collective_wait(%[[R0]]) : (i64) -> ()
// CHECK-NEXT: linalg.generic {{.*}} outs(%[[FLAT]]
// CHECK: memref.extract_aligned_pointer_as_index %[[BIAS]]
// CHECK: call @kiln_collective_wait(%[[R1]]) : (i64) -> ()
// CHECK-NEXT: call @library
func.func private @library(!llvm.ptr)
func.func @step(%grad: memref<4x4xf32>, %bias: memref<4xf32>, %other: memref<4xf32>) {
  %zero = arith.constant 0.0 : f32
  kiln.all_reduce_mean %grad, %bias : memref<4x4xf32>, memref<4xf32>
  linalg.fill ins(%zero : f32) outs(%other : memref<4xf32>)
  %flat = memref.collapse_shape %grad [[0, 1]] : memref<4x4xf32> into memref<16xf32>
  linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} outs(%flat : memref<16xf32>) {
  ^bb0(%o: f32):
    %s = arith.addf %o, %o : f32
    linalg.yield %s : f32
  }
  %i = memref.extract_aligned_pointer_as_index %bias : memref<4xf32> -> index
  %i64 = arith.index_cast %i : index to i64
  %p = llvm.inttoptr %i64 : i64 to !llvm.ptr
  call @library(%p) : (!llvm.ptr) -> ()
  return
}

// -----

func.func @tensors(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{must be bufferized before kiln-lower-collectives}}
  %y = kiln.all_reduce_mean %x : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// The sharded optimizer's collectives: each starts where the op was (input,
// output, shard elements, ranks) and is waited for before the first later
// op touching its input or its output; a local shard is one call.
// CHECK-DAG: func.func private @kiln_collective_reduce_scatter_mean_f32_begin(!llvm.ptr, !llvm.ptr, i64, i64) -> i64
// CHECK-DAG: func.func private @kiln_collective_all_gather_f32_begin(!llvm.ptr, !llvm.ptr, i64, i64) -> i64
// CHECK-DAG: func.func private @kiln_collective_local_shard_f32(!llvm.ptr, !llvm.ptr, i64, i64)
// CHECK-LABEL: func.func @sharded(
// CHECK-SAME: %[[FLAT:[a-z0-9]+]]: memref<12xf32>, %[[SHARD:[a-z0-9]+]]: memref<4xf32>, %[[OTHER:[a-z0-9]+]]: memref<4xf32>, %[[PARAM:[a-z0-9]+]]: memref<4xf32>, %[[WHOLE:[a-z0-9]+]]: memref<12xf32>
// CHECK: %[[C4:.*]] = arith.constant 4 : i64
// CHECK: %[[C3:.*]] = arith.constant 3 : i64
// CHECK: %[[RS:.*]] = call @kiln_collective_reduce_scatter_mean_f32_begin(%{{.*}}, %{{.*}}, %[[C4]], %[[C3]])
// CHECK-NEXT: linalg.fill {{.*}} outs(%[[OTHER]]
// CHECK: call @kiln_collective_local_shard_f32(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (!llvm.ptr, !llvm.ptr, i64, i64) -> ()
// CHECK-NEXT: call @kiln_collective_wait(%[[RS]])
// CHECK-NEXT: linalg.fill {{.*}} outs(%[[SHARD]]
// CHECK: %[[AG:.*]] = call @kiln_collective_all_gather_f32_begin(
// CHECK-NEXT: call @kiln_collective_wait(%[[AG]])
// CHECK-NEXT: linalg.fill {{.*}} outs(%[[WHOLE]]
func.func @sharded(%flat: memref<12xf32>, %shard: memref<4xf32>, %other: memref<4xf32>, %param: memref<4xf32>, %whole: memref<12xf32>) {
  %zero = arith.constant 0.0 : f32
  kiln.reduce_scatter_mean %flat, %shard {ranks = 3 : i64} : (memref<12xf32>, memref<4xf32>) -> ()
  linalg.fill ins(%zero : f32) outs(%other : memref<4xf32>)
  kiln.local_shard %whole, %param {ranks = 3 : i64} : (memref<12xf32>, memref<4xf32>) -> ()
  linalg.fill ins(%zero : f32) outs(%shard : memref<4xf32>)
  kiln.all_gather %param, %whole {ranks = 3 : i64} : (memref<4xf32>, memref<12xf32>) -> ()
  linalg.fill ins(%zero : f32) outs(%whole : memref<12xf32>)
  return
}
