// RUN: kiln-opt %s --convert-kiln-to-linalg | FileCheck %s

// Unsigned integers pick unsigned arithmetic while they are lowered; after
// it no unsigned type is left, in types or constants.

// CHECK-NOT: ui8
// CHECK-NOT: ui16
// CHECK-NOT: ui32
// CHECK-NOT: ui64

// CHECK-LABEL: func.func @divide
// CHECK-SAME: (%{{.*}}: tensor<4xi8>, %{{.*}}: tensor<4xi8>) -> tensor<4xi8>
// CHECK: arith.divui
// CHECK-NOT: arith.divsi
func.func @divide(%x: tensor<4xui8>, %y: tensor<4xui8>) -> tensor<4xui8> {
  %0 = kiln.div %x, %y : tensor<4xui8>
  return %0 : tensor<4xui8>
}

// CHECK-LABEL: func.func @maximum
// CHECK: arith.maxui
// CHECK: arith.minui
func.func @maximum(%x: tensor<4xui16>, %y: tensor<4xui16>) -> tensor<4xui16> {
  %0 = kiln.max %x, %y : tensor<4xui16>
  %1 = kiln.min %0, %y : tensor<4xui16>
  return %1 : tensor<4xui16>
}

// CHECK-LABEL: func.func @less
// CHECK: arith.cmpi ult
func.func @less(%x: tensor<4xui32>, %y: tensor<4xui32>) -> tensor<4xi1> {
  %0 = kiln.compare <lt>, %x, %y : tensor<4xui32>
  return %0 : tensor<4xi1>
}

// Widening zero-extends, to floats as unsigned, from floats to unsigned.
// CHECK-LABEL: func.func @casts
// CHECK: arith.extui %{{.*}} : i8 to i32
// CHECK: arith.uitofp %{{.*}} : i8 to f32
// CHECK: arith.fptoui %{{.*}} : f32 to i16
// CHECK: arith.bitcast %{{.*}} : i8 to i8
func.func @casts(%x: tensor<4xui8>, %f: tensor<4xf32>)
    -> (tensor<4xi32>, tensor<4xf32>, tensor<4xui16>, tensor<4xi8>) {
  %0 = kiln.cast %x : tensor<4xui8> to tensor<4xi32>
  %1 = kiln.cast %x : tensor<4xui8> to tensor<4xf32>
  %2 = kiln.cast %f : tensor<4xf32> to tensor<4xui16>
  %3 = kiln.cast %x : tensor<4xui8> to tensor<4xi8>
  return %0, %1, %2, %3 : tensor<4xi32>, tensor<4xf32>, tensor<4xui16>, tensor<4xi8>
}

// A max reduction over unsigned values starts at 0, a min one at all ones.
// CHECK-LABEL: func.func @reduce
// CHECK: arith.constant 0 : i64
// CHECK: arith.maxui
// CHECK: arith.constant -1 : i64
// CHECK: arith.minui
func.func @reduce(%x: tensor<4x8xui64>) -> (tensor<4xui64>, tensor<4xui64>) {
  %0 = kiln.reduce_max %x {dimensions = array<i64: 1>} : tensor<4x8xui64>
  %1 = kiln.reduce_min %x {dimensions = array<i64: 1>} : tensor<4x8xui64>
  return %0, %1 : tensor<4xui64>, tensor<4xui64>
}

// Constants keep their bits: 200 as ui8 is -56 as i8.
// CHECK-LABEL: func.func @constant
// CHECK: arith.constant dense<-56> : tensor<4xi8>
func.func @constant(%x: tensor<4xui8>) -> tensor<4xui8> {
  %c = kiln.constant dense<200> : tensor<4xui8>
  %0 = kiln.rem %x, %c : tensor<4xui8>
  return %0 : tensor<4xui8>
}

// Shifts select 0 for an amount at or above the width (or negative, as an
// unsigned compare sees it); a signed right shift then shifts by width - 1.
// CHECK-LABEL: func.func @shifts
// CHECK: arith.cmpi ult
// CHECK: arith.shli
// CHECK: arith.shrui
// CHECK: arith.shrsi
func.func @shifts(%x: tensor<4xui8>, %y: tensor<4xui8>, %s: tensor<4xi32>, %t: tensor<4xi32>)
    -> (tensor<4xui8>, tensor<4xui8>, tensor<4xi32>) {
  %0 = kiln.shift_left %x, %y : tensor<4xui8>
  %1 = kiln.shift_right %x, %y : tensor<4xui8>
  %2 = kiln.shift_right %s, %t : tensor<4xi32>
  return %0, %1, %2 : tensor<4xui8>, tensor<4xui8>, tensor<4xi32>
}

// Bitwise not of integers flips every bit; bitcasts keep the bits.
// CHECK-LABEL: func.func @bits
// CHECK: %[[ONES:.*]] = arith.constant -1 : i16
// CHECK: arith.xori %{{.*}}, %[[ONES]] : i16
// CHECK: arith.bitcast %{{.*}} : f32 to i32
func.func @bits(%x: tensor<4xi16>, %f: tensor<4xf32>) -> (tensor<4xi16>, tensor<4xui32>) {
  %0 = kiln.not %x : tensor<4xi16>
  %1 = kiln.bitcast %f : tensor<4xf32> to tensor<4xui32>
  return %0, %1 : tensor<4xi16>, tensor<4xui32>
}
