// RUN: kiln-opt %s --kiln-train-step="optimizer=sgd lr=0.5 momentum=0.9 nesterov=true weight-decay=0.01" | FileCheck %s --check-prefix=SGD
// RUN: kiln-opt %s --kiln-train-step="optimizer=adamw lr=0.001 weight-decay=0.1 schedule=linear warmup-steps=2 total-steps=10 grad-clip=1.0" | FileCheck %s --check-prefix=ADAMW
// RUN: kiln-opt %s --kiln-train-step="optimizer=adagrad lr=0.1 lr-decay=0.01 initial-accumulator=0.5 grad-accum=4" | FileCheck %s --check-prefix=ADAGRAD
// RUN: kiln-opt %s --kiln-train-step="optimizer=adam schedule=cosine total-steps=100" | FileCheck %s --check-prefix=ADAM

// The gradient function kiln-autodiff builds for a loss of one parameter.
kiln.param @w : tensor<3xf32> = dense<[1.0, 2.0, 3.0]> : tensor<3xf32>

func.func @forward(%x: tensor<3xf32> {kiln.name = "x"}) -> (tensor<f32> {kiln.name = "loss"}, tensor<3xf32> {kiln.name = "y"}) {
  %w = kiln.get_param @w : tensor<3xf32>
  %y = kiln.mul %x, %w : tensor<3xf32>
  %l = kiln.reduce_sum %y {dimensions = array<i64: 0>} : tensor<3xf32>
  return %l, %y : tensor<f32>, tensor<3xf32>
}

func.func @forward_grad(%x: tensor<3xf32> {kiln.name = "x"}) -> (tensor<f32> {kiln.name = "loss"}, tensor<3xf32> {kiln.name = "w.grad"}) {
  %w = kiln.get_param @w : tensor<3xf32>
  %y = kiln.mul %x, %w : tensor<3xf32>
  %l = kiln.reduce_sum %y {dimensions = array<i64: 0>} : tensor<3xf32>
  return %l, %x : tensor<f32>, tensor<3xf32>
}

// Optimizer state: zero-initialized params marked kiln.optimizer_state; the
// step count always.
// SGD: module attributes {kiln.metadata = {training.grad_accum = "1", training.lr = "0.5", training.optimizer = "sgd", training.schedule = "constant"}}
// SGD-NOT: accumulate_step
// SGD-LABEL: func.func @train_step(
// SGD-SAME: -> (tensor<f32> {kiln.name = "loss"}, tensor<f32> {kiln.name = "lr"}, tensor<f32> {kiln.name = "optimizer.step.next", kiln.update = "optimizer.step"}, tensor<3xf32> {kiln.name = "w.momentum_buffer.next", kiln.update = "w.momentum_buffer"}, tensor<3xf32> {kiln.name = "w.next", kiln.update = "w"})
// SGD-DAG: %[[BUF:.*]] = kiln.get_param @w.momentum_buffer
// SGD-DAG: %[[W:.*]] = kiln.get_param @w :
// SGD-DAG: %[[STEP:.*]] = kiln.get_param @optimizer.step
// SGD: %[[T:.*]] = kiln.add %[[STEP]], %{{.*}} : tensor<f32>
// L2 weight decay: g + 0.01 w.
// SGD: %[[WD:.*]] = kiln.constant dense<0.00999999977> : tensor<3xf32>
// SGD: %[[DW:.*]] = kiln.mul %[[W]], %[[WD]]
// SGD: %[[G:.*]] = kiln.add %{{.*}}, %[[DW]]
// buf' = 0.9 buf + g; Nesterov: g + 0.9 buf'.
// SGD: %[[MB:.*]] = kiln.mul %[[BUF]], %{{.*}}
// SGD: %[[NEXTBUF:.*]] = kiln.add %[[MB]], %[[G]]
// SGD: %[[MN:.*]] = kiln.mul %[[NEXTBUF]], %{{.*}}
// SGD: %[[NG:.*]] = kiln.add %[[G]], %[[MN]]
// SGD: %[[STEPPED:.*]] = kiln.mul %[[NG]], %{{.*}}
// SGD: %[[NEXTW:.*]] = kiln.sub %[[W]], %[[STEPPED]]
// SGD: return %{{.*}}, %{{.*}}, %[[T]], %[[NEXTBUF]], %[[NEXTW]]
// eval_step is forward returning the loss alone.
// SGD-LABEL: func.func @eval_step(
// SGD-SAME: -> (tensor<f32> {kiln.name = "loss"})
// SGD: kiln.reduce_sum
// SGD-NEXT: return
// SGD-DAG: kiln.param @optimizer.step : tensor<f32> = dense<0.000000e+00> : tensor<f32> {kiln.optimizer_state}
// SGD-DAG: kiln.param @w.momentum_buffer : tensor<3xf32> = dense<0.000000e+00> : tensor<3xf32> {kiln.optimizer_state}

// AdamW with a linear schedule and clipping: lr and grad_norm outputs.
// ADAMW: module attributes {kiln.metadata = {training.grad_accum = "1", training.grad_clip = "1", training.lr = "0.001", training.optimizer = "adamw", training.schedule = "linear"}}
// ADAMW-LABEL: func.func @train_step(
// ADAMW-SAME: -> (tensor<f32> {kiln.name = "loss"}, tensor<f32> {kiln.name = "lr"}, tensor<f32> {kiln.name = "grad_norm"}, tensor<f32> {kiln.name = "optimizer.step.next", kiln.update = "optimizer.step"}, tensor<3xf32> {kiln.name = "w.exp_avg.next", kiln.update = "w.exp_avg"}, tensor<3xf32> {kiln.name = "w.exp_avg_sq.next", kiln.update = "w.exp_avg_sq"}, tensor<3xf32> {kiln.name = "w.next", kiln.update = "w"})
// The schedule in f64: warm-up while t - 1 < 2, then (10 - s) / 8.
// ADAMW: kiln.compare <lt>, %{{.*}}, %{{.*}} : tensor<f64>
// ADAMW: kiln.select
// Global norm: sqrt(sum g^2), coefficient min(1, 1 / (norm + 1e-6)).
// ADAMW: %[[SQ:.*]] = kiln.reduce_sum
// ADAMW: %[[NORM:.*]] = kiln.sqrt %{{.*}} : tensor<f32>
// ADAMW: kiln.min
// Decoupled decay multiplies w by 1 - lr wd.
// ADAMW: kiln.pow
// ADAMW: return %{{.*}}, %{{.*}}, %[[NORM]],
// ADAMW-LABEL: func.func @eval_step(
// ADAMW-DAG: kiln.param @w.exp_avg : tensor<3xf32> = dense<0.000000e+00> : tensor<3xf32> {kiln.optimizer_state}
// ADAMW-DAG: kiln.param @w.exp_avg_sq : tensor<3xf32> = dense<0.000000e+00> : tensor<3xf32> {kiln.optimizer_state}

// Adagrad with four micro-batches: accumulate_step adds into w.grad_accum,
// train_step averages and clears it.
// ADAGRAD: training.grad_accum = "4"
// ADAGRAD-LABEL: func.func @accumulate_step(
// ADAGRAD-SAME: -> (tensor<f32> {kiln.name = "loss"}, tensor<3xf32> {kiln.name = "w.grad_accum.next", kiln.update = "w.grad_accum"})
// ADAGRAD: %[[ACC:.*]] = kiln.get_param @w.grad_accum
// ADAGRAD: %[[SUM:.*]] = kiln.add %[[ACC]], %{{.*}}
// ADAGRAD: return %{{.*}}, %[[SUM]]
// ADAGRAD-LABEL: func.func @train_step(
// ADAGRAD-SAME: -> (tensor<f32> {kiln.name = "loss"}, tensor<f32> {kiln.name = "lr"}, tensor<f32> {kiln.name = "optimizer.step.next", kiln.update = "optimizer.step"}, tensor<3xf32> {kiln.name = "w.grad_accum.next", kiln.update = "w.grad_accum"}, tensor<3xf32> {kiln.name = "w.sum.next", kiln.update = "w.sum"}, tensor<3xf32> {kiln.name = "w.next", kiln.update = "w"})
// ADAGRAD: %[[QUARTER:.*]] = kiln.constant dense<2.500000e-01> : tensor<3xf32>
// ADAGRAD: kiln.mul %{{.*}}, %[[QUARTER]]
// ADAGRAD: %[[ZERO:.*]] = kiln.constant dense<0.000000e+00> : tensor<3xf32>
// ADAGRAD: return %{{.*}}, %{{.*}}, %{{.*}}, %[[ZERO]],
// ADAGRAD-DAG: kiln.param @w.grad_accum : tensor<3xf32> = dense<0.000000e+00> : tensor<3xf32> {kiln.optimizer_state}
// ADAGRAD-DAG: kiln.param @w.sum : tensor<3xf32> = dense<5.000000e-01> : tensor<3xf32> {kiln.optimizer_state}

// Adam: L2 decay and bias correction; a cosine schedule uses kiln.cos.
// ADAM-LABEL: func.func @train_step(
// ADAM: kiln.cos %{{.*}} : tensor<f64>
// ADAM: kiln.pow

