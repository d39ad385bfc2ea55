// RUN: kiln-opt %s --convert-kiln-to-linalg | FileCheck %s
// RUN: kiln-opt %s --convert-kiln-to-linalg | FileCheck %s --check-prefix=NONE

// The narrow types are stored one element per byte: after the lowering no
// float8, float4, i4 or i2 type is left (arguments, results, constants), and
// the conversions are integer code on the byte.
// NONE-NOT: f8E
// NONE-NOT: f4E2M1FN
// NONE-NOT: xi4>
// NONE-NOT: : i4
// NONE-NOT: xi2>
// NONE-NOT: unrealized_conversion_cast

// f32 -> f8E4M3FN, saturating: the magnitude's bits clamped to 448's
// (0x43E00000), rounded to 3 mantissa bits (a 20-bit shift) and rebiased
// ((127 - 7) << 3 = 960); NaN and overflow become 0x7F.
// CHECK-LABEL: func.func @to_e4m3
// CHECK-SAME: (%{{.*}}: tensor<4xf32>) -> tensor<4xi8>
// CHECK: linalg.generic
// CHECK: arith.bitcast %{{.*}} : f32 to i32
// CHECK: arith.constant 1138753536 : i32
// CHECK: arith.minui
// CHECK: arith.constant 960 : i32
// CHECK: arith.constant 127 : i32
// CHECK: arith.trunci %{{.*}} : i32 to i8
// CHECK: linalg.yield %{{.*}} : i8
func.func @to_e4m3(%x: tensor<4xf32>) -> tensor<4xf8E4M3FN> {
  %0 = kiln.cast %x : tensor<4xf32> to tensor<4xf8E4M3FN>
  return %0 : tensor<4xf8E4M3FN>
}

// Without saturation nothing clamps first.
// CHECK-LABEL: func.func @to_e5m2_unsaturated
// CHECK-NOT: arith.minui
// CHECK: return
func.func @to_e5m2_unsaturated(%x: tensor<4xf32>) -> tensor<4xf8E5M2> {
  %0 = kiln.cast %x {saturate = false} : tensor<4xf32> to tensor<4xf8E5M2>
  return %0 : tensor<4xf8E5M2>
}

// i4 -> f32: the byte's low 4 bits, sign-extended (shifted up and back).
// CHECK-LABEL: func.func @from_i4
// CHECK-SAME: (%{{.*}}: tensor<4xi8>) -> tensor<4xf32>
// CHECK: ^bb0(%[[IN:.*]]: i8, %{{.*}}: f32):
// CHECK: %[[FOUR:.*]] = arith.constant 4 : i8
// CHECK: %[[UP:.*]] = arith.shli %[[IN]], %[[FOUR]] : i8
// CHECK: %[[DOWN:.*]] = arith.shrsi %[[UP]], %[[FOUR]] : i8
// CHECK: %[[WIDE:.*]] = arith.extsi %[[DOWN]] : i8 to i32
// CHECK: arith.sitofp %[[WIDE]] : i32 to f32
func.func @from_i4(%x: tensor<4xi4>) -> tensor<4xf32> {
  %0 = kiln.cast %x : tensor<4xi4> to tensor<4xf32>
  return %0 : tensor<4xf32>
}

// ui2 -> i32 zero-extends the low 2 bits (shrui).
// CHECK-LABEL: func.func @from_ui2
// CHECK: arith.constant 6 : i8
// CHECK: arith.shrui
// CHECK: arith.extui %{{.*}} : i8 to i32
func.func @from_ui2(%x: tensor<4xui2>) -> tensor<4xi32> {
  %0 = kiln.cast %x : tensor<4xui2> to tensor<4xi32>
  return %0 : tensor<4xi32>
}

// A constant keeps its bytes: int4 [-1, 7] is stored as 0x0F, 0x07.
// CHECK-LABEL: func.func @constant_i4
// CHECK: arith.constant dense<[15, 7]> : tensor<2xi8>
func.func @constant_i4() -> tensor<2xf32> {
  %c = kiln.constant dense<[-1, 7]> : tensor<2xi4>
  %0 = kiln.cast %c : tensor<2xi4> to tensor<2xf32>
  return %0 : tensor<2xf32>
}

// f8E8M0FNU rounds by its mode: `down` adds nothing to the exponent.
// CHECK-LABEL: func.func @to_e8m0_down
// CHECK: arith.constant false
// CHECK: return
func.func @to_e8m0_down(%x: tensor<4xf32>) -> tensor<4xf8E8M0FNU> {
  %0 = kiln.cast %x {round_mode = #kiln.round_mode<down>} : tensor<4xf32> to tensor<4xf8E8M0FNU>
  return %0 : tensor<4xf8E8M0FNU>
}
