// RUN: kiln-opt %s --kiln-order-globals | FileCheck %s

// Private globals are sorted by type, then by their bytes (little-endian:
// 3.0 is 00 00 40 40, before 1.0's 00 00 80 3f), merged where equal and
// named __constant_N in that order at the top of the module; their uses
// follow. A public global is left as it is.

// CHECK-LABEL: module
// CHECK-NEXT: memref.global "private" constant @__constant_0 : memref<2xf32> = dense<[3.000000e+00, 4.000000e+00]>
// CHECK-NEXT: memref.global "private" constant @__constant_1 : memref<2xf32> = dense<[1.000000e+00, 2.000000e+00]>
// CHECK-NEXT: memref.global "private" constant @__constant_2 : memref<4xi64> = dense<[1, 2, 3, 4]>
// CHECK-NEXT: memref.global @exported : memref<2xf32>
// CHECK-NOT: memref.global
// CHECK-LABEL: func.func @f
// CHECK-NEXT: memref.get_global @__constant_2 : memref<4xi64>
// CHECK-NEXT: memref.get_global @__constant_0 : memref<2xf32>
// CHECK-NEXT: memref.get_global @__constant_1 : memref<2xf32>
// CHECK-NEXT: memref.get_global @__constant_1 : memref<2xf32>
// CHECK-NEXT: memref.get_global @exported : memref<2xf32>
module {
  memref.global "private" constant @__constant_4xi64 : memref<4xi64> = dense<[1, 2, 3, 4]>
  memref.global "private" constant @__constant_2xf32_0 : memref<2xf32> = dense<[3.0, 4.0]>
  memref.global "private" constant @__constant_2xf32 : memref<2xf32> = dense<[1.0, 2.0]>
  memref.global @exported : memref<2xf32> = uninitialized
  memref.global "private" constant @__constant_2xf32_1 : memref<2xf32> = dense<[1.0, 2.0]>
  func.func @f() -> (memref<4xi64>, memref<2xf32>, memref<2xf32>, memref<2xf32>, memref<2xf32>) {
    %0 = memref.get_global @__constant_4xi64 : memref<4xi64>
    %1 = memref.get_global @__constant_2xf32_0 : memref<2xf32>
    %2 = memref.get_global @__constant_2xf32 : memref<2xf32>
    %3 = memref.get_global @__constant_2xf32_1 : memref<2xf32>
    %4 = memref.get_global @exported : memref<2xf32>
    return %0, %1, %2, %3, %4 : memref<4xi64>, memref<2xf32>, memref<2xf32>, memref<2xf32>, memref<2xf32>
  }
}
