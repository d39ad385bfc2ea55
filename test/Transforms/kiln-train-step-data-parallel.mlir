// RUN: kiln-opt %s --kiln-train-step="optimizer=sgd lr=0.1 data-parallel=true bucket-bytes=80" | FileCheck %s
// RUN: kiln-opt %s --kiln-train-step="optimizer=sgd lr=0.1 data-parallel=true" | FileCheck %s --check-prefix=ONE
// RUN: kiln-opt %s --kiln-train-step="optimizer=sgd lr=0.1 data-parallel=true grad-accum=2" | FileCheck %s --check-prefix=ACCUM

// With accumulation, accumulate_step averages only its loss (reported with
// train_step's); the gradients are averaged once, in train_step.
// ACCUM-LABEL: func.func @accumulate_step(
// ACCUM: %[[L:.*]] = kiln.reduce_sum
// ACCUM: %[[LM:.*]] = kiln.all_reduce_mean %[[L]] : tensor<f32>
// ACCUM-NOT: kiln.all_reduce_mean
// ACCUM: return %[[LM]],
// ACCUM-LABEL: func.func @train_step(
// ACCUM: kiln.all_reduce_mean

// Gradients are averaged over the ranks in buckets of at most 80 bytes, in
// the order the backward pass finishes them (b2, w2, then w1), each bucket
// right after its last gradient, before the backward work that follows; the
// loss as soon as it is computed. The update reads the averages.
// CHECK: training.data_parallel = "1"
// CHECK-LABEL: func.func @train_step(
// CHECK: %[[L:.*]] = kiln.reduce_sum
// CHECK-NEXT: %[[LOSS:.*]] = kiln.all_reduce_mean %[[L]] : tensor<f32>
// CHECK-NEXT: %[[GB2:.*]] = kiln.mul
// CHECK-NEXT: %[[GW2:.*]] = kiln.mul
// CHECK-NEXT: %[[B1:.*]]:2 = kiln.all_reduce_mean %[[GB2]], %[[GW2]] : tensor<4xf32>, tensor<4x4xf32>
// CHECK-NEXT: kiln.add
// CHECK-NEXT: %[[GW1:.*]] = kiln.mul
// CHECK-NEXT: %[[B2:.*]] = kiln.all_reduce_mean %[[GW1]] : tensor<4x4xf32>
// CHECK: kiln.mul %[[B2]]
// CHECK: kiln.mul %[[B1]]#1
// CHECK: kiln.mul %[[B1]]#0
// CHECK: return %[[LOSS]],

// With the default 25 MiB buckets, one bucket after the last gradient.
// ONE-LABEL: func.func @train_step(
// ONE: kiln.all_reduce_mean %{{.*}} : tensor<f32>
// ONE: kiln.all_reduce_mean %{{.*}}, %{{.*}}, %{{.*}} : tensor<4xf32>, tensor<4x4xf32>, tensor<4x4xf32>
// ONE-NOT: kiln.all_reduce_mean
kiln.param @w1 : tensor<4x4xf32> = dense<1.0> : tensor<4x4xf32>
kiln.param @w2 : tensor<4x4xf32> = dense<2.0> : tensor<4x4xf32>
kiln.param @b2 : tensor<4xf32> = dense<0.5> : tensor<4xf32>

func.func @forward(%x: tensor<4xf32> {kiln.name = "x"}) -> (tensor<f32> {kiln.name = "loss"}) {
  %w1 = kiln.get_param @w1 : tensor<4x4xf32>
  %l = kiln.reduce_sum %w1 {dimensions = array<i64: 0, 1>} : tensor<4x4xf32>
  return %l : tensor<f32>
}

// The backward pass finishes the gradients in the order b2, w2, w1, with
// work in between.
func.func @forward_grad(%x: tensor<4xf32> {kiln.name = "x"}) -> (tensor<f32> {kiln.name = "loss"}, tensor<4x4xf32> {kiln.name = "w1.grad"}, tensor<4x4xf32> {kiln.name = "w2.grad"}, tensor<4xf32> {kiln.name = "b2.grad"}) {
  %w1 = kiln.get_param @w1 : tensor<4x4xf32>
  %w2 = kiln.get_param @w2 : tensor<4x4xf32>
  %b2 = kiln.get_param @b2 : tensor<4xf32>
  %l = kiln.reduce_sum %w1 {dimensions = array<i64: 0, 1>} : tensor<4x4xf32>
  %gb2 = kiln.mul %b2, %b2 : tensor<4xf32>
  %gw2 = kiln.mul %w2, %w2 : tensor<4x4xf32>
  %t = kiln.add %w2, %w1 : tensor<4x4xf32>
  %gw1 = kiln.mul %t, %w1 : tensor<4x4xf32>
  return %l, %gw1, %gw2, %gb2 : tensor<f32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4xf32>
}
