// RUN: kiln-opt %s --kiln-gpu-outline-kernels --kiln-gpu-emulate --split-input-file --verify-diagnostics | FileCheck %s

// A launch of 2 blocks of 256 threads becomes two loops calling the kernel,
// now a private host function taking the block and thread index first; the
// gpu.module (with the copy of the constant it read) is gone.
// CHECK-NOT: gpu.container_module
// CHECK: memref.global "private" constant @scale
// CHECK-LABEL: func.func @step(
// CHECK-SAME: %[[X:[a-z0-9]+]]: memref<300xf32>, %[[Y:[a-z0-9]+]]: memref<300xf32>
// CHECK: scf.for %[[B:.*]] = %{{.*}} to %{{.*}} step
// CHECK: scf.for %[[T:.*]] = %{{.*}} to %{{.*}} step
// CHECK: func.call @emulated_step_k0(%[[B]], %[[T]], %[[X]], %[[Y]])
// CHECK-NOT: gpu.
// CHECK: func.func private @emulated_step_k0(%[[BI:.*]]: index, %[[TI:.*]]: index, %{{.*}}: memref<300xf32>, %{{.*}}: memref<300xf32>)
// CHECK: memref.get_global @scale
// CHECK: %[[BASE:.*]] = arith.muli %[[BI]], %{{.*}} : index
// CHECK: arith.addi %[[BASE]], %[[TI]] : index
// CHECK: scf.if
// CHECK: return
// CHECK-NOT: gpu.module
memref.global "private" constant @scale : memref<f32> = dense<3.0>
func.func @step(%x: memref<300xf32>, %y: memref<300xf32>) {
  %s = memref.get_global @scale : memref<f32>
  linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> ()>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%x, %s : memref<300xf32>, memref<f32>) outs(%y : memref<300xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    linalg.yield %m : f32
  }
  return
}

// -----

// Only what kiln-gpu-outline-kernels writes can be emulated: launches along
// x, kernels reading the x indices.
module attributes {gpu.container_module} {
  func.func @two_d(%x: memref<4xf32>) {
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    // expected-error @+1 {{emulates only launches along x}}
    gpu.launch_func @k::@f blocks in (%c1, %c2, %c1) threads in (%c1, %c1, %c1) args(%x : memref<4xf32>)
    return
  }
  gpu.module @k {
    gpu.func @f(%x: memref<4xf32>) kernel {
      gpu.return
    }
  }
}

// -----

module attributes {gpu.container_module} {
  gpu.module @k {
    gpu.func @f(%x: memref<4xf32>) kernel {
      // expected-error @+1 {{cannot be emulated on the host}}
      %t = gpu.thread_id y
      gpu.return
    }
  }
}
