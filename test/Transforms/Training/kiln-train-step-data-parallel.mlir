// RUN: kiln-opt %s --kiln-train-step="optimizer=sgd lr=0.1 data-parallel=true bucket-bytes=80" | FileCheck %s
// RUN: kiln-opt %s --kiln-train-step="optimizer=sgd lr=0.1 data-parallel=true" | FileCheck %s --check-prefix=ONE
// RUN: kiln-opt %s --kiln-train-step="optimizer=sgd lr=0.1 data-parallel=true grad-accum=2" | FileCheck %s --check-prefix=ACCUM
// RUN: kiln-opt %s --kiln-train-step="optimizer=adam lr=0.1 data-parallel=true bucket-bytes=80 shard-optimizer=3 grad-clip=1.0" | FileCheck %s --check-prefix=SHARD
// RUN: not kiln-opt %s --kiln-train-step="optimizer=sgd shard-optimizer=2" 2>&1 | FileCheck %s --check-prefix=NODP
// NODP: kiln-train-step: shard-optimizer needs data-parallel
// RUN: not kiln-opt %s --kiln-train-step="optimizer=sgd data-parallel=true shard-optimizer=2" 2>&1 | FileCheck %s --check-prefix=NOSTATE
// NOSTATE: kiln-train-step: shard-optimizer: SGD without momentum keeps no optimizer state to shard

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
// A sharded optimizer over 3 ranks: each bucket's gradients (b2 and w2: 20
// values, padded to 21; w1: 16, padded to 18) are flattened, joined and
// reduce-scattered right after the last of them; each rank updates its
// shard of the bucket's parameters with its shard of the Adam state (7 and
// 6 values), and the updated shards are gathered and cut back into
// parameters, each bucket's right after its update. Clipping sums the
// squares of the shards over the ranks (their mean times 3).
// SHARD: training.shard_optimizer = "3"
// SHARD-LABEL: func.func @train_step(
// SHARD-SAME: tensor<7xf32> {kiln.name = "optimizer.bucket0.exp_avg.next", kiln.update = "optimizer.bucket0.exp_avg"}
// SHARD-SAME: tensor<4xf32> {kiln.name = "b2.next", kiln.update = "b2"}, tensor<4x4xf32> {kiln.name = "w2.next", kiln.update = "w2"}
// SHARD-SAME: tensor<6xf32> {kiln.name = "optimizer.bucket1.exp_avg_sq.next", kiln.update = "optimizer.bucket1.exp_avg_sq"}, tensor<4x4xf32> {kiln.name = "w1.next", kiln.update = "w1"}
// SHARD-DAG: %[[W1:.*]] = kiln.get_param @w1
// SHARD-DAG: %[[W2:.*]] = kiln.get_param @w2
// SHARD-DAG: %[[B2:.*]] = kiln.get_param @b2
// SHARD: kiln.all_reduce_mean %{{.*}} : tensor<f32>
// SHARD-NEXT: %[[GB2:.*]] = kiln.mul %[[B2]], %[[B2]]
// SHARD-NEXT: %[[GW2:.*]] = kiln.mul %[[W2]], %[[W2]]
// SHARD: %[[FG2:.*]] = kiln.reshape %[[GW2]] : tensor<4x4xf32> to tensor<16xf32>
// SHARD: %[[JOIN:.*]] = kiln.concat %{{.*}}, %[[FG2]], %{{.*}} {axis = 0 : i64} : tensor<4xf32>, tensor<16xf32>, tensor<1xf32>
// SHARD-NEXT: %[[S0:.*]] = kiln.reduce_scatter_mean %[[JOIN]] {ranks = 3 : i64} : (tensor<21xf32>) -> tensor<7xf32>
// SHARD-NEXT: kiln.add
// SHARD: %[[S1:.*]] = kiln.reduce_scatter_mean %{{.*}} {ranks = 3 : i64} : (tensor<18xf32>) -> tensor<6xf32>
// SHARD: %[[P0:.*]] = kiln.local_shard %{{.*}} {ranks = 3 : i64} : (tensor<21xf32>) -> tensor<7xf32>
// SHARD: %[[P1:.*]] = kiln.local_shard %{{.*}} {ranks = 3 : i64} : (tensor<18xf32>) -> tensor<6xf32>
// SHARD: %[[SQ:.*]] = kiln.all_reduce_mean %{{.*}} : tensor<f32>
// SHARD: kiln.mul %[[SQ]], %{{.*}} : tensor<f32>
// SHARD-NEXT: kiln.sqrt
// SHARD: %[[NEW0:.*]] = kiln.sub %[[P0]], %{{.*}} : tensor<7xf32>
// SHARD-NEXT: %[[G0:.*]] = kiln.all_gather %[[NEW0]] {ranks = 3 : i64} : (tensor<7xf32>) -> tensor<21xf32>
// SHARD-NEXT: %[[PARTS:.*]]:3 = kiln.split %[[G0]] {axis = 0 : i64, sizes = array<i64: 4, 16, 1>}
// SHARD: %[[NEW1:.*]] = kiln.sub %[[P1]], %{{.*}} : tensor<6xf32>
// SHARD-NEXT: %[[G1:.*]] = kiln.all_gather %[[NEW1]] {ranks = 3 : i64} : (tensor<6xf32>) -> tensor<18xf32>
// SHARD: kiln.param @optimizer.bucket0.exp_avg : tensor<7xf32> = dense<0.000000e+00> : tensor<7xf32> {kiln.optimizer_state, kiln.shard_ranks = 3 : i64}
// SHARD: kiln.param @optimizer.bucket1.exp_avg_sq : tensor<6xf32> = dense<0.000000e+00> : tensor<6xf32> {kiln.optimizer_state, kiln.shard_ranks = 3 : i64}

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
