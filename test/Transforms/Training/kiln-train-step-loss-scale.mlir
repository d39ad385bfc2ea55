// RUN: kiln-opt %s --kiln-train-step="optimizer=sgd lr=0.5 loss-scale=1024 loss-scale-growth-interval=3" | FileCheck %s
// RUN: kiln-opt %s --kiln-train-step="optimizer=sgd grad-accum=2 loss-scale=8" | FileCheck %s --check-prefix=ACCUM
// RUN: not kiln-opt %s --kiln-train-step="optimizer=sgd loss-scale=-1" 2>&1 | FileCheck %s --check-prefix=NEG
// RUN: kiln-opt %s --kiln-train-step="optimizer=sgd momentum=0.9 lr=0.5 loss-scale=1024 data-parallel=true shard-optimizer=2" | FileCheck %s --check-prefix=SHARD
// RUN: not kiln-opt %s --kiln-train-step="optimizer=sgd loss-scale=8 loss-scale-growth-interval=0" 2>&1 | FileCheck %s --check-prefix=INTERVAL

// Dynamic loss scaling (kilnc --amp=fp16): the backward pass starts from the
// scale, the gradients are divided by it, and an update with a non-finite
// gradient is skipped while the scale halves (GradScaler).

kiln.param @w : tensor<3xf32> = dense<[1.0, 2.0, 3.0]> : tensor<3xf32>

func.func @forward(%x: tensor<3xf32> {kiln.name = "x"}) -> (tensor<f32> {kiln.name = "loss"}) {
  %w = kiln.get_param @w : tensor<3xf32>
  %y = kiln.mul %x, %w : tensor<3xf32>
  %l = kiln.reduce_sum %y {dimensions = array<i64: 0>} : tensor<3xf32>
  return %l : tensor<f32>
}

func.func @forward_grad(%x: tensor<3xf32> {kiln.name = "x"}) -> (tensor<f32> {kiln.name = "loss"}, tensor<3xf32> {kiln.name = "w.grad"}) {
  %w = kiln.get_param @w : tensor<3xf32>
  %y = kiln.mul %x, %w : tensor<3xf32>
  %l = kiln.reduce_sum %y {dimensions = array<i64: 0>} : tensor<3xf32>
  %seed = kiln.constant {kiln.grad_seed} dense<1.0> : tensor<f32>
  %b = kiln.broadcast %seed : tensor<f32> to tensor<3xf32>
  %g = kiln.mul %b, %x : tensor<3xf32>
  return %l, %g : tensor<f32>, tensor<3xf32>
}

// With a sharded optimizer each rank checks its shard of the gradients: the
// ranks' sums of g * 0 are summed (their mean times 2) before the check, so
// all skip the same updates.
// SHARD-LABEL: func.func @train_step(
// SHARD: %[[G:.*]] = kiln.reduce_scatter_mean %{{.*}} {ranks = 2 : i64} : (tensor<4xf32>) -> tensor<2xf32>
// SHARD: %[[UNSCALED:.*]] = kiln.mul %[[G]], %{{.*}} : tensor<2xf32>
// SHARD: %[[ZEROS:.*]] = kiln.mul %[[UNSCALED]], %{{.*}} : tensor<2xf32>
// SHARD: kiln.reduce_sum %[[ZEROS]]
// SHARD: %[[MEAN:.*]] = kiln.all_reduce_mean %{{.*}} : tensor<f32>
// SHARD: %[[SUM:.*]] = kiln.mul %[[MEAN]], %{{.*}} : tensor<f32>
// SHARD: %[[FINITE:.*]] = kiln.compare <eq>, %[[SUM]], %{{.*}} : tensor<f32>
// SHARD: kiln.all_gather
// SHARD: kiln.select %{{.*}}, %{{.*}}, %{{.*}} : tensor<3xi1>, tensor<3xf32>

// CHECK: module attributes {kiln.metadata = {{{.*}}training.loss_scale = "dynamic"
// CHECK-LABEL: func.func @train_step(
// CHECK-SAME: -> (tensor<f32> {kiln.name = "loss"}, tensor<f32> {kiln.name = "loss_scale"}, tensor<f32> {kiln.name = "lr"}, tensor<f32> {kiln.name = "optimizer.step.next", kiln.update = "optimizer.step"}, tensor<3xf32> {kiln.name = "w.next", kiln.update = "w"}, tensor<f32> {kiln.name = "amp.loss_scale.next", kiln.update = "amp.loss_scale"}, tensor<f32> {kiln.name = "amp.growth_tracker.next", kiln.update = "amp.growth_tracker"})
// CHECK-DAG: %[[TRACKER:.*]] = kiln.get_param @amp.growth_tracker
// CHECK-DAG: %[[OLDW:.*]] = kiln.get_param @w :
// CHECK-DAG: %[[OLDSTEP:.*]] = kiln.get_param @optimizer.step
// CHECK-DAG: %[[SCALE:.*]] = kiln.get_param @amp.loss_scale
// CHECK-NOT: kiln.grad_seed
// The seed is the scale.
// CHECK: %[[SEED:.*]] = kiln.broadcast %{{.*}} : tensor<f32> to tensor<3xf32>
// CHECK: %[[G:.*]] = kiln.mul %[[SEED]], %arg0
// CHECK: %[[NEXTSTEP:.*]] = kiln.add
// Unscaled by the f64 reciprocal of the scale, rounded to f32.
// CHECK: %[[RECIP:.*]] = kiln.div %{{.*}}, %{{.*}} : tensor<f64>
// CHECK: %[[INV:.*]] = kiln.cast %[[RECIP]] : tensor<f64> to tensor<f32>
// CHECK: %[[INVB:.*]] = kiln.broadcast %[[INV]]
// CHECK: %[[UNSCALED:.*]] = kiln.mul %[[G]], %[[INVB]]
// Finite when the sum of every gradient times 0 is 0.
// CHECK: %[[ZEROS:.*]] = kiln.mul %[[UNSCALED]], %{{.*}}
// CHECK: %[[POISON:.*]] = kiln.reduce_sum %[[ZEROS]]
// CHECK: %[[ANY:.*]] = kiln.add %{{.*}}, %[[POISON]]
// CHECK: %[[FINITE:.*]] = kiln.compare <eq>, %[[ANY]], %{{.*}} : tensor<f32>
// CHECK: %[[NEWW:.*]] = kiln.sub
// Skipped unless finite: the count and the weights keep their values.
// CHECK: %[[STEPOUT:.*]] = kiln.select %[[FINITE]], %[[NEXTSTEP]], %[[OLDSTEP]]
// CHECK: %[[FINITE3:.*]] = kiln.broadcast %[[FINITE]] : tensor<i1> to tensor<3xi1>
// CHECK: %[[WOUT:.*]] = kiln.select %[[FINITE3]], %[[NEWW]], %[[OLDW]]
// The third finite update in a row doubles the scale, unless that
// overflows; a skipped one halves it.
// CHECK: %[[SUCC:.*]] = kiln.add %[[TRACKER]]
// CHECK: %[[THREE:.*]] = kiln.constant dense<3.000000e+00>
// CHECK: %[[GROW:.*]] = kiln.compare <eq>, %[[SUCC]], %[[THREE]]
// CHECK: %[[ZERO:.*]] = kiln.constant dense<0.000000e+00>
// CHECK: %[[DOUBLE:.*]] = kiln.mul %[[SCALE]], %{{.*}} : tensor<f32>
// CHECK: %[[DZ:.*]] = kiln.mul %[[DOUBLE]], %[[ZERO]]
// CHECK: %[[DFINITE:.*]] = kiln.compare <eq>, %[[DZ]], %[[ZERO]]
// CHECK: %[[KEPT:.*]] = kiln.select %[[DFINITE]], %[[DOUBLE]], %[[SCALE]]
// CHECK: %[[GROWN:.*]] = kiln.select %[[GROW]], %[[KEPT]], %[[SCALE]]
// CHECK: %[[HALF:.*]] = kiln.mul %{{.*}}, %{{.*}} : tensor<f32>
// CHECK: %[[SCALEOUT:.*]] = kiln.select %[[FINITE]], %[[GROWN]], %[[HALF]]
// CHECK: %[[COUNTED:.*]] = kiln.select %[[GROW]], %[[ZERO]], %[[SUCC]]
// CHECK: %[[TRACKOUT:.*]] = kiln.select %[[FINITE]], %[[COUNTED]], %[[ZERO]]
// CHECK: return %{{.*}}, %{{.*}}, %{{.*}}, %[[STEPOUT]], %[[WOUT]], %[[SCALEOUT]], %[[TRACKOUT]]
// CHECK-DAG: kiln.param @amp.loss_scale : tensor<f32> = dense<1.024000e+03> : tensor<f32> {kiln.optimizer_state}
// CHECK-DAG: kiln.param @amp.growth_tracker : tensor<f32> = dense<0.000000e+00> : tensor<f32> {kiln.optimizer_state}

// With gradient accumulation both steps start from the scale over the
// number of micro-batches (as scaler.scale(loss / K)), and the accumulators
// are cleared whether or not the update is skipped.
// ACCUM-LABEL: func.func @accumulate_step(
// ACCUM: %[[S:.*]] = kiln.get_param @amp.loss_scale
// ACCUM: %[[TWO:.*]] = kiln.constant dense<2.000000e+00> : tensor<f32>
// ACCUM: %[[SEED:.*]] = kiln.div %[[S]], %[[TWO]] : tensor<f32>
// ACCUM: kiln.broadcast %[[SEED]]
// ACCUM-LABEL: func.func @train_step(
// ACCUM: %[[CLEAR:.*]] = kiln.constant dense<0.000000e+00> : tensor<3xf32>
// ACCUM: return {{.*}}, %[[CLEAR]],

// NEG: kiln-train-step: the loss scale must be a finite positive number (0: none), not -1
// INTERVAL: kiln-train-step: the loss-scale growth interval must lie in [1, 2^24], not 0
