// RUN: kiln-opt %s --kiln-flash-attention=cudnn=true --split-input-file | FileCheck %s
// RUN: kiln-opt %s --kiln-flash-attention="amp=f16 cudnn=true" --split-input-file | FileCheck %s --check-prefix=F16

// With cudnn, causal attention goes to cuDNN's fused attention, which
// stores its output and gradients in bf16: f32 readers read them widened,
// and the output's gradient is rounded to bf16 before the backward reads
// it.
// CHECK-LABEL: func.func @causal(
// CHECK-SAME: %[[Q:[a-z0-9]+]]: tensor<1x2x2x16xf32>, %[[K:[a-z0-9]+]]: tensor<1x2x2x16xf32>, %[[V:[a-z0-9]+]]: tensor<1x2x2x16xf32>, %[[DO:[a-z0-9]+]]: tensor<1x2x2x16xf32>
// CHECK: %[[Q16:.*]] = kiln.cast %[[Q]] : tensor<1x2x2x16xf32> to tensor<1x2x2x16xbf16>
// CHECK: %[[K16:.*]] = kiln.cast %[[K]]
// CHECK: %[[V16:.*]] = kiln.cast %[[V]]
// CHECK: %[[F:.*]]:2 = kiln.flash_attention %[[Q16]], %[[K16]], %[[V16]] {causal, cudnn, scale = 2.500000e-01 : f64}
// CHECK-SAME: -> (tensor<1x2x2x16xbf16>, tensor<1x2x2x2xf32>)
// CHECK: %[[O:.*]] = kiln.cast %[[F]]#0 : tensor<1x2x2x16xbf16> to tensor<1x2x2x16xf32>
// CHECK: %[[DO16:.*]] = kiln.cast %[[DO]] : tensor<1x2x2x16xf32> to tensor<1x2x2x16xbf16>
// CHECK: %[[G:.*]]:4 = kiln.flash_attention_grad %[[Q16]], %[[K16]], %[[V16]], %[[F]]#0, %[[DO16]], %[[F]]#1 {causal, cudnn, scale = 2.500000e-01 : f64}
// CHECK-SAME: -> (tensor<1x2x2x16xbf16>, tensor<1x2x2x16xbf16>, tensor<1x2x2x16xbf16>, tensor<1x2x2xf32>)
// CHECK: %[[DQ:.*]] = kiln.cast %[[G]]#0 : tensor<1x2x2x16xbf16> to tensor<1x2x2x16xf32>
// CHECK: %[[DK:.*]] = kiln.cast %[[G]]#1
// CHECK: %[[DV:.*]] = kiln.cast %[[G]]#2
// CHECK-NOT: kiln.attention
// CHECK: return %[[O]], %[[DQ]], %[[DK]], %[[DV]]
// F16-LABEL: func.func @causal(
// F16: kiln.flash_attention {{.*}} {causal, cudnn
// F16-SAME: -> (tensor<1x2x2x16xf16>, tensor<1x2x2x2xf32>)
func.func @causal(%q: tensor<1x2x2x16xf32>, %k: tensor<1x2x2x16xf32>,
                  %v: tensor<1x2x2x16xf32>, %do: tensor<1x2x2x16xf32>)
    -> (tensor<1x2x2x16xf32>, tensor<1x2x2x16xf32>, tensor<1x2x2x16xf32>,
        tensor<1x2x2x16xf32>) {
  %mask = kiln.constant dense<[[0.0, 0xFF800000], [0.0, 0.0]]> : tensor<2x2xf32>
  %o = kiln.attention %q, %k, %v mask %mask : tensor<2x2xf32> {scale = 0.25 : f64}
      : tensor<1x2x2x16xf32>, tensor<1x2x2x16xf32>, tensor<1x2x2x16xf32>
  %dq, %dk, %dv = kiln.attention_grad %q, %k, %v, %o, %do mask %mask : tensor<2x2xf32> {scale = 0.25 : f64}
      : tensor<1x2x2x16xf32>, tensor<1x2x2x16xf32>, tensor<1x2x2x16xf32>, tensor<1x2x2x16xf32>
  return %o, %dq, %dk, %dv : tensor<1x2x2x16xf32>, tensor<1x2x2x16xf32>,
      tensor<1x2x2x16xf32>, tensor<1x2x2x16xf32>
}

// -----

// A causal_fill with a causal mask (Hugging Face's where() of the lowest
// float) is plain causal on cuDNN: every row keeps its diagonal, so no row
// fills all its scores. Attention without a mask goes to cuDNN too; one
// whose mask must be read stays with Kiln's kernels, in f32.
// CHECK-LABEL: func.func @fills_and_masks(
// CHECK: %[[H:.*]]:2 = kiln.flash_attention %{{.*}}, %{{.*}}, %{{.*}} {causal, cudnn} :
// CHECK: kiln.flash_attention_grad {{.*}}, %[[H]]#1 {causal, cudnn} :
// CHECK: kiln.flash_attention %{{.*}}, %{{.*}}, %{{.*}} {cudnn} :
// CHECK-SAME: -> (tensor<2x1x3x32xbf16>, tensor<2x1x3x2xf32>)
// CHECK: %[[P:.*]]:2 = kiln.flash_attention %{{.*}}, %{{.*}}, %{{.*}} mask %{{.*}} :
// CHECK-SAME: -> (tensor<2x1x3x32xf32>, tensor<2x1x3x2xf32>)
// CHECK: kiln.flash_attention_grad {{.*}}, %[[P]]#1 mask %{{.*}} {masked_fill} :
// CHECK-SAME: -> (tensor<2x1x3x32xf32>, tensor<2x1x3x32xf32>, tensor<2x1x3x32xf32>, tensor<2x1x3xf32>)
func.func @fills_and_masks(%q: tensor<2x1x3x32xf32>, %m: tensor<2x1x1x3xf32>,
                           %g: tensor<2x1x3x32xf32>)
    -> (tensor<2x1x3x32xf32>, tensor<2x1x3x32xf32>, tensor<2x1x3x32xf32>) {
  %causal = kiln.constant dense<[[0.0, -3.40282347E+38, -3.40282347E+38], [0.0, 0.0, -3.40282347E+38], [0.0, 0.0, 0.0]]> : tensor<3x3xf32>
  %h = kiln.attention %q, %q, %q mask %causal : tensor<3x3xf32> {causal_fill}
      : tensor<2x1x3x32xf32>, tensor<2x1x3x32xf32>, tensor<2x1x3x32xf32>
  %hq, %hk, %hv = kiln.attention_grad %q, %q, %q, %h, %g mask %causal : tensor<3x3xf32> {causal_fill}
      : tensor<2x1x3x32xf32>, tensor<2x1x3x32xf32>, tensor<2x1x3x32xf32>, tensor<2x1x3x32xf32>
  %n = kiln.attention %q, %q, %q
      : tensor<2x1x3x32xf32>, tensor<2x1x3x32xf32>, tensor<2x1x3x32xf32>
  %p = kiln.attention %q, %q, %q mask %m : tensor<2x1x1x3xf32> {masked_fill}
      : tensor<2x1x3x32xf32>, tensor<2x1x3x32xf32>, tensor<2x1x3x32xf32>
  %pq, %pk, %pv = kiln.attention_grad %q, %q, %q, %p, %g mask %m : tensor<2x1x1x3xf32> {masked_fill}
      : tensor<2x1x3x32xf32>, tensor<2x1x3x32xf32>, tensor<2x1x3x32xf32>, tensor<2x1x3x32xf32>
  return %hq, %n, %pq : tensor<2x1x3x32xf32>, tensor<2x1x3x32xf32>, tensor<2x1x3x32xf32>
}
