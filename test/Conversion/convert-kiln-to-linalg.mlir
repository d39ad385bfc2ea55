// RUN: kiln-opt %s --convert-kiln-to-linalg | FileCheck %s

// One function per lowering family. The affine maps are printed as aliases at
// the top of the module; they are captured there by their content.

// CHECK-DAG: #[[$ID2:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: #[[$ID1:.*]] = affine_map<(d0) -> (d0)>
// CHECK-DAG: #[[$BCAST_IN:.*]] = affine_map<(d0, d1, d2) -> (0, d2)>
// CHECK-DAG: #[[$ID3:.*]] = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
// CHECK-DAG: #[[$RED_SUM_OUT:.*]] = affine_map<(d0, d1, d2) -> (d1)>
// CHECK-DAG: #[[$D0_D2:.*]] = affine_map<(d0, d1, d2) -> (d0, d2)>
// CHECK-DAG: #[[$MM_BT:.*]] = affine_map<(d0, d1, d2) -> (d1, d2)>
// CHECK-DAG: #[[$MM_C:.*]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-DAG: #[[$BMM_AT:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d3, d1)>
// CHECK-DAG: #[[$BMM_B:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>
// CHECK-DAG: #[[$D0_D1_D2:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
// CHECK-DAG: #[[$CONV_IN:.*]] = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d5, d3 * 2 + d6, d4 + d7 * 2)>
// CHECK-DAG: #[[$CONV_W:.*]] = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d1, d2, d5, d6, d7)>
// CHECK-DAG: #[[$CONV_OUT:.*]] = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d2, d3, d4)>
// CHECK-DAG: #[[$MAXPOOL_IN:.*]] = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2 * 2 + d4, d3 * 2 + d5)>
// CHECK-DAG: #[[$MAXPOOL_WIN:.*]] = affine_map<(d0, d1, d2, d3, d4, d5) -> (d4, d5)>
// CHECK-DAG: #[[$MAXPOOL_OUT:.*]] = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d3)>
// CHECK-DAG: #[[$AVGPOOL_IN:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2 * 2 + d3)>
// CHECK-DAG: #[[$AVGPOOL_WIN:.*]] = affine_map<(d0, d1, d2, d3) -> (d3)>
// CHECK-DAG: #[[$AVG_DIV:.*]] = affine_map<(d0, d1, d2) -> (d2)>
// CHECK-DAG: #[[$GATHER_IDX:.*]] = affine_map<(d0, d1, d2, d3) -> (d1, d2)>
// CHECK-DAG: #[[$ID4:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>

// Elementwise ops: an all-parallel generic over identical shapes whose body
// is the scalar arith/math op, float or integer by element type.
// CHECK-LABEL: func.func @elementwise(
// CHECK-SAME: %[[A:[^:]*]]: tensor<2x3xf32>, %[[B:[^:]*]]: tensor<2x3xf32>, %[[I:[^:]*]]: tensor<4xi32>
// CHECK: %[[E0:.*]] = tensor.empty() : tensor<2x3xf32>
// CHECK: %[[T:.*]] = linalg.generic {indexing_maps = [#[[$ID2]], #[[$ID2]]], iterator_types = ["parallel", "parallel"]} ins(%[[A]] : tensor<2x3xf32>) outs(%[[E0]] : tensor<2x3xf32>)
// CHECK-NEXT: ^bb0(%[[X:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT: %[[TANH:.*]] = math.tanh %[[X]] : f32
// CHECK-NEXT: linalg.yield %[[TANH]] : f32
// CHECK: %[[S:.*]] = linalg.generic {indexing_maps = [#[[$ID2]], #[[$ID2]], #[[$ID2]]], iterator_types = ["parallel", "parallel"]} ins(%[[T]], %[[B]] : tensor<2x3xf32>, tensor<2x3xf32>)
// CHECK-NEXT: ^bb0(%[[L:.*]]: f32, %[[R:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT: %[[SUM:.*]] = arith.addf %[[L]], %[[R]] : f32
// CHECK-NEXT: linalg.yield %[[SUM]] : f32
// CHECK: %[[P:.*]] = linalg.generic {indexing_maps = [#[[$ID1]], #[[$ID1]], #[[$ID1]]], iterator_types = ["parallel"]} ins(%[[I]], %[[I]] : tensor<4xi32>, tensor<4xi32>)
// CHECK-NEXT: ^bb0(%[[L:.*]]: i32, %[[R:.*]]: i32, %{{.*}}: i32):
// CHECK-NEXT: %[[PROD:.*]] = arith.muli %[[L]], %[[R]] : i32
// CHECK-NEXT: linalg.yield %[[PROD]] : i32
// CHECK: return %[[S]], %[[P]]
func.func @elementwise(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>, %i: tensor<4xi32>) -> (tensor<2x3xf32>, tensor<4xi32>) {
  %t = kiln.tanh %a : tensor<2x3xf32>
  %y = kiln.add %t, %b : tensor<2x3xf32>
  %j = kiln.mul %i, %i : tensor<4xi32>
  return %y, %j : tensor<2x3xf32>, tensor<4xi32>
}

// [1, 4] to [3, 2, 4]: the missing leading dimension is dropped from the
// input map, the size-1 dimension reads index 0.
// CHECK-LABEL: func.func @broadcast(
// CHECK-SAME: %[[X:[^:]*]]: tensor<1x4xf32>
// CHECK: %[[Y:.*]] = linalg.generic {indexing_maps = [#[[$BCAST_IN]], #[[$ID3]]], iterator_types = ["parallel", "parallel", "parallel"]} ins(%[[X]] : tensor<1x4xf32>) outs(%{{.*}} : tensor<3x2x4xf32>)
// CHECK-NEXT: ^bb0(%[[IN:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT: linalg.yield %[[IN]] : f32
// CHECK: return %[[Y]]
func.func @broadcast(%x: tensor<1x4xf32>) -> tensor<3x2x4xf32> {
  %y = kiln.broadcast %x : tensor<1x4xf32> to tensor<3x2x4xf32>
  return %y : tensor<3x2x4xf32>
}

// Through a rank-1 intermediate.
// CHECK-LABEL: func.func @reshape(
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x3xf32>
// CHECK: %[[FLAT:.*]] = tensor.collapse_shape %[[X]] {{\[}}[0, 1]] : tensor<2x3xf32> into tensor<6xf32>
// CHECK: %[[FLAT2:.*]] = tensor.collapse_shape %[[X]] {{\[}}[0, 1]] : tensor<2x3xf32> into tensor<6xf32>
// CHECK: %[[Y:.*]] = tensor.expand_shape %[[FLAT2]] {{\[}}[0, 1, 2]] output_shape [3, 1, 2] : tensor<6xf32> into tensor<3x1x2xf32>
// CHECK: return %[[FLAT]], %[[Y]]
func.func @reshape(%x: tensor<2x3xf32>) -> (tensor<6xf32>, tensor<3x1x2xf32>) {
  %a = kiln.reshape %x : tensor<2x3xf32> to tensor<6xf32>
  %b = kiln.reshape %x : tensor<2x3xf32> to tensor<3x1x2xf32>
  return %a, %b : tensor<6xf32>, tensor<3x1x2xf32>
}

// CHECK-LABEL: func.func @transpose(
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x3x4xf32>
// CHECK: %[[E:.*]] = tensor.empty() : tensor<4x2x3xf32>
// CHECK: %[[Y:.*]] = linalg.transpose ins(%[[X]] : tensor<2x3x4xf32>) outs(%[[E]] : tensor<4x2x3xf32>) permutation = [2, 0, 1]
// CHECK: return %[[Y]]
func.func @transpose(%x: tensor<2x3x4xf32>) -> tensor<4x2x3xf32> {
  %y = kiln.transpose %x {permutation = array<i64: 2, 0, 1>} : tensor<2x3x4xf32>
  return %y : tensor<4x2x3xf32>
}

// Offsets are the starts, sizes the result shape, strides the strides.
// CHECK-LABEL: func.func @slice(
// CHECK-SAME: %[[X:[^:]*]]: tensor<5x7xf32>
// CHECK: %[[Y:.*]] = tensor.extract_slice %[[X]][1, 0] [2, 3] [2, 3] : tensor<5x7xf32> to tensor<2x3xf32>
// CHECK: return %[[Y]]
func.func @slice(%x: tensor<5x7xf32>) -> tensor<2x3xf32> {
  %y = kiln.slice %x {start = array<i64: 1, 0>, limit = array<i64: 5, 7>, stride = array<i64: 2, 3>} : tensor<5x7xf32>
  return %y : tensor<2x3xf32>
}

// Each input inserted at the running offset along the axis.
// CHECK-LABEL: func.func @concat(
// CHECK-SAME: %[[A:[^:]*]]: tensor<3x2xf32>, %[[B:[^:]*]]: tensor<3x1xf32>, %[[C:[^:]*]]: tensor<3x4xf32>
// CHECK: %[[E:.*]] = tensor.empty() : tensor<3x7xf32>
// CHECK: %[[R0:.*]] = tensor.insert_slice %[[A]] into %[[E]][0, 0] [3, 2] [1, 1] : tensor<3x2xf32> into tensor<3x7xf32>
// CHECK: %[[R1:.*]] = tensor.insert_slice %[[B]] into %[[R0]][0, 2] [3, 1] [1, 1] : tensor<3x1xf32> into tensor<3x7xf32>
// CHECK: %[[R2:.*]] = tensor.insert_slice %[[C]] into %[[R1]][0, 3] [3, 4] [1, 1] : tensor<3x4xf32> into tensor<3x7xf32>
// CHECK: return %[[R2]]
func.func @concat(%a: tensor<3x2xf32>, %b: tensor<3x1xf32>, %c: tensor<3x4xf32>) -> tensor<3x7xf32> {
  %y = kiln.concat %a, %b, %c {axis = 1 : i64} : tensor<3x2xf32>, tensor<3x1xf32>, tensor<3x4xf32>
  return %y : tensor<3x7xf32>
}

// Constant padding is tensor.pad; reflect padding an indexed generic that
// mirrors i - low about 0 and n - 1: for n = 3, 2 * (n - 1) - i.
// CHECK-LABEL: func.func @pad(
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x3xf32>, %[[Y:[^:]*]]: tensor<3x4xf32>
// CHECK: %[[FILL:.*]] = arith.constant 1.500000e+00 : f32
// CHECK: %[[C:.*]] = tensor.pad %[[X]] low[0, 1] high[0, 2]
// CHECK: tensor.yield %[[FILL]] : f32
// CHECK: } : tensor<2x3xf32> to tensor<2x6xf32>
// CHECK: %[[R:.*]] = linalg.generic {indexing_maps = [#[[$ID2]]], iterator_types = ["parallel", "parallel"]} outs(%{{.*}} : tensor<6x6xf32>)
// CHECK: %[[I0:.*]] = linalg.index 0 : index
// CHECK: %[[LOW0:.*]] = arith.constant 1 : index
// CHECK: %[[S0:.*]] = arith.subi %[[I0]], %[[LOW0]] : index
// CHECK: %[[NEG:.*]] = arith.cmpi slt, %[[S0]], %{{.*}} : index
// CHECK: %[[ABS:.*]] = arith.select %[[NEG]], %{{.*}}, %[[S0]] : index
// CHECK: %[[N0:.*]] = arith.constant 3 : index
// CHECK: %[[OVER:.*]] = arith.cmpi sge, %[[ABS]], %[[N0]] : index
// CHECK: %[[TWICE:.*]] = arith.constant 4 : index
// CHECK: %[[MIRROR:.*]] = arith.subi %[[TWICE]], %[[ABS]] : index
// CHECK: arith.select %[[OVER]], %[[MIRROR]], %[[ABS]] : index
// CHECK: %[[V:.*]] = tensor.extract %[[Y]][%{{.*}}, %{{.*}}] : tensor<3x4xf32>
// CHECK: linalg.yield %[[V]] : f32
// CHECK: return %[[C]], %[[R]]
func.func @pad(%x: tensor<2x3xf32>, %y: tensor<3x4xf32>) -> (tensor<2x6xf32>, tensor<6x6xf32>) {
  %c = kiln.pad %x {low = array<i64: 0, 1>, high = array<i64: 0, 2>, mode = #kiln.pad_mode<constant>, value = 1.5 : f64} : tensor<2x3xf32>
  %r = kiln.pad %y {low = array<i64: 1, 2>, high = array<i64: 2, 0>, mode = #kiln.pad_mode<reflect>} : tensor<3x4xf32>
  return %c, %r : tensor<2x6xf32>, tensor<6x6xf32>
}

// A generic with reduction iterators on the reduced dims into a tensor
// filled with the identity (0 for sum, -inf for max); keepdims reshapes.
// CHECK-LABEL: func.func @reduce(
// CHECK-SAME: %[[X:[^:]*]]: tensor<3x4x5xf32>
// CHECK: %[[SUMINIT:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<4xf32>) -> tensor<4xf32>
// CHECK: %[[SUM:.*]] = linalg.generic {indexing_maps = [#[[$ID3]], #[[$RED_SUM_OUT]]], iterator_types = ["reduction", "parallel", "reduction"]} ins(%[[X]] : tensor<3x4x5xf32>) outs(%[[SUMINIT]] : tensor<4xf32>)
// CHECK-NEXT: ^bb0(%[[IN:.*]]: f32, %[[ACC:.*]]: f32):
// CHECK-NEXT: %[[ADD:.*]] = arith.addf %[[ACC]], %[[IN]] : f32
// CHECK-NEXT: linalg.yield %[[ADD]] : f32
// CHECK: %[[NEGINF:.*]] = arith.constant 0xFF800000 : f32
// CHECK: %[[MAXINIT:.*]] = linalg.fill ins(%[[NEGINF]] : f32) outs(%{{.*}} : tensor<3x5xf32>) -> tensor<3x5xf32>
// CHECK: %[[MAX:.*]] = linalg.generic {indexing_maps = [#[[$ID3]], #[[$D0_D2]]], iterator_types = ["parallel", "reduction", "parallel"]} ins(%[[X]] : tensor<3x4x5xf32>) outs(%[[MAXINIT]] : tensor<3x5xf32>)
// CHECK-NEXT: ^bb0(%[[IN:.*]]: f32, %[[ACC:.*]]: f32):
// CHECK-NEXT: %[[M:.*]] = arith.maximumf %[[ACC]], %[[IN]] : f32
// CHECK-NEXT: linalg.yield %[[M]] : f32
// CHECK: %[[FLAT:.*]] = tensor.collapse_shape %[[MAX]] {{\[}}[0, 1]] : tensor<3x5xf32> into tensor<15xf32>
// CHECK: %[[KEPT:.*]] = tensor.expand_shape %[[FLAT]] {{\[}}[0, 1, 2]] output_shape [3, 1, 5] : tensor<15xf32> into tensor<3x1x5xf32>
// CHECK: return %[[SUM]], %[[KEPT]]
func.func @reduce(%x: tensor<3x4x5xf32>) -> (tensor<4xf32>, tensor<3x1x5xf32>) {
  %y = kiln.reduce_sum %x {dimensions = array<i64: 0, 2>} : tensor<3x4x5xf32>
  %z = kiln.reduce_max %x {dimensions = array<i64: 1>, keepdims} : tensor<3x4x5xf32>
  return %y, %z : tensor<4xf32>, tensor<3x1x5xf32>
}

// A multiply-accumulate contraction over (batch..., m, n, k), marked
// kiln.matmul with the transposes, which only change the operand maps.
// CHECK-LABEL: func.func @matmul(
// CHECK-SAME: %[[A:[^:]*]]: tensor<8x16xf32>, %[[BT:[^:]*]]: tensor<32x16xf32>
// CHECK: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: %[[INIT:.*]] = linalg.fill ins(%[[ZERO]] : f32) outs(%{{.*}} : tensor<8x32xf32>) -> tensor<8x32xf32>
// CHECK: %[[Y:.*]] = linalg.generic {indexing_maps = [#[[$D0_D2]], #[[$MM_BT]], #[[$MM_C]]], iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[A]], %[[BT]] : tensor<8x16xf32>, tensor<32x16xf32>) outs(%[[INIT]] : tensor<8x32xf32>) attrs = {kiln.matmul = {transpose_rhs}}
// CHECK-NEXT: ^bb0(%[[L:.*]]: f32, %[[R:.*]]: f32, %[[ACC:.*]]: f32):
// CHECK-NEXT: %[[P:.*]] = arith.mulf %[[L]], %[[R]] : f32
// CHECK-NEXT: %[[S:.*]] = arith.addf %[[ACC]], %[[P]] : f32
// CHECK-NEXT: linalg.yield %[[S]] : f32
// CHECK: return %[[Y]]
func.func @matmul(%a: tensor<8x16xf32>, %bt: tensor<32x16xf32>) -> tensor<8x32xf32> {
  %y = kiln.matmul %a, %bt {transpose_rhs} : tensor<8x16xf32>, tensor<32x16xf32>
  return %y : tensor<8x32xf32>
}

// CHECK-LABEL: func.func @matmul_batched(
// CHECK-SAME: %[[AT:[^:]*]]: tensor<7x5x4xf16>, %[[B:[^:]*]]: tensor<7x5x6xf16>
// CHECK: %[[Y:.*]] = linalg.generic {indexing_maps = [#[[$BMM_AT]], #[[$BMM_B]], #[[$D0_D1_D2]]], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%[[AT]], %[[B]] : tensor<7x5x4xf16>, tensor<7x5x6xf16>) outs(%{{.*}} : tensor<7x4x6xf16>) attrs = {kiln.matmul = {transpose_lhs}}
// CHECK: return %[[Y]]
func.func @matmul_batched(%at: tensor<7x5x4xf16>, %b: tensor<7x5x6xf16>) -> tensor<7x4x6xf16> {
  %y = kiln.matmul %at, %b {transpose_lhs} : tensor<7x5x4xf16>, tensor<7x5x6xf16>
  return %y : tensor<7x4x6xf16>
}

// CHECK-LABEL: func.func @matmul_plain(
// CHECK: linalg.generic
// CHECK-SAME: attrs = {kiln.matmul = {}}
// CHECK-NEXT: ^bb0(%[[L:.*]]: i32, %[[R:.*]]: i32, %[[ACC:.*]]: i32):
// CHECK-NEXT: %[[P:.*]] = arith.muli %[[L]], %[[R]] : i32
// CHECK-NEXT: arith.addi %[[ACC]], %[[P]] : i32
func.func @matmul_plain(%a: tensor<2x3xi32>, %b: tensor<3x4xi32>) -> tensor<2x4xi32> {
  %y = kiln.matmul %a, %b : tensor<2x3xi32>, tensor<3x4xi32>
  return %y : tensor<2x4xi32>
}

// Grouped convolution, groups = 2: the input [1, 4, 9, 10], padded by (1, 0)
// before and (1, 2) after to [1, 4, 11, 12], is viewed as [N, G, C/G, H, W],
// the filter [6, 2, 3, 3] as [G, F/G, C/G, KH, KW]; one generic over
// (n, g, f, oh, ow, c, kh, kw) reads the input at oh * 2 + kh and ow + kw * 2
// (strides 2, 1, dilations 1, 2); the result [1, 2, 3, 5, 8] is viewed back
// as [1, 6, 5, 8].
// CHECK-LABEL: func.func @conv(
// CHECK-SAME: %[[X:[^:]*]]: tensor<1x4x9x10xf32>, %[[W:[^:]*]]: tensor<6x2x3x3xf32>
// CHECK: %[[PAD:.*]] = tensor.pad %[[X]] low[0, 0, 1, 0] high[0, 0, 1, 2]
// CHECK: } : tensor<1x4x9x10xf32> to tensor<1x4x11x12xf32>
// CHECK: %[[XF:.*]] = tensor.collapse_shape %[[PAD]]
// CHECK: %[[XG:.*]] = tensor.expand_shape %[[XF]] {{\[}}[0, 1, 2, 3, 4]] output_shape [1, 2, 2, 11, 12]
// CHECK: %[[WF:.*]] = tensor.collapse_shape %[[W]]
// CHECK: %[[WG:.*]] = tensor.expand_shape %[[WF]] {{\[}}[0, 1, 2, 3, 4]] output_shape [2, 3, 2, 3, 3]
// CHECK: %[[Y:.*]] = linalg.generic {indexing_maps = [#[[$CONV_IN]], #[[$CONV_W]], #[[$CONV_OUT]]], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]} ins(%[[XG]], %[[WG]] : tensor<1x2x2x11x12xf32>, tensor<2x3x2x3x3xf32>) outs(%{{.*}} : tensor<1x2x3x5x8xf32>)
// CHECK: arith.mulf
// CHECK: arith.addf
// CHECK: %[[YF:.*]] = tensor.collapse_shape %[[Y]]
// CHECK: %[[R:.*]] = tensor.expand_shape %[[YF]] {{\[}}[0, 1, 2, 3]] output_shape [1, 6, 5, 8]
// CHECK: return %[[R]] : tensor<1x6x5x8xf32>
func.func @conv(%x: tensor<1x4x9x10xf32>, %w: tensor<6x2x3x3xf32>) -> tensor<1x6x5x8xf32> {
  %y = kiln.conv %x, %w {strides = array<i64: 2, 1>, padding = array<i64: 1, 0, 1, 2>,
                         dilations = array<i64: 1, 2>, groups = 2 : i64}
      : tensor<1x4x9x10xf32>, tensor<6x2x3x3xf32>
  return %y : tensor<1x6x5x8xf32>
}

// Windows iterated through a kernel-shaped dummy operand; max pooling starts
// from -inf.
// CHECK-LABEL: func.func @max_pool(
// CHECK-SAME: %[[X:[^:]*]]: tensor<1x3x6x8xf32>
// CHECK: %[[WIN:.*]] = tensor.empty() : tensor<3x3xf32>
// CHECK: %[[NEGINF:.*]] = arith.constant 0xFF800000 : f32
// CHECK: %[[INIT:.*]] = linalg.fill ins(%[[NEGINF]] : f32) outs(%{{.*}} : tensor<1x3x2x3xf32>)
// CHECK: %[[Y:.*]] = linalg.generic {indexing_maps = [#[[$MAXPOOL_IN]], #[[$MAXPOOL_WIN]], #[[$MAXPOOL_OUT]]], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction"]} ins(%[[X]], %[[WIN]] : tensor<1x3x6x8xf32>, tensor<3x3xf32>) outs(%[[INIT]] : tensor<1x3x2x3xf32>)
// CHECK-NEXT: ^bb0(%[[IN:.*]]: f32, %{{.*}}: f32, %[[ACC:.*]]: f32):
// CHECK-NEXT: %[[M:.*]] = arith.maximumf %[[ACC]], %[[IN]] : f32
// CHECK-NEXT: linalg.yield %[[M]] : f32
// CHECK: return %[[Y]]
func.func @max_pool(%x: tensor<1x3x6x8xf32>) -> tensor<1x3x2x3xf32> {
  %y = kiln.max_pool %x {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>} : tensor<1x3x6x8xf32>
  return %y : tensor<1x3x2x3xf32>
}

// Average pooling sums the zero-padded windows and divides by the count of
// the window's elements inside the input (PyTorch, count_include_pad false):
// windows [-1, 2), [1, 4), [3, 6), [5, 8) of an input of 7 hold 2, 3, 3, 2.
// CHECK-LABEL: func.func @avg_pool(
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x3x7xf32>
// CHECK: %[[PAD:.*]] = tensor.pad %[[X]] low[0, 0, 1] high[0, 0, 1]
// CHECK: } : tensor<2x3x7xf32> to tensor<2x3x9xf32>
// CHECK: %[[WIN:.*]] = tensor.empty() : tensor<3xf32>
// CHECK: %[[SUM:.*]] = linalg.generic {indexing_maps = [#[[$AVGPOOL_IN]], #[[$AVGPOOL_WIN]], #[[$D0_D1_D2]]], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%[[PAD]], %[[WIN]] : tensor<2x3x9xf32>, tensor<3xf32>)
// CHECK: arith.addf
// CHECK: %[[COUNT:.*]] = arith.constant dense<[2.000000e+00, 3.000000e+00, 3.000000e+00, 2.000000e+00]> : tensor<4xf32>
// CHECK: %[[Y:.*]] = linalg.generic {indexing_maps = [#[[$ID3]], #[[$AVG_DIV]], #[[$ID3]]], iterator_types = ["parallel", "parallel", "parallel"]} ins(%[[SUM]], %[[COUNT]] : tensor<2x3x4xf32>, tensor<4xf32>)
// CHECK-NEXT: ^bb0(%[[S:.*]]: f32, %[[N:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT: %[[D:.*]] = arith.divf %[[S]], %[[N]] : f32
// CHECK: return %[[Y]]
func.func @avg_pool(%x: tensor<2x3x7xf32>) -> tensor<2x3x4xf32> {
  %y = kiln.avg_pool %x {kernel = array<i64: 3>, strides = array<i64: 2>, padding = array<i64: 1, 1>} : tensor<2x3x7xf32>
  return %y : tensor<2x3x4xf32>
}

// The output [5, 2, 3, 7] reads the index at (d1, d2), wraps a negative one
// by the axis size 6, clamps it into [0, 5] and extracts x[d0, idx, d3].
// CHECK-LABEL: func.func @gather(
// CHECK-SAME: %[[X:[^:]*]]: tensor<5x6x7xf32>, %[[I:[^:]*]]: tensor<2x3xi64>
// CHECK: %[[Y:.*]] = linalg.generic {indexing_maps = [#[[$GATHER_IDX]], #[[$ID4]]], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%[[I]] : tensor<2x3xi64>) outs(%{{.*}} : tensor<5x2x3x7xf32>)
// CHECK-NEXT: ^bb0(%[[RAW:.*]]: i64, %{{.*}}: f32):
// CHECK-NEXT: %[[D0:.*]] = linalg.index 0 : index
// CHECK-NEXT: linalg.index 1 : index
// CHECK-NEXT: linalg.index 2 : index
// CHECK-NEXT: %[[D3:.*]] = linalg.index 3 : index
// CHECK-NEXT: %[[IDX:.*]] = arith.index_cast %[[RAW]] : i64 to index
// CHECK: %[[NEG:.*]] = arith.cmpi slt, %[[IDX]], %{{.*}} : index
// CHECK-NEXT: %[[SIZE:.*]] = arith.constant 6 : index
// CHECK-NEXT: %[[WRAPPED:.*]] = arith.addi %[[IDX]], %[[SIZE]] : index
// CHECK-NEXT: %[[SEL:.*]] = arith.select %[[NEG]], %[[WRAPPED]], %[[IDX]] : index
// CHECK: %[[LAST:.*]] = arith.constant 5 : index
// CHECK-NEXT: %[[LO:.*]] = arith.maxsi %[[SEL]], %{{.*}} : index
// CHECK-NEXT: %[[CLAMPED:.*]] = arith.minsi %[[LO]], %[[LAST]] : index
// CHECK-NEXT: %[[V:.*]] = tensor.extract %[[X]][%[[D0]], %[[CLAMPED]], %[[D3]]] : tensor<5x6x7xf32>
// CHECK-NEXT: linalg.yield %[[V]] : f32
// CHECK: return %[[Y]]
func.func @gather(%x: tensor<5x6x7xf32>, %i: tensor<2x3xi64>) -> tensor<5x2x3x7xf32> {
  %y = kiln.gather %x, %i {axis = 1 : i64} : tensor<5x6x7xf32>, tensor<2x3xi64>
  return %y : tensor<5x2x3x7xf32>
}

// One generic with two results: a uniform u in [0, 1) from the seed and the
// element's linear index; kept where u >= ratio, scaled by 1 / (1 - ratio).
// CHECK-LABEL: func.func @dropout(
// CHECK-SAME: %[[X:[^:]*]]: tensor<4x8xf32>, %[[SEED:[^:]*]]: tensor<i64>
// CHECK: %[[R:.*]]:2 = linalg.generic {indexing_maps = [#[[$ID2]], #[[$ID2]], #[[$ID2]]], iterator_types = ["parallel", "parallel"]} ins(%[[X]] : tensor<4x8xf32>) outs(%{{.*}}, %{{.*}} : tensor<4x8xf32>, tensor<4x8xi1>)
// CHECK-NEXT: ^bb0(%[[IN:.*]]: f32, %{{.*}}: f32, %{{.*}}: i1):
// CHECK: %[[S:.*]] = tensor.extract %[[SEED]][] : tensor<i64>
// CHECK: %[[U:.*]] = arith.mulf %{{.*}}, %{{.*}} : f64
// CHECK: %[[RATIO:.*]] = arith.constant 2.500000e-01 : f64
// CHECK: %[[KEEP:.*]] = arith.cmpf oge, %[[U]], %[[RATIO]] : f64
// CHECK: %[[SCALE:.*]] = arith.constant 1.33333337 : f32
// CHECK: %[[SCALED:.*]] = arith.mulf %[[IN]], %[[SCALE]] : f32
// CHECK: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: %[[Y:.*]] = arith.select %[[KEEP]], %[[SCALED]], %[[ZERO]] : f32
// CHECK: linalg.yield %[[Y]], %[[KEEP]] : f32, i1
// CHECK: return %[[R]]#0, %[[R]]#1
func.func @dropout(%x: tensor<4x8xf32>, %seed: tensor<i64>) -> (tensor<4x8xf32>, tensor<4x8xi1>) {
  %y, %mask = kiln.dropout %x, %seed {ratio = 0.25 : f64} : tensor<4x8xf32>
  return %y, %mask : tensor<4x8xf32>, tensor<4x8xi1>
}

// start + step * index along `dimension`. (Small iotas fold to constants
// first; these are above the folding limit.)
// CHECK-LABEL: func.func @iota(
// CHECK: %[[F:.*]] = linalg.generic {indexing_maps = [#[[$ID2]]], iterator_types = ["parallel", "parallel"]} outs(%{{.*}} : tensor<2x40000xf32>)
// CHECK-NEXT: ^bb0(%{{.*}}: f32):
// CHECK-NEXT: linalg.index 0 : index
// CHECK-NEXT: %[[J:.*]] = linalg.index 1 : index
// CHECK-NEXT: %[[JI:.*]] = arith.index_cast %[[J]] : index to i64
// CHECK-NEXT: %[[JF:.*]] = arith.sitofp %[[JI]] : i64 to f64
// CHECK-NEXT: %[[START:.*]] = arith.constant 1.000000e+00 : f64
// CHECK-NEXT: %[[STEP:.*]] = arith.constant 5.000000e-01 : f64
// CHECK-NEXT: %[[OFF:.*]] = arith.mulf %[[JF]], %[[STEP]] : f64
// CHECK-NEXT: %[[V:.*]] = arith.addf %[[START]], %[[OFF]] : f64
// CHECK-NEXT: %[[T:.*]] = arith.truncf %[[V]] : f64 to f32
// CHECK-NEXT: linalg.yield %[[T]] : f32
// CHECK: %[[I:.*]] = linalg.generic {indexing_maps = [#[[$ID1]]], iterator_types = ["parallel"]} outs(%{{.*}} : tensor<70000xi64>)
// CHECK: linalg.index 0 : index
// CHECK: arith.muli
// CHECK: arith.addi
// CHECK: return %[[F]], %[[I]]
func.func @iota() -> (tensor<2x40000xf32>, tensor<70000xi64>) {
  %f = kiln.iota {dimension = 1 : i64, start = 1.0 : f64, step = 0.5 : f64} : tensor<2x40000xf32>
  %i = kiln.iota {dimension = 0 : i64} : tensor<70000xi64>
  return %f, %i : tensor<2x40000xf32>, tensor<70000xi64>
}

// Nearest, asymmetric, floor: row floor(h / 2) clamped to [0, 3], the other
// dimensions (scale 1) read in place.
// CHECK-LABEL: func.func @resize_nearest(
// CHECK-SAME: %[[X:[^:]*]]: tensor<1x1x4x4xf32>
// CHECK: %[[Y:.*]] = linalg.generic {indexing_maps = [#[[$ID4]]], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} outs(%{{.*}} : tensor<1x1x8x4xf32>)
// CHECK: %[[N:.*]] = linalg.index 0 : index
// CHECK: %[[C:.*]] = linalg.index 1 : index
// CHECK: %[[H:.*]] = linalg.index 2 : index
// CHECK: %[[HF:.*]] = arith.sitofp %{{.*}} : i64 to f64
// CHECK: %[[SCALE:.*]] = arith.constant 2.000000e+00 : f64
// CHECK: %[[POS:.*]] = arith.divf %[[HF]], %[[SCALE]] : f64
// CHECK: %[[FL:.*]] = math.floor %[[POS]] : f64
// CHECK: arith.maximumf %[[FL]], %{{.*}} : f64
// CHECK: %[[LAST:.*]] = arith.constant 3.000000e+00 : f64
// CHECK: arith.minimumf %{{.*}}, %[[LAST]] : f64
// CHECK: %[[HI:.*]] = arith.index_cast %{{.*}} : i64 to index
// CHECK: %[[W:.*]] = linalg.index 3 : index
// CHECK: tensor.extract %[[X]][%[[N]], %[[C]], %[[HI]], %[[W]]] : tensor<1x1x4x4xf32>
// CHECK-NOT: tensor.extract
// CHECK: linalg.yield
// CHECK: return %[[Y]]
func.func @resize_nearest(%x: tensor<1x1x4x4xf32>) -> tensor<1x1x8x4xf32> {
  %y = kiln.resize %x {mode = #kiln.resize_mode<nearest>, coordinate_mode = #kiln.coordinate_mode<asymmetric>,
                       nearest_mode = #kiln.nearest_mode<floor>, scales = array<f64: 1.0, 1.0, 2.0, 1.0>}
      : tensor<1x1x4x4xf32> to tensor<1x1x8x4xf32>
  return %y : tensor<1x1x8x4xf32>
}

// Bilinear, half_pixel: source (x + 0.5) / 2 - 0.5 per resized dimension, and
// four taps (two rows by two columns) weighted and summed in f64.
// CHECK-LABEL: func.func @resize_linear(
// CHECK-SAME: %[[X:[^:]*]]: tensor<1x1x4x4xf32>
// CHECK: linalg.generic {indexing_maps = [#[[$ID4]]], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} outs(%{{.*}} : tensor<1x1x8x8xf32>)
// CHECK: %[[H:.*]] = linalg.index 2 : index
// CHECK: %[[HALF:.*]] = arith.constant 5.000000e-01 : f64
// CHECK: %[[SHIFT:.*]] = arith.addf %{{.*}}, %[[HALF]] : f64
// CHECK: %[[SCALE:.*]] = arith.constant 2.000000e+00 : f64
// CHECK: %[[DIV:.*]] = arith.divf %[[SHIFT]], %[[SCALE]] : f64
// CHECK: arith.subf %[[DIV]], %{{.*}} : f64
// CHECK: math.floor
// CHECK: %[[T00:.*]] = tensor.extract %[[X]]
// CHECK: %[[T01:.*]] = tensor.extract %[[X]]
// CHECK: %[[T10:.*]] = tensor.extract %[[X]]
// CHECK: %[[T11:.*]] = tensor.extract %[[X]]
// CHECK-NOT: tensor.extract
// CHECK: arith.truncf %{{.*}} : f64 to f32
func.func @resize_linear(%x: tensor<1x1x4x4xf32>) -> tensor<1x1x8x8xf32> {
  %y = kiln.resize %x {mode = #kiln.resize_mode<linear>, coordinate_mode = #kiln.coordinate_mode<half_pixel>,
                       scales = array<f64: 1.0, 1.0, 2.0, 2.0>} : tensor<1x1x4x4xf32> to tensor<1x1x8x8xf32>
  return %y : tensor<1x1x8x8xf32>
}
