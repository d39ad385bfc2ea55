// Option errors name the option and what it accepts.
// RUN: not kiln-opt %s --kiln-train-step="optimizer=rmsprop" 2>&1 | FileCheck %s --check-prefix=OPT
// OPT: kiln-train-step: unknown optimizer 'rmsprop' (expected sgd, adam, adamw or adagrad)
// RUN: not kiln-opt %s --kiln-train-step="schedule=step" 2>&1 | FileCheck %s --check-prefix=SCHED
// SCHED: kiln-train-step: unknown schedule 'step' (expected constant, linear or cosine)
// RUN: not kiln-opt %s --kiln-train-step="schedule=cosine warmup-steps=10 total-steps=10" 2>&1 | FileCheck %s --check-prefix=TOTAL
// TOTAL: kiln-train-step: the cosine schedule needs total steps (10) greater than the warm-up steps (10)
// RUN: not kiln-opt %s --kiln-train-step="optimizer=adam nesterov=true" 2>&1 | FileCheck %s --check-prefix=NESTEROV
// NESTEROV: kiln-train-step: Nesterov momentum needs --optimizer=sgd and a positive momentum
// RUN: not kiln-opt %s --kiln-train-step="grad-accum=0" 2>&1 | FileCheck %s --check-prefix=ACCUM
// ACCUM: kiln-train-step: gradient accumulation needs at least 1 micro-batch, not 0
// RUN: not kiln-opt %s --kiln-train-step="beta2=1.0 optimizer=adam" 2>&1 | FileCheck %s --check-prefix=BETA
// BETA: kiln-train-step: beta1 and beta2 must lie in [0, 1)
// RUN: not kiln-opt %s --kiln-train-step="function=model" 2>&1 | FileCheck %s --check-prefix=GRAD
// GRAD: kiln-train-step: no gradient function 'model_grad'; run kiln-autodiff first
// RUN: not kiln-opt %s --kiln-train-step="loss-scale=1024" 2>&1 | FileCheck %s --check-prefix=SEED
// SEED: kiln-train-step: loss scaling needs the gradient seed kiln-autodiff marks (kiln.grad_seed); run kiln-train-step right after kiln-autodiff

func.func @forward(%x: tensor<f32> {kiln.name = "x"}) -> (tensor<f32> {kiln.name = "loss"}) {
  return %x : tensor<f32>
}

func.func @forward_grad(%x: tensor<f32> {kiln.name = "x"}) -> (tensor<f32> {kiln.name = "loss"}) {
  return %x : tensor<f32>
}
