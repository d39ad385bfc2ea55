// RUN: kiln-opt %s --convert-kiln-to-linalg | FileCheck %s

// kiln.cumprod lowers as kiln.cumsum does, with the product's identity: every
// output starts at 1 and multiplies in the inputs before it along the axis
// (exclusive: strictly before, k < i).

// CHECK-LABEL: func.func @cumprod_exclusive
// CHECK: %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK: linalg.fill ins(%[[ONE]] : f32)
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]
// CHECK: ^bb0(%[[IN:.*]]: f32, %[[ACC:.*]]: f32):
// CHECK: %[[I:.*]] = linalg.index 1 : index
// CHECK: %[[K:.*]] = linalg.index 2 : index
// CHECK: %[[TAKE:.*]] = arith.cmpi slt, %[[K]], %[[I]] : index
// CHECK: %[[X:.*]] = arith.select %[[TAKE]], %[[IN]], %{{.*}} : f32
// CHECK: %[[P:.*]] = arith.mulf %[[ACC]], %[[X]] : f32
// CHECK: linalg.yield %[[P]] : f32
func.func @cumprod_exclusive(%x: tensor<2x5xf32>) -> tensor<2x5xf32> {
  %y = kiln.cumprod %x {axis = 1 : i64, exclusive} : tensor<2x5xf32>
  return %y : tensor<2x5xf32>
}

// Reversed and inclusive over integers: k >= i, muli.
// CHECK-LABEL: func.func @cumprod_reverse_i32
// CHECK: arith.constant 1 : i32
// CHECK: arith.cmpi sge
// CHECK: arith.muli
func.func @cumprod_reverse_i32(%x: tensor<6xi32>) -> tensor<6xi32> {
  %y = kiln.cumprod %x {axis = 0 : i64, reverse} : tensor<6xi32>
  return %y : tensor<6xi32>
}
