// RUN: kiln-opt %s --convert-kiln-to-linalg | FileCheck %s

// A pure op whose result holds no elements becomes an empty tensor, whatever
// its operands (a slice starting at the end of its input included).
// CHECK-LABEL: func.func @empty_results
// CHECK-NOT: tensor.extract_slice
// CHECK-NOT: linalg.generic
// CHECK: %[[A:.*]] = tensor.empty() : tensor<2x0x4xf32>
// CHECK: %[[B:.*]] = tensor.empty() : tensor<3x0xf32>
// CHECK: return %[[A]], %[[B]]
func.func @empty_results(%x: tensor<2x0x4xf32>, %y: tensor<3x10xf32>)
    -> (tensor<2x0x4xf32>, tensor<3x0xf32>) {
  %0 = kiln.mul %x, %x : tensor<2x0x4xf32>
  %1 = kiln.slice %y {start = array<i64: 0, 10>, limit = array<i64: 3, 10>, stride = array<i64: 1, 1>} : tensor<3x10xf32>
  return %0, %1 : tensor<2x0x4xf32>, tensor<3x0xf32>
}

// A reduction over an empty axis is not empty: it fills the identity.
// CHECK-LABEL: func.func @empty_reduction
// CHECK: linalg.fill
func.func @empty_reduction(%x: tensor<2x0x4xf32>) -> tensor<2x4xf32> {
  %0 = kiln.reduce_sum %x {dimensions = array<i64: 1>} : tensor<2x0x4xf32>
  return %0 : tensor<2x4xf32>
}
