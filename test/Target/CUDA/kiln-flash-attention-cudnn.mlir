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

// -----

// An additive mask (a padding mask, here one per batch row) goes to cuDNN
// as its bias, clamped to at least -2^100 first: cuDNN adds it to the
// scores in whatever units it computes them, where the lowest float times
// log2 e would be -inf. The mask's gradient-free sum needs no fill.
// CHECK-LABEL: func.func @additive_mask(
// CHECK-SAME: %[[Q:[a-z0-9]+]]: tensor<2x1x3x32xf32>, %[[M:[a-z0-9]+]]: tensor<2x1x1x3xf32>
// CHECK: %[[LEAST:.*]] = kiln.constant dense<-1.2676506E+30> : tensor<2x1x1x3xf32>
// CHECK: %[[CLAMPED:.*]] = kiln.max %[[M]], %[[LEAST]] : tensor<2x1x1x3xf32>
// CHECK: %[[F:.*]]:2 = kiln.flash_attention %{{.*}}, %{{.*}}, %{{.*}} mask %[[CLAMPED]] {cudnn} :
// CHECK-SAME: -> (tensor<2x1x3x32xbf16>, tensor<2x1x3x2xf32>)
// CHECK: kiln.flash_attention_grad {{.*}}, %[[F]]#1 mask %[[CLAMPED]] {cudnn} :
// CHECK-SAME: -> (tensor<2x1x3x32xbf16>, tensor<2x1x3x32xbf16>, tensor<2x1x3x32xbf16>, tensor<2x1x3xf32>)
func.func @additive_mask(%q: tensor<2x1x3x32xf32>, %m: tensor<2x1x1x3xf32>,
                         %g: tensor<2x1x3x32xf32>)
    -> (tensor<2x1x3x32xf32>, tensor<2x1x3x32xf32>) {
  %p = kiln.attention %q, %q, %q mask %m : tensor<2x1x1x3xf32>
      : tensor<2x1x3x32xf32>, tensor<2x1x3x32xf32>, tensor<2x1x3x32xf32>
  %pq, %pk, %pv = kiln.attention_grad %q, %q, %q, %p, %g mask %m : tensor<2x1x1x3xf32>
      : tensor<2x1x3x32xf32>, tensor<2x1x3x32xf32>, tensor<2x1x3x32xf32>, tensor<2x1x3x32xf32>
  return %p, %pq : tensor<2x1x3x32xf32>, tensor<2x1x3x32xf32>
}

// -----

// A causal_fill over a mask the kernels must read (causal plus padding, as
// GPT-2 sums them) fills scores: Kiln's kernels keep it.
// CHECK-LABEL: func.func @causal_fill_with_padding(
// CHECK: %[[P:.*]]:2 = kiln.flash_attention %{{.*}}, %{{.*}}, %{{.*}} mask %{{.*}} :
// CHECK-SAME: -> (tensor<2x1x3x32xf32>, tensor<2x1x3x2xf32>)
// CHECK: kiln.flash_attention_grad {{.*}}, %[[P]]#1 mask %{{.*}} {causal_fill} :
// CHECK-NOT: cudnn
func.func @causal_fill_with_padding(%q: tensor<2x1x3x32xf32>, %m: tensor<2x1x3x3xf32>,
                                    %g: tensor<2x1x3x32xf32>) -> tensor<2x1x3x32xf32> {
  %p = kiln.attention %q, %q, %q mask %m : tensor<2x1x3x3xf32>
      : tensor<2x1x3x32xf32>, tensor<2x1x3x32xf32>, tensor<2x1x3x32xf32>
  %pq, %pk, %pv = kiln.attention_grad %q, %q, %q, %p, %g mask %m : tensor<2x1x3x3xf32> {causal_fill}
      : tensor<2x1x3x32xf32>, tensor<2x1x3x32xf32>, tensor<2x1x3x32xf32>, tensor<2x1x3x32xf32>
  return %pq : tensor<2x1x3x32xf32>
}

// -----

// Grouped-query attention, as imported (each of the key's and value's two
// heads repeated twice): cuDNN reads the two heads, and its key and value
// gradients, of two heads, replace the sums over each group.
// CHECK-LABEL: func.func @grouped(
// CHECK-SAME: %[[Q:[a-z0-9]+]]: tensor<1x4x8x16xf32>, %[[K:[a-z0-9]+]]: tensor<1x2x8x16xf32>, %[[V:[a-z0-9]+]]: tensor<1x2x8x16xf32>
// CHECK: %[[K5:.*]] = kiln.reshape %[[K]] : tensor<1x2x8x16xf32> to tensor<1x2x1x8x16xf32>
// CHECK: %[[V5:.*]] = kiln.reshape %[[V]] : tensor<1x2x8x16xf32> to tensor<1x2x1x8x16xf32>
// CHECK: %[[KG:.*]] = kiln.reshape %[[K5]] : tensor<1x2x1x8x16xf32> to tensor<1x2x8x16xf32>
// CHECK: %[[VG:.*]] = kiln.reshape %[[V5]] : tensor<1x2x1x8x16xf32> to tensor<1x2x8x16xf32>
// CHECK: %[[K16:.*]] = kiln.cast %[[KG]] : tensor<1x2x8x16xf32> to tensor<1x2x8x16xbf16>
// CHECK: %[[V16:.*]] = kiln.cast %[[VG]] : tensor<1x2x8x16xf32> to tensor<1x2x8x16xbf16>
// CHECK: %[[F:.*]]:2 = kiln.flash_attention %{{.*}}, %[[K16]], %[[V16]] {cudnn, scale = 2.500000e-01 : f64} : (tensor<1x4x8x16xbf16>, tensor<1x2x8x16xbf16>, tensor<1x2x8x16xbf16>)
// CHECK: %[[G:.*]]:4 = kiln.flash_attention_grad {{.*}} {cudnn, scale = 2.500000e-01 : f64}
// CHECK-SAME: -> (tensor<1x4x8x16xbf16>, tensor<1x2x8x16xbf16>, tensor<1x2x8x16xbf16>, tensor<1x4x8xf32>)
// CHECK-DAG: %[[DK:.*]] = kiln.cast %[[G]]#1 : tensor<1x2x8x16xbf16> to tensor<1x2x8x16xf32>
// CHECK-DAG: %[[DV:.*]] = kiln.cast %[[G]]#2 : tensor<1x2x8x16xbf16> to tensor<1x2x8x16xf32>
// CHECK-NOT: kiln.reduce_sum
// CHECK: return %{{.*}}, %[[DK]], %[[DV]]
func.func @grouped(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x8x16xf32>,
                   %v: tensor<1x2x8x16xf32>, %do: tensor<1x4x8x16xf32>)
    -> (tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>) {
  %k5 = kiln.reshape %k : tensor<1x2x8x16xf32> to tensor<1x2x1x8x16xf32>
  %kb = kiln.broadcast %k5 : tensor<1x2x1x8x16xf32> to tensor<1x2x2x8x16xf32>
  %kr = kiln.reshape %kb : tensor<1x2x2x8x16xf32> to tensor<1x4x8x16xf32>
  %v5 = kiln.reshape %v : tensor<1x2x8x16xf32> to tensor<1x2x1x8x16xf32>
  %vb = kiln.broadcast %v5 : tensor<1x2x1x8x16xf32> to tensor<1x2x2x8x16xf32>
  %vr = kiln.reshape %vb : tensor<1x2x2x8x16xf32> to tensor<1x4x8x16xf32>
  %o = kiln.attention %q, %kr, %vr {scale = 0.25 : f64}
      : tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>
  %dq, %dk, %dv = kiln.attention_grad %q, %kr, %vr, %o, %do {scale = 0.25 : f64}
      : tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>
  %dk5 = kiln.reshape %dk : tensor<1x4x8x16xf32> to tensor<1x2x2x8x16xf32>
  %dks = kiln.reduce_sum %dk5 {dimensions = array<i64: 2>} : tensor<1x2x2x8x16xf32>
  %dv5 = kiln.reshape %dv : tensor<1x4x8x16xf32> to tensor<1x2x2x8x16xf32>
  %dvs = kiln.reduce_sum %dv5 {dimensions = array<i64: 2>} : tensor<1x2x2x8x16xf32>
  return %dq, %dks, %dvs : tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>
}

// -----

// Where something else reads a repeated key's gradient, cuDNN reads the
// repeated heads as they are.
// CHECK-LABEL: func.func @grouped_gradient_read(
// CHECK: kiln.flash_attention %{{.*}}, %{{.*}}, %{{.*}} {cudnn} : (tensor<1x4x8x16xbf16>, tensor<1x4x8x16xbf16>, tensor<1x4x8x16xbf16>)
// CHECK: kiln.reduce_sum
func.func @grouped_gradient_read(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x8x16xf32>,
                                 %do: tensor<1x4x8x16xf32>)
    -> (tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>) {
  %k5 = kiln.reshape %k : tensor<1x2x8x16xf32> to tensor<1x2x1x8x16xf32>
  %kb = kiln.broadcast %k5 : tensor<1x2x1x8x16xf32> to tensor<1x2x2x8x16xf32>
  %kr = kiln.reshape %kb : tensor<1x2x2x8x16xf32> to tensor<1x4x8x16xf32>
  %o = kiln.attention %q, %kr, %kr
      : tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>
  %dq, %dk, %dv = kiln.attention_grad %q, %kr, %kr, %o, %do
      : tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>
  %dk5 = kiln.reshape %dk : tensor<1x4x8x16xf32> to tensor<1x2x2x8x16xf32>
  %dks = kiln.reduce_sum %dk5 {dimensions = array<i64: 2>} : tensor<1x2x2x8x16xf32>
  %sum = kiln.add %dq, %dv : tensor<1x4x8x16xf32>
  return %sum, %dks : tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>
}
