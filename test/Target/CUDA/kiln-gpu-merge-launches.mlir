// RUN: kiln-opt %s --kiln-gpu-merge-launches --split-input-file | FileCheck %s

// Two kernels on different buffers launch as one: block b < 4 runs the
// first, 4 <= b < 6 the second as its block b - 4. The thread id is read
// once; the block size and grid size each member asked for are constants.
// The members' kernels go.

// CHECK-LABEL: func.func @independent
// CHECK-DAG: %[[C6:.*]] = arith.constant 6 : index
// CHECK-DAG: %[[C256:.*]] = arith.constant 256 : index
// CHECK-DAG: %[[C1:.*]] = arith.constant 1 : index
// CHECK: gpu.launch_func @kiln_kernels::@independent_m0 blocks in (%[[C6]], %[[C1]], %[[C1]]) threads in (%[[C256]], %[[C1]], %[[C1]]) args(%arg0 : memref<1024xf32>, %arg1 : memref<1024xf32>, %arg2 : memref<512xf32>, %arg3 : memref<512xf32>)
// CHECK-NOT: gpu.launch_func
// CHECK: return
// CHECK-NOT: gpu.func @double
// CHECK-NOT: gpu.func @square
// CHECK: gpu.func @independent_m0(%[[A:.*]]: memref<1024xf32>, %[[B:.*]]: memref<1024xf32>, %[[C:.*]]: memref<512xf32>, %[[D:.*]]: memref<512xf32>) kernel
// CHECK: %[[BLOCK:.*]] = gpu.block_id x
// CHECK: %[[THREAD:.*]] = gpu.thread_id x
// CHECK: %[[FIRST:.*]] = arith.cmpi ult, %[[BLOCK]], %{{.*}}
// CHECK: scf.if %[[FIRST]] {
// CHECK: arith.muli %[[BLOCK]]
// CHECK: arith.addi %{{.*}}, %[[THREAD]]
// CHECK: memref.load %[[A]]
// CHECK: memref.store %{{.*}}, %[[B]]
// CHECK: }
// CHECK: %[[BELOW:.*]] = arith.cmpi ult, %[[BLOCK]], %{{.*}}
// CHECK: %[[ABOVE:.*]] = arith.cmpi uge, %[[BLOCK]], %{{.*}}
// CHECK: %[[SECOND:.*]] = arith.andi %[[BELOW]], %[[ABOVE]]
// CHECK: scf.if %[[SECOND]] {
// CHECK: %[[OWN:.*]] = arith.subi %[[BLOCK]], %{{.*}}
// CHECK: arith.muli %[[OWN]]
// CHECK: arith.addi %{{.*}}, %[[THREAD]]
// CHECK: memref.load %[[C]]
// CHECK: memref.store %{{.*}}, %[[D]]
// CHECK: }
// CHECK: gpu.return
module attributes {gpu.container_module} {
  func.func @independent(%a: memref<1024xf32>, %b: memref<1024xf32>,
                         %c: memref<512xf32>, %d: memref<512xf32>) {
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c4 = arith.constant 4 : index
    %c256 = arith.constant 256 : index
    gpu.launch_func @kiln_kernels::@double blocks in (%c4, %c1, %c1) threads in (%c256, %c1, %c1) args(%a : memref<1024xf32>, %b : memref<1024xf32>)
    gpu.launch_func @kiln_kernels::@square blocks in (%c2, %c1, %c1) threads in (%c256, %c1, %c1) args(%c : memref<512xf32>, %d : memref<512xf32>)
    return
  }
  gpu.module @kiln_kernels {
    gpu.func @double(%x: memref<1024xf32>, %y: memref<1024xf32>) kernel {
      %block = gpu.block_id x
      %thread = gpu.thread_id x
      %size = gpu.block_dim x
      %base = arith.muli %block, %size : index
      %i = arith.addi %base, %thread : index
      %v = memref.load %x[%i] : memref<1024xf32>
      %w = arith.addf %v, %v : f32
      memref.store %w, %y[%i] : memref<1024xf32>
      gpu.return
    }
    gpu.func @square(%x: memref<512xf32>, %y: memref<512xf32>) kernel {
      %block = gpu.block_id x
      %thread = gpu.thread_id x
      %c256 = arith.constant 256 : index
      %base = arith.muli %block, %c256 : index
      %i = arith.addi %base, %thread : index
      %v = memref.load %x[%i] : memref<512xf32>
      %w = arith.mulf %v, %v : f32
      memref.store %w, %y[%i] : memref<512xf32>
      gpu.return
    }
  }
}

// -----

// Kernels that depend on each other stay apart: the second reads what the
// first writes; the third writes what the second reads; the fourth runs
// 1024 blocks of another size, half of whose threads would be idle in the
// third's blocks. Nothing is merged, and every kernel stays.

// CHECK-LABEL: func.func @dependent
// CHECK: gpu.launch_func @kiln_kernels::@copy blocks in ({{.*}}) threads in ({{.*}}) args(%arg0 : memref<256xf32>, %arg1 : memref<256xf32>)
// CHECK-NEXT: gpu.launch_func @kiln_kernels::@copy blocks in ({{.*}}) threads in ({{.*}}) args(%arg1 : memref<256xf32>, %arg2 : memref<256xf32>)
// CHECK-NEXT: gpu.launch_func @kiln_kernels::@copy blocks in ({{.*}}) threads in ({{.*}}) args(%arg3 : memref<256xf32>, %arg1 : memref<256xf32>)
// CHECK-NEXT: gpu.launch_func @kiln_kernels::@copy blocks in ({{.*}}) threads in ({{.*}}) args(%arg4 : memref<256xf32>, %arg5 : memref<256xf32>)
// CHECK-NOT: _m0
module attributes {gpu.container_module} {
  func.func @dependent(%a: memref<256xf32>, %b: memref<256xf32>,
                       %c: memref<256xf32>, %d: memref<256xf32>,
                       %e: memref<256xf32>, %f: memref<256xf32>) {
    %c1 = arith.constant 1 : index
    %c1024 = arith.constant 1024 : index
    %c128 = arith.constant 128 : index
    %c256 = arith.constant 256 : index
    gpu.launch_func @kiln_kernels::@copy blocks in (%c1, %c1, %c1) threads in (%c256, %c1, %c1) args(%a : memref<256xf32>, %b : memref<256xf32>)
    gpu.launch_func @kiln_kernels::@copy blocks in (%c1, %c1, %c1) threads in (%c256, %c1, %c1) args(%b : memref<256xf32>, %c : memref<256xf32>)
    gpu.launch_func @kiln_kernels::@copy blocks in (%c1, %c1, %c1) threads in (%c256, %c1, %c1) args(%d : memref<256xf32>, %b : memref<256xf32>)
    gpu.launch_func @kiln_kernels::@copy blocks in (%c1024, %c1, %c1) threads in (%c128, %c1, %c1) args(%e : memref<256xf32>, %f : memref<256xf32>)
    return
  }
  gpu.module @kiln_kernels {
    gpu.func @copy(%x: memref<256xf32>, %y: memref<256xf32>) kernel {
      %block = gpu.block_id x
      %thread = gpu.thread_id x
      %size = gpu.block_dim x
      %base = arith.muli %block, %size : index
      %i = arith.addi %base, %thread : index
      %v = memref.load %x[%i] : memref<256xf32>
      memref.store %v, %y[%i] : memref<256xf32>
      gpu.return
    }
  }
}

// -----

// Arena slots are compared by their bytes. The second launch writes a slot
// that the first reads only around (bytes 1024 to 2048), so it joins it; the
// third reads bytes the first writes, so it starts a group. A launch joins
// the earliest group it can reach: the fifth moves up past a product on
// other buffers, a launch of 1024 blocks of another size (which would leave
// half the merged threads idle) and the third's group to join the first
// (its slot's view moves up with it). The sixth reads what the all-reduce
// before it averages, so it waits for that alone and stays; the seventh
// passes both but reads what the first writes, so it joins the third's
// group. The eighth reads what the product writes, so it stays after the
// product.

// CHECK-LABEL: func.func @slots
// CHECK-DAG: %[[S0:.*]] = memref.view %arg0[%{{.*}}][] : memref<8192xi8> to memref<256xf32>
// CHECK-DAG: %[[S1:.*]] = memref.view %arg0[%{{.*}}][] : memref<8192xi8> to memref<256xf32>
// CHECK-DAG: %[[S2:.*]] = memref.view %arg0[%{{.*}}][] : memref<8192xi8> to memref<256xf32>
// CHECK-DAG: %[[S5:.*]] = memref.view %arg0[%{{.*}}][] : memref<8192xi8> to memref<256xf32>
// CHECK: gpu.launch_func @kiln_kernels::@slots_m0 blocks in ({{.*}}) threads in ({{.*}}) args(%[[S0]] : memref<256xf32>, %[[S2]] : memref<256xf32>, %arg1 : memref<256xf32>, %[[S1]] : memref<256xf32>, %[[S5]] : memref<256xf32>)
// CHECK: gpu.launch_func @kiln_kernels::@slots_m1 blocks in ({{.*}}) threads in ({{.*}}) args(%[[S2]] : memref<256xf32>, %arg2 : memref<256xf32>, %arg8 : memref<256xf32>)
// CHECK-NEXT: gpu.launch_func @kiln_kernels::@copy blocks in ({{.*}}) threads in (%c128{{.*}}) args(%arg3 : memref<256xf32>, %arg4 : memref<256xf32>)
// CHECK-NEXT: linalg.matmul
// CHECK-NEXT: kiln.all_reduce_mean %arg6
// CHECK-NEXT: gpu.launch_func @kiln_kernels::@copy blocks in ({{.*}}) threads in ({{.*}}) args(%arg6 : memref<256xf32>, %arg7 : memref<256xf32>)
// CHECK-NEXT: gpu.launch_func @kiln_kernels::@read_matrix blocks in ({{.*}}) threads in ({{.*}}) args(%arg5 : memref<4x4xf32>, %arg9 : memref<16xf32>)
// CHECK-NEXT: return
// CHECK: gpu.func @copy
// CHECK: gpu.func @read_matrix
// CHECK: gpu.func @slots_m0
// CHECK: gpu.func @slots_m1
module attributes {gpu.container_module} {
  func.func @slots(%arena: memref<8192xi8>, %in: memref<256xf32>,
                   %out: memref<256xf32>, %p: memref<256xf32>,
                   %q: memref<256xf32>, %m: memref<4x4xf32>,
                   %reduced: memref<256xf32>, %r: memref<256xf32>,
                   %t: memref<256xf32>, %flat: memref<16xf32>) {
    %c1 = arith.constant 1 : index
    %c128 = arith.constant 128 : index
    %c256 = arith.constant 256 : index
    %c1024 = arith.constant 1024 : index
    %b0 = arith.constant 0 : index
    %b1024 = arith.constant 1024 : index
    %b2048 = arith.constant 2048 : index
    %s0 = memref.view %arena[%b0][] : memref<8192xi8> to memref<256xf32>
    %s1 = memref.view %arena[%b1024][] : memref<8192xi8> to memref<256xf32>
    %s2 = memref.view %arena[%b2048][] : memref<8192xi8> to memref<256xf32>
    // Reads bytes [0, 1024), writes [2048, 3072).
    gpu.launch_func @kiln_kernels::@copy blocks in (%c1, %c1, %c1) threads in (%c256, %c1, %c1) args(%s0 : memref<256xf32>, %s2 : memref<256xf32>)
    // Writes [1024, 2048).
    gpu.launch_func @kiln_kernels::@copy blocks in (%c1, %c1, %c1) threads in (%c256, %c1, %c1) args(%in : memref<256xf32>, %s1 : memref<256xf32>)
    // Reads [2048, 3072).
    gpu.launch_func @kiln_kernels::@copy blocks in (%c1, %c1, %c1) threads in (%c256, %c1, %c1) args(%s2 : memref<256xf32>, %out : memref<256xf32>)
    gpu.launch_func @kiln_kernels::@copy blocks in (%c1024, %c1, %c1) threads in (%c128, %c1, %c1) args(%p : memref<256xf32>, %q : memref<256xf32>)
    linalg.matmul ins(%m, %m : memref<4x4xf32>, memref<4x4xf32>) outs(%m : memref<4x4xf32>)
    %b4096 = arith.constant 4096 : index
    %s5 = memref.view %arena[%b4096][] : memref<8192xi8> to memref<256xf32>
    gpu.launch_func @kiln_kernels::@copy blocks in (%c1, %c1, %c1) threads in (%c256, %c1, %c1) args(%in : memref<256xf32>, %s5 : memref<256xf32>)
    kiln.all_reduce_mean %reduced : memref<256xf32>
    gpu.launch_func @kiln_kernels::@copy blocks in (%c1, %c1, %c1) threads in (%c256, %c1, %c1) args(%reduced : memref<256xf32>, %r : memref<256xf32>)
    gpu.launch_func @kiln_kernels::@copy blocks in (%c1, %c1, %c1) threads in (%c256, %c1, %c1) args(%s2 : memref<256xf32>, %t : memref<256xf32>)
    gpu.launch_func @kiln_kernels::@read_matrix blocks in (%c1, %c1, %c1) threads in (%c256, %c1, %c1) args(%m : memref<4x4xf32>, %flat : memref<16xf32>)
    return
  }
  gpu.module @kiln_kernels {
    gpu.func @copy(%x: memref<256xf32>, %y: memref<256xf32>) kernel {
      %block = gpu.block_id x
      %thread = gpu.thread_id x
      %size = gpu.block_dim x
      %base = arith.muli %block, %size : index
      %i = arith.addi %base, %thread : index
      %v = memref.load %x[%i] : memref<256xf32>
      memref.store %v, %y[%i] : memref<256xf32>
      gpu.return
    }
    gpu.func @read_matrix(%x: memref<4x4xf32>, %y: memref<16xf32>) kernel {
      %thread = gpu.thread_id x
      %c0 = arith.constant 0 : index
      %v = memref.load %x[%c0, %c0] : memref<4x4xf32>
      memref.store %v, %y[%thread] : memref<16xf32>
      gpu.return
    }
  }
}

// -----

// A kernel another entry still launches on its own stays; a merged kernel
// with the same body as an earlier one is that one.

// CHECK-LABEL: func.func @first
// CHECK: gpu.launch_func @kiln_kernels::@first_m0
// CHECK-LABEL: func.func @second
// CHECK: gpu.launch_func @kiln_kernels::@first_m0
// CHECK-LABEL: func.func @third
// CHECK: gpu.launch_func @kiln_kernels::@copy
// CHECK-NOT: second_m
// CHECK: gpu.func @copy
// CHECK: gpu.func @first_m0
// CHECK-NOT: gpu.func
module attributes {gpu.container_module} {
  func.func @first(%a: memref<256xf32>, %b: memref<256xf32>,
                   %c: memref<256xf32>, %d: memref<256xf32>) {
    %c1 = arith.constant 1 : index
    %c256 = arith.constant 256 : index
    gpu.launch_func @kiln_kernels::@copy blocks in (%c1, %c1, %c1) threads in (%c256, %c1, %c1) args(%a : memref<256xf32>, %b : memref<256xf32>)
    gpu.launch_func @kiln_kernels::@copy blocks in (%c1, %c1, %c1) threads in (%c256, %c1, %c1) args(%c : memref<256xf32>, %d : memref<256xf32>)
    return
  }
  func.func @second(%a: memref<256xf32>, %b: memref<256xf32>,
                    %c: memref<256xf32>, %d: memref<256xf32>) {
    %c1 = arith.constant 1 : index
    %c256 = arith.constant 256 : index
    gpu.launch_func @kiln_kernels::@copy blocks in (%c1, %c1, %c1) threads in (%c256, %c1, %c1) args(%a : memref<256xf32>, %b : memref<256xf32>)
    gpu.launch_func @kiln_kernels::@copy blocks in (%c1, %c1, %c1) threads in (%c256, %c1, %c1) args(%c : memref<256xf32>, %d : memref<256xf32>)
    return
  }
  func.func @third(%a: memref<256xf32>, %b: memref<256xf32>) {
    %c1 = arith.constant 1 : index
    %c256 = arith.constant 256 : index
    gpu.launch_func @kiln_kernels::@copy blocks in (%c1, %c1, %c1) threads in (%c256, %c1, %c1) args(%a : memref<256xf32>, %b : memref<256xf32>)
    return
  }
  gpu.module @kiln_kernels {
    gpu.func @copy(%x: memref<256xf32>, %y: memref<256xf32>) kernel {
      %block = gpu.block_id x
      %thread = gpu.thread_id x
      %size = gpu.block_dim x
      %base = arith.muli %block, %size : index
      %i = arith.addi %base, %thread : index
      %v = memref.load %x[%i] : memref<256xf32>
      memref.store %v, %y[%i] : memref<256xf32>
      gpu.return
    }
  }
}

// -----

// Kernels that reach a buffer only through subviews at constant offsets
// touch only those boxes of it: the query's and the key's gradients
// written into their columns of one [4, 96] buffer are apart and merge.
// The value's columns overlap the key's by one, so it stays; so does a
// kernel that stores to the buffer directly.

// CHECK-LABEL: func.func @columns
// CHECK: gpu.launch_func @kiln_kernels::@columns_m0 blocks in ({{.*}}) threads in ({{.*}}) args(%arg0 : memref<4x32xf32>, %arg3 : memref<4x96xf32>, %arg1 : memref<4x32xf32>)
// CHECK-NEXT: gpu.launch_func @kiln_kernels::@value
// CHECK-NEXT: gpu.launch_func @kiln_kernels::@whole
// CHECK-NEXT: return
module attributes {gpu.container_module} {
  func.func @columns(%q: memref<4x32xf32>, %k: memref<4x32xf32>,
                     %v: memref<4x32xf32>, %qkv: memref<4x96xf32>) {
    %c1 = arith.constant 1 : index
    %c128 = arith.constant 128 : index
    gpu.launch_func @kiln_kernels::@query blocks in (%c1, %c1, %c1) threads in (%c128, %c1, %c1) args(%q : memref<4x32xf32>, %qkv : memref<4x96xf32>)
    gpu.launch_func @kiln_kernels::@key blocks in (%c1, %c1, %c1) threads in (%c128, %c1, %c1) args(%k : memref<4x32xf32>, %qkv : memref<4x96xf32>)
    gpu.launch_func @kiln_kernels::@value blocks in (%c1, %c1, %c1) threads in (%c128, %c1, %c1) args(%v : memref<4x32xf32>, %qkv : memref<4x96xf32>)
    gpu.launch_func @kiln_kernels::@whole blocks in (%c1, %c1, %c1) threads in (%c128, %c1, %c1) args(%v : memref<4x32xf32>, %qkv : memref<4x96xf32>)
    return
  }
  gpu.module @kiln_kernels {
    gpu.func @query(%x: memref<4x32xf32>, %y: memref<4x96xf32>) kernel {
      %thread = gpu.thread_id x
      %c0 = arith.constant 0 : index
      %part = memref.subview %y[0, 0] [4, 32] [1, 1] : memref<4x96xf32> to memref<4x32xf32, strided<[96, 1]>>
      %v = memref.load %x[%c0, %thread] : memref<4x32xf32>
      memref.store %v, %part[%c0, %thread] : memref<4x32xf32, strided<[96, 1]>>
      gpu.return
    }
    gpu.func @key(%x: memref<4x32xf32>, %y: memref<4x96xf32>) kernel {
      %thread = gpu.thread_id x
      %c0 = arith.constant 0 : index
      %part = memref.subview %y[0, 32] [4, 32] [1, 1] : memref<4x96xf32> to memref<4x32xf32, strided<[96, 1], offset: 32>>
      %rows = memref.expand_shape %part [[0], [1, 2]] output_shape [4, 2, 16] : memref<4x32xf32, strided<[96, 1], offset: 32>> into memref<4x2x16xf32, strided<[96, 16, 1], offset: 32>>
      %v = memref.load %x[%c0, %thread] : memref<4x32xf32>
      memref.store %v, %rows[%c0, %c0, %thread] : memref<4x2x16xf32, strided<[96, 16, 1], offset: 32>>
      gpu.return
    }
    gpu.func @value(%x: memref<4x32xf32>, %y: memref<4x96xf32>) kernel {
      %thread = gpu.thread_id x
      %c0 = arith.constant 0 : index
      %part = memref.subview %y[0, 63] [4, 32] [1, 1] : memref<4x96xf32> to memref<4x32xf32, strided<[96, 1], offset: 63>>
      %v = memref.load %x[%c0, %thread] : memref<4x32xf32>
      memref.store %v, %part[%c0, %thread] : memref<4x32xf32, strided<[96, 1], offset: 63>>
      gpu.return
    }
    gpu.func @whole(%x: memref<4x32xf32>, %y: memref<4x96xf32>) kernel {
      %thread = gpu.thread_id x
      %c0 = arith.constant 0 : index
      %c95 = arith.constant 95 : index
      %v = memref.load %x[%c0, %thread] : memref<4x32xf32>
      memref.store %v, %y[%c0, %c95] : memref<4x96xf32>
      gpu.return
    }
  }
}

// -----

// Kernels of different block sizes merge into blocks of the largest size:
// a member of smaller blocks runs on its own threads alone, and its block
// size is its own. The grid of 1 + 2 blocks is small, so a quarter of its
// threads may be idle and more; the 1000 blocks of 256 threads and 4 of 128
// merge too, as little of that grid idles. The last launch, 512 blocks of
// 64 threads, would leave most threads of the 1004-block grid idle, and
// stays.

// CHECK-LABEL: func.func @mixed_sizes
// CHECK-DAG: %[[C3:.*]] = arith.constant 3 : index
// CHECK-DAG: %[[C256:.*]] = arith.constant 256 : index
// CHECK: gpu.launch_func @kiln_kernels::@mixed_sizes_m0 blocks in (%[[C3]], %{{.*}}, %{{.*}}) threads in (%[[C256]], %{{.*}}, %{{.*}}) args(%arg0 : memref<256xf32>, %arg1 : memref<256xf32>, %arg2 : memref<256xf32>, %arg3 : memref<256xf32>)
// CHECK: %[[C1004:.*]] = arith.constant 1004 : index
// CHECK: gpu.launch_func @kiln_kernels::@mixed_sizes_m1 blocks in (%[[C1004]], %{{.*}}, %{{.*}}) threads in (%{{.*}}, %{{.*}}, %{{.*}}) args(%arg1 : memref<256xf32>, %arg4 : memref<256xf32>, %arg3 : memref<256xf32>, %arg5 : memref<256xf32>)
// CHECK-NEXT: gpu.launch_func @kiln_kernels::@copy blocks in ({{.*}}) threads in (%c64{{.*}}) args(%arg2 : memref<256xf32>, %arg6 : memref<256xf32>)
// CHECK-NEXT: return
// CHECK: gpu.func @mixed_sizes_m0(%[[A:.*]]: memref<256xf32>, %[[B:.*]]: memref<256xf32>, %[[C:.*]]: memref<256xf32>, %[[D:.*]]: memref<256xf32>) kernel
// CHECK: %[[BLOCK:.*]] = gpu.block_id x
// CHECK: %[[THREAD:.*]] = gpu.thread_id x
// CHECK: %[[INSIDE:.*]] = arith.cmpi ult, %[[BLOCK]], %{{.*}}
// CHECK: %[[OWN_THREADS:.*]] = arith.cmpi ult, %[[THREAD]], %[[C32:.*]] : index
// CHECK: %[[FIRST:.*]] = arith.andi %[[INSIDE]], %[[OWN_THREADS]]
// CHECK: scf.if %[[FIRST]] {
// CHECK: arith.muli %[[BLOCK]], %{{.*}}
// CHECK: memref.load %[[A]]
// CHECK: memref.store %{{.*}}, %[[B]]
// CHECK: }
// CHECK: %[[BELOW:.*]] = arith.cmpi ult, %[[BLOCK]], %{{.*}}
// CHECK: %[[ABOVE:.*]] = arith.cmpi uge, %[[BLOCK]], %{{.*}}
// CHECK: %[[SECOND:.*]] = arith.andi %[[BELOW]], %[[ABOVE]]
// CHECK-NEXT: scf.if %[[SECOND]] {
// CHECK: memref.load %[[C]]
// CHECK: memref.store %{{.*}}, %[[D]]
// CHECK: }
// CHECK: gpu.return
module attributes {gpu.container_module} {
  func.func @mixed_sizes(%a: memref<256xf32>, %b: memref<256xf32>,
                         %c: memref<256xf32>, %d: memref<256xf32>,
                         %e: memref<256xf32>, %f: memref<256xf32>,
                         %g: memref<256xf32>) {
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c4 = arith.constant 4 : index
    %c32 = arith.constant 32 : index
    %c64 = arith.constant 64 : index
    %c128 = arith.constant 128 : index
    %c256 = arith.constant 256 : index
    %c512 = arith.constant 512 : index
    %c1000 = arith.constant 1000 : index
    gpu.launch_func @kiln_kernels::@copy blocks in (%c1, %c1, %c1) threads in (%c32, %c1, %c1) args(%a : memref<256xf32>, %b : memref<256xf32>)
    gpu.launch_func @kiln_kernels::@copy blocks in (%c2, %c1, %c1) threads in (%c256, %c1, %c1) args(%c : memref<256xf32>, %d : memref<256xf32>)
    // Each reads what the first group writes.
    gpu.launch_func @kiln_kernels::@copy blocks in (%c1000, %c1, %c1) threads in (%c256, %c1, %c1) args(%b : memref<256xf32>, %e : memref<256xf32>)
    gpu.launch_func @kiln_kernels::@copy blocks in (%c4, %c1, %c1) threads in (%c128, %c1, %c1) args(%d : memref<256xf32>, %f : memref<256xf32>)
    gpu.launch_func @kiln_kernels::@copy blocks in (%c512, %c1, %c1) threads in (%c64, %c1, %c1) args(%c : memref<256xf32>, %g : memref<256xf32>)
    return
  }
  gpu.module @kiln_kernels {
    gpu.func @copy(%x: memref<256xf32>, %y: memref<256xf32>) kernel {
      %block = gpu.block_id x
      %thread = gpu.thread_id x
      %size = gpu.block_dim x
      %base = arith.muli %block, %size : index
      %i = arith.addi %base, %thread : index
      %v = memref.load %x[%i] : memref<256xf32>
      memref.store %v, %y[%i] : memref<256xf32>
      gpu.return
    }
  }
}

// -----

// An output that updates a parameter (kiln.update) is the parameter's
// storage at run time: the second launch writes the bytes the first reads,
// so it neither joins it nor moves above it. The third writes another
// parameter's update and joins the first.

// CHECK-LABEL: func.func @updates_in_place
// CHECK: gpu.launch_func @kiln_kernels::@updates_in_place_m0 {{.*}} args(%arg0 : memref<256xf32>, %arg2 : memref<256xf32>, %arg3 : memref<256xf32>, %arg5 : memref<256xf32>)
// CHECK-NEXT: gpu.launch_func @kiln_kernels::@copy {{.*}} args(%arg3 : memref<256xf32>, %arg4 : memref<256xf32>)
// CHECK-NEXT: return
module attributes {gpu.container_module} {
  func.func @updates_in_place(%w: memref<256xf32> {kiln.param = "w"},
                              %v: memref<256xf32> {kiln.param = "v"},
                              %x: memref<256xf32>, %y: memref<256xf32>,
                              %w_next: memref<256xf32> {kiln.name = "w.next", kiln.update = "w"},
                              %v_next: memref<256xf32> {kiln.name = "v.next", kiln.update = "v"}) {
    %c1 = arith.constant 1 : index
    %c256 = arith.constant 256 : index
    gpu.launch_func @kiln_kernels::@copy blocks in (%c1, %c1, %c1) threads in (%c256, %c1, %c1) args(%w : memref<256xf32>, %x : memref<256xf32>)
    gpu.launch_func @kiln_kernels::@copy blocks in (%c1, %c1, %c1) threads in (%c256, %c1, %c1) args(%y : memref<256xf32>, %w_next : memref<256xf32>)
    gpu.launch_func @kiln_kernels::@copy blocks in (%c1, %c1, %c1) threads in (%c256, %c1, %c1) args(%y : memref<256xf32>, %v_next : memref<256xf32>)
    return
  }
  gpu.module @kiln_kernels {
    gpu.func @copy(%x: memref<256xf32>, %y: memref<256xf32>) kernel {
      %block = gpu.block_id x
      %thread = gpu.thread_id x
      %size = gpu.block_dim x
      %base = arith.muli %block, %size : index
      %i = arith.addi %base, %thread : index
      %v = memref.load %x[%i] : memref<256xf32>
      memref.store %v, %y[%i] : memref<256xf32>
      gpu.return
    }
  }
}

// -----

// Kernels that synchronize their block (an NVVM barrier) or use memory of
// the block (a workgroup buffer) are never merged: a member's guard would
// leave threads out of the barrier. The same launches of @copy would merge.

// CHECK-LABEL: func.func @block_wide
// CHECK: gpu.launch_func @kiln_kernels::@synced
// CHECK-NEXT: gpu.launch_func @kiln_kernels::@shared
// CHECK-NEXT: gpu.launch_func @kiln_kernels::@synced
// CHECK-NEXT: return
module attributes {gpu.container_module} {
  func.func @block_wide(%a: memref<256xf32>, %b: memref<256xf32>,
                        %c: memref<256xf32>, %d: memref<256xf32>,
                        %e: memref<256xf32>, %f: memref<256xf32>) {
    %c1 = arith.constant 1 : index
    %c256 = arith.constant 256 : index
    gpu.launch_func @kiln_kernels::@synced blocks in (%c1, %c1, %c1) threads in (%c256, %c1, %c1) args(%a : memref<256xf32>, %b : memref<256xf32>)
    gpu.launch_func @kiln_kernels::@shared blocks in (%c1, %c1, %c1) threads in (%c256, %c1, %c1) args(%c : memref<256xf32>, %d : memref<256xf32>)
    gpu.launch_func @kiln_kernels::@synced blocks in (%c1, %c1, %c1) threads in (%c256, %c1, %c1) args(%e : memref<256xf32>, %f : memref<256xf32>)
    return
  }
  gpu.module @kiln_kernels {
    gpu.func @synced(%x: memref<256xf32>, %y: memref<256xf32>) kernel {
      %thread = gpu.thread_id x
      %v = memref.load %x[%thread] : memref<256xf32>
      nvvm.barrier0
      memref.store %v, %y[%thread] : memref<256xf32>
      gpu.return
    }
    gpu.func @shared(%x: memref<256xf32>, %y: memref<256xf32>) kernel {
      %thread = gpu.thread_id x
      %tile = memref.alloca() : memref<256xf32, #gpu.address_space<workgroup>>
      %v = memref.load %x[%thread] : memref<256xf32>
      memref.store %v, %tile[%thread] : memref<256xf32, #gpu.address_space<workgroup>>
      %w = memref.load %tile[%thread] : memref<256xf32, #gpu.address_space<workgroup>>
      memref.store %w, %y[%thread] : memref<256xf32>
      gpu.return
    }
  }
}
