// RUN: kiln-opt %s --kiln-rematerialize | FileCheck %s

#id = affine_map<(d0) -> (d0)>

// %y = exp(%x) is read by the backward pass, and %x is read there too: the
// backward pass gets its own exp into a fresh tensor, just before the first
// backward op that reads it; the forward matmul keeps the original.
// CHECK-LABEL: func.func @recompute(
// CHECK-SAME: %[[X:.*]]: tensor<4xf32>, %[[W:.*]]: tensor<4x4xf32>
// CHECK: %[[E:.*]] = tensor.empty() : tensor<4xf32>
// CHECK: %[[Y:.*]] = linalg.generic {{.*}} ins(%[[X]] : tensor<4xf32>) outs(%[[E]] : tensor<4xf32>)
// CHECK: math.exp
// CHECK: linalg.matvec ins(%[[W]], %[[Y]] :
// CHECK: %[[GX:.*]] = linalg.generic {{.*}} ins(%[[X]] : tensor<4xf32>)
// CHECK: %[[Y2:.*]] = linalg.generic {{.*}} ins(%[[X]] : tensor<4xf32>) outs(%{{.*}} : tensor<4xf32>)
// CHECK: math.exp
// CHECK: linalg.generic {{.*}} ins(%[[Y2]], %[[GX]] :
func.func @recompute(%x: tensor<4xf32>, %w: tensor<4x4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %e = tensor.empty() : tensor<4xf32>
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%x : tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = math.exp %a : f32
    linalg.yield %r : f32
  } -> tensor<4xf32>
  %zero = arith.constant 0.0 : f32
  %z0 = tensor.empty() : tensor<4xf32>
  %z = linalg.fill ins(%zero : f32) outs(%z0 : tensor<4xf32>) -> tensor<4xf32>
  %fwd = linalg.matvec ins(%w, %y : tensor<4x4xf32>, tensor<4xf32>) outs(%z : tensor<4xf32>) -> tensor<4xf32>
  // The backward pass: reads %x, then %y.
  %e1 = tensor.empty() : tensor<4xf32> loc(fused<"kiln.backward">[unknown])
  %gx = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%x : tensor<4xf32>) outs(%e1 : tensor<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.mulf %a, %a : f32
    linalg.yield %r : f32
  } -> tensor<4xf32> loc(fused<"kiln.backward">[unknown])
  %e2 = tensor.empty() : tensor<4xf32> loc(fused<"kiln.backward">[unknown])
  %gy = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
      ins(%y, %gx : tensor<4xf32>, tensor<4xf32>) outs(%e2 : tensor<4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.mulf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<4xf32> loc(fused<"kiln.backward">[unknown])
  return %fwd, %gy : tensor<4xf32>, tensor<4xf32>
}

// %y = exp(%t), but the backward pass does not otherwise keep %t (a matvec
// result only the forward pass reads): recomputing %y would keep %t alive
// instead, so nothing changes.
// CHECK-LABEL: func.func @operand_not_kept(
// CHECK-COUNT-1: math.exp
// CHECK-NOT: math.exp
func.func @operand_not_kept(%x: tensor<4xf32>, %w: tensor<4x4xf32>) -> tensor<4xf32> {
  %zero = arith.constant 0.0 : f32
  %z0 = tensor.empty() : tensor<4xf32>
  %z = linalg.fill ins(%zero : f32) outs(%z0 : tensor<4xf32>) -> tensor<4xf32>
  %t = linalg.matvec ins(%w, %x : tensor<4x4xf32>, tensor<4xf32>) outs(%z : tensor<4xf32>) -> tensor<4xf32>
  %e = tensor.empty() : tensor<4xf32>
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%t : tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = math.exp %a : f32
    linalg.yield %r : f32
  } -> tensor<4xf32>
  %e2 = tensor.empty() : tensor<4xf32> loc(fused<"kiln.backward">[unknown])
  %gy = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%y : tensor<4xf32>) outs(%e2 : tensor<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.mulf %a, %a : f32
    linalg.yield %r : f32
  } -> tensor<4xf32> loc(fused<"kiln.backward">[unknown])
  return %gy : tensor<4xf32>
}

// A reduction is not recomputed: it is not one pass over its result.
// CHECK-LABEL: func.func @reduction_stays(
// CHECK-COUNT-1: linalg.reduce
// CHECK-NOT: linalg.reduce
func.func @reduction_stays(%x: tensor<4xf32>) -> tensor<f32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<f32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<f32>) -> tensor<f32>
  %s = linalg.reduce ins(%x : tensor<4xf32>) outs(%z : tensor<f32>) dimensions = [0]
    (%a: f32, %acc: f32) {
      %r = arith.addf %a, %acc : f32
      linalg.yield %r : f32
    }
  %e2 = tensor.empty() : tensor<f32> loc(fused<"kiln.backward">[unknown])
  %g = linalg.generic {indexing_maps = [affine_map<() -> ()>, affine_map<() -> ()>], iterator_types = []}
      ins(%s : tensor<f32>) outs(%e2 : tensor<f32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.mulf %a, %a : f32
    linalg.yield %r : f32
  } -> tensor<f32> loc(fused<"kiln.backward">[unknown])
  return %g : tensor<f32>
}
