// RUN: kiln-opt %s --kiln-flash-attention --split-input-file | FileCheck %s
// RUN: kiln-opt %s --kiln-flash-attention=amp=f16 --split-input-file | FileCheck %s --check-prefix=F16
// RUN: not kiln-opt %s --kiln-flash-attention=amp=f32 --split-input-file 2>&1 | FileCheck %s --check-prefix=BAD

// A constant causal mask is the kernels' causal flag: no mask is read. The
// operands are rounded to bf16 first; the gradient reads the forward's
// statistics and the rounded operands.
// CHECK-LABEL: func.func @causal(
// CHECK-SAME: %[[Q:[a-z0-9]+]]: tensor<1x2x2x16xf32>, %[[K:[a-z0-9]+]]: tensor<1x2x2x16xf32>, %[[V:[a-z0-9]+]]: tensor<1x2x2x16xf32>, %[[DO:[a-z0-9]+]]: tensor<1x2x2x16xf32>
// CHECK: %[[Q16:.*]] = kiln.cast %[[Q]] : tensor<1x2x2x16xf32> to tensor<1x2x2x16xbf16>
// CHECK: %[[K16:.*]] = kiln.cast %[[K]] : tensor<1x2x2x16xf32> to tensor<1x2x2x16xbf16>
// CHECK: %[[V16:.*]] = kiln.cast %[[V]] : tensor<1x2x2x16xf32> to tensor<1x2x2x16xbf16>
// CHECK: %[[F:.*]]:2 = kiln.flash_attention %[[Q16]], %[[K16]], %[[V16]] {causal, scale = 2.500000e-01 : f64}
// CHECK-SAME: -> (tensor<1x2x2x16xf32>, tensor<1x2x2x2xf32>)
// CHECK: %[[G:.*]]:4 = kiln.flash_attention_grad %[[Q16]], %[[K16]], %[[V16]], %[[F]]#0, %[[DO]], %[[F]]#1 {causal, scale = 2.500000e-01 : f64}
// CHECK-SAME: -> (tensor<1x2x2x16xf32>, tensor<1x2x2x16xf32>, tensor<1x2x2x16xf32>, tensor<1x2x2xf32>)
// CHECK-NOT: kiln.attention
// CHECK: return %[[F]]#0, %[[G]]#0, %[[G]]#1, %[[G]]#2
// F16-LABEL: func.func @causal(
// F16: kiln.cast %{{.*}} : tensor<1x2x2x16xf32> to tensor<1x2x2x16xf16>
// F16: kiln.flash_attention {{.*}} {causal
// BAD: kiln-flash-attention: amp must be bf16 or f16, not 'f32'
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

// So is one that adds the lowest float after the diagonal, as Hugging Face's
// models write their causal mask (torch.finfo.min): it absorbs any score of
// a row that keeps its diagonal, as -inf does. A value that does not absorb
// every score (-1e4) is not causal (and a mask of that shape the kernels
// do not read: it stays).
// CHECK-LABEL: func.func @causal_lowest(
// CHECK: kiln.flash_attention %{{.*}}, %{{.*}}, %{{.*}} {causal, scale = 2.500000e-01 : f64}
// CHECK-LABEL: func.func @not_causal_finite(
// CHECK-NOT: causal
// CHECK: kiln.attention %{{.*}}, %{{.*}}, %{{.*}} mask %{{.*}} : tensor<2x2xf32> {scale = 2.500000e-01 : f64}
func.func @causal_lowest(%q: tensor<1x2x2x16xf32>, %k: tensor<1x2x2x16xf32>,
                         %v: tensor<1x2x2x16xf32>) -> tensor<1x2x2x16xf32> {
  %mask = kiln.constant dense<[[0.0, -3.40282347E+38], [0.0, 0.0]]> : tensor<2x2xf32>
  %o = kiln.attention %q, %k, %v mask %mask : tensor<2x2xf32> {scale = 0.25 : f64}
      : tensor<1x2x2x16xf32>, tensor<1x2x2x16xf32>, tensor<1x2x2x16xf32>
  return %o : tensor<1x2x2x16xf32>
}
func.func @not_causal_finite(%q: tensor<1x2x2x16xf32>, %k: tensor<1x2x2x16xf32>,
                             %v: tensor<1x2x2x16xf32>) -> tensor<1x2x2x16xf32> {
  %mask = kiln.constant dense<[[0.0, -1.0e4], [0.0, 0.0]]> : tensor<2x2xf32>
  %o = kiln.attention %q, %k, %v mask %mask : tensor<2x2xf32> {scale = 0.25 : f64}
      : tensor<1x2x2x16xf32>, tensor<1x2x2x16xf32>, tensor<1x2x2x16xf32>
  return %o : tensor<1x2x2x16xf32>
}

// -----

// So is a select of 0 and -inf on a constant condition that gives the causal
// mask (kiln-fuse-attention's from a causal where(), unfolded when large);
// one that keeps a key above the diagonal is read.
// CHECK-LABEL: func.func @causal_select(
// CHECK: kiln.flash_attention %{{.*}}, %{{.*}}, %{{.*}} {causal, scale = 2.500000e-01 : f64}
// CHECK: kiln.flash_attention %{{.*}}, %{{.*}}, %{{.*}} mask %{{.*}} {scale = 2.500000e-01 : f64}
func.func @causal_select(%q: tensor<1x2x2x16xf32>, %k: tensor<1x2x2x16xf32>,
                         %v: tensor<1x2x2x16xf32>)
    -> (tensor<1x2x2x16xf32>, tensor<1x2x2x16xf32>) {
  %keep = kiln.constant dense<[[true, false], [true, true]]> : tensor<2x2xi1>
  %ninf = kiln.constant dense<0xFF800000> : tensor<2x2xf32>
  %zero = kiln.constant dense<0.0> : tensor<2x2xf32>
  %mask = kiln.select %keep, %zero, %ninf : tensor<2x2xi1>, tensor<2x2xf32>
  %o = kiln.attention %q, %k, %v mask %mask : tensor<2x2xf32> {scale = 0.25 : f64}
      : tensor<1x2x2x16xf32>, tensor<1x2x2x16xf32>, tensor<1x2x2x16xf32>
  %other = kiln.constant dense<[[true, true], [false, true]]> : tensor<2x2xi1>
  %mask2 = kiln.select %other, %zero, %ninf : tensor<2x2xi1>, tensor<2x2xf32>
  %o2 = kiln.attention %q, %k, %v mask %mask2 : tensor<2x2xf32> {scale = 0.25 : f64}
      : tensor<1x2x2x16xf32>, tensor<1x2x2x16xf32>, tensor<1x2x2x16xf32>
  return %o, %o2 : tensor<1x2x2x16xf32>, tensor<1x2x2x16xf32>
}

// -----

// A model's mask buffer (nanoGPT's masked_fill(bias[:, :, :T, :T] == 0,
// -inf) of tril(ones)): a parameter that no entry point updates, read
// through a slice and compared with 0. Its value gives the causal mask, so
// the attention is causal and the parameter is marked fixed (the bundle
// keeps its value and the runtime takes no other). A parameter an entry
// point updates has no known value: its mask is read, and it stays unfixed.
// CHECK: kiln.param @bias : tensor<1x1x3x3xf32> = dense<{{.*}}> : tensor<1x1x3x3xf32> {kiln.fixed}
// CHECK-NEXT: kiln.param @trained : tensor<1x1x2x2xf32> = dense<{{.*}}> : tensor<1x1x2x2xf32>{{$}}
// CHECK-LABEL: func.func @buffer_mask(
// CHECK: kiln.flash_attention %{{.*}}, %{{.*}}, %{{.*}} {causal, scale = 2.500000e-01 : f64}
// CHECK: kiln.flash_attention %{{.*}}, %{{.*}}, %{{.*}} mask %{{.*}} {scale = 2.500000e-01 : f64}
kiln.param @bias : tensor<1x1x3x3xf32> = dense<[[[[1.0, 0.0, 0.0], [1.0, 1.0, 0.0], [1.0, 1.0, 1.0]]]]> : tensor<1x1x3x3xf32>
kiln.param @trained : tensor<1x1x2x2xf32> = dense<[[[[0.0, 0xFF800000], [0.0, 0.0]]]]> : tensor<1x1x2x2xf32>
func.func @buffer_mask(%q: tensor<1x2x2x16xf32>, %k: tensor<1x2x2x16xf32>,
                       %v: tensor<1x2x2x16xf32>,
                       %bias: tensor<1x1x3x3xf32> {kiln.param = "bias"},
                       %trained: tensor<1x1x2x2xf32> {kiln.param = "trained"})
    -> (tensor<1x2x2x16xf32>, tensor<1x2x2x16xf32>,
        tensor<1x1x2x2xf32> {kiln.update = "trained"}) {
  %window = kiln.slice %bias {start = array<i64: 0, 0, 0, 0>, limit = array<i64: 1, 1, 2, 2>, stride = array<i64: 1, 1, 1, 1>} : tensor<1x1x3x3xf32>
  %zero = kiln.constant dense<0.0> : tensor<1x1x2x2xf32>
  %ninf = kiln.constant dense<0xFF800000> : tensor<1x1x2x2xf32>
  %dropped = kiln.compare <eq>, %window, %zero : tensor<1x1x2x2xf32>
  %mask = kiln.select %dropped, %ninf, %zero : tensor<1x1x2x2xi1>, tensor<1x1x2x2xf32>
  %o = kiln.attention %q, %k, %v mask %mask : tensor<1x1x2x2xf32> {scale = 0.25 : f64}
      : tensor<1x2x2x16xf32>, tensor<1x2x2x16xf32>, tensor<1x2x2x16xf32>
  %o2 = kiln.attention %q, %k, %v mask %trained : tensor<1x1x2x2xf32> {scale = 0.25 : f64}
      : tensor<1x2x2x16xf32>, tensor<1x2x2x16xf32>, tensor<1x2x2x16xf32>
  return %o, %o2, %trained : tensor<1x2x2x16xf32>, tensor<1x2x2x16xf32>,
      tensor<1x1x2x2xf32>
}

// -----

// Any other mask is read: reshaped to [B or 1, H or 1, Sq or 1, Sk].
// CHECK-LABEL: func.func @padding(
// CHECK-SAME: %[[M:[a-z0-9]+]]: tensor<2x3xf32>
// CHECK: %[[M4:.*]] = kiln.reshape %[[M]] : tensor<2x3xf32> to tensor<1x1x2x3xf32>
// CHECK: kiln.flash_attention %{{.*}}, %{{.*}}, %{{.*}} mask %[[M4]] :
// CHECK-SAME: tensor<1x1x2x3xf32>) -> (tensor<2x1x2x32xf32>, tensor<2x1x2x2xf32>)
func.func @padding(%q: tensor<2x1x2x32xf32>, %k: tensor<2x1x3x32xf32>,
                   %v: tensor<2x1x3x32xf32>, %m: tensor<2x3xf32>)
    -> tensor<2x1x2x32xf32> {
  %o = kiln.attention %q, %k, %v mask %m : tensor<2x3xf32>
      : tensor<2x1x2x32xf32>, tensor<2x1x3x32xf32>, tensor<2x1x3x32xf32>
  return %o : tensor<2x1x2x32xf32>
}

// -----

// A masked_fill gradient stays masked_fill (its forward computes as any);
// with a causal mask, which the kernels do not read and which fills
// nothing, it is plain causal.
// CHECK-LABEL: func.func @masked_fill(
// CHECK: %[[F:.*]]:2 = kiln.flash_attention %{{.*}}, %{{.*}}, %{{.*}} mask %{{.*}} :
// CHECK: kiln.flash_attention_grad {{.*}}, %[[F]]#1 mask %{{.*}} {masked_fill} :
// CHECK: %[[C:.*]]:2 = kiln.flash_attention %{{.*}}, %{{.*}}, %{{.*}} {causal} :
// CHECK: kiln.flash_attention_grad {{.*}}, %[[C]]#1 {causal} :
// CHECK: %[[G:.*]]:2 = kiln.flash_attention %{{.*}}, %{{.*}}, %{{.*}} mask %{{.*}} :
// CHECK: kiln.flash_attention_grad {{.*}}, %[[G]]#1 mask %{{.*}} {causal_fill} :
// CHECK: %[[H:.*]]:2 = kiln.flash_attention %{{.*}}, %{{.*}}, %{{.*}} {causal} :
// CHECK: kiln.flash_attention_grad {{.*}}, %[[H]]#1 {causal, causal_fill} :
func.func @masked_fill(%q: tensor<2x1x3x32xf32>, %m: tensor<2x1x1x3xf32>,
                       %g: tensor<2x1x3x32xf32>)
    -> (tensor<2x1x3x32xf32>, tensor<2x1x3x32xf32>, tensor<2x1x3x32xf32>, tensor<2x1x3x32xf32>, tensor<2x1x3x32xf32>) {
  %o = kiln.attention %q, %q, %q mask %m : tensor<2x1x1x3xf32> {masked_fill}
      : tensor<2x1x3x32xf32>, tensor<2x1x3x32xf32>, tensor<2x1x3x32xf32>
  %dq, %dk, %dv = kiln.attention_grad %q, %q, %q, %o, %g mask %m : tensor<2x1x1x3xf32> {masked_fill}
      : tensor<2x1x3x32xf32>, tensor<2x1x3x32xf32>, tensor<2x1x3x32xf32>, tensor<2x1x3x32xf32>
  %causal = kiln.constant dense<[[0.0, 0xFF800000, 0xFF800000], [0.0, 0.0, 0xFF800000], [0.0, 0.0, 0.0]]> : tensor<3x3xf32>
  %c = kiln.attention %q, %q, %q mask %causal : tensor<3x3xf32> {masked_fill}
      : tensor<2x1x3x32xf32>, tensor<2x1x3x32xf32>, tensor<2x1x3x32xf32>
  %cq, %ck, %cv = kiln.attention_grad %q, %q, %q, %c, %g mask %causal : tensor<3x3xf32> {masked_fill}
      : tensor<2x1x3x32xf32>, tensor<2x1x3x32xf32>, tensor<2x1x3x32xf32>, tensor<2x1x3x32xf32>
  %m3 = kiln.constant dense<0.0> : tensor<2x1x3x3xf32>
  %mm = kiln.add %m3, %m3 : tensor<2x1x3x3xf32>
  %f = kiln.attention %q, %q, %q mask %mm : tensor<2x1x3x3xf32> {causal_fill}
      : tensor<2x1x3x32xf32>, tensor<2x1x3x32xf32>, tensor<2x1x3x32xf32>
  %fq, %fk, %fv = kiln.attention_grad %q, %q, %q, %f, %g mask %mm : tensor<2x1x3x3xf32> {causal_fill}
      : tensor<2x1x3x32xf32>, tensor<2x1x3x32xf32>, tensor<2x1x3x32xf32>, tensor<2x1x3x32xf32>
  %h = kiln.attention %q, %q, %q mask %causal : tensor<3x3xf32> {causal_fill}
      : tensor<2x1x3x32xf32>, tensor<2x1x3x32xf32>, tensor<2x1x3x32xf32>
  %hq, %hk, %hv = kiln.attention_grad %q, %q, %q, %h, %g mask %causal : tensor<3x3xf32> {causal_fill}
      : tensor<2x1x3x32xf32>, tensor<2x1x3x32xf32>, tensor<2x1x3x32xf32>, tensor<2x1x3x32xf32>
  return %o, %dq, %cq, %fq, %hq : tensor<2x1x3x32xf32>, tensor<2x1x3x32xf32>, tensor<2x1x3x32xf32>, tensor<2x1x3x32xf32>, tensor<2x1x3x32xf32>
}

// -----

// Head sizes the kernels lack, value head sizes unlike the query's, ranks
// other than 4 and constant masks that are not causal (a global, no buffer
// of the runtime's: the loops read it in their kernels) stay kiln.attention.
// CHECK-LABEL: func.func @unsupported(
// CHECK-NOT: kiln.flash_attention
// CHECK-COUNT-4: kiln.attention
func.func @unsupported(%q: tensor<1x1x4x8xf32>, %k: tensor<1x1x4x8xf32>,
                       %v: tensor<1x1x4x8xf32>, %q3: tensor<2x4x16xf32>,
                       %v2: tensor<1x1x4x32xf32>, %q2: tensor<1x1x4x16xf32>)
    -> (tensor<1x1x4x8xf32>, tensor<2x4x16xf32>, tensor<1x1x4x32xf32>,
        tensor<1x1x4x16xf32>) {
  %a = kiln.attention %q, %k, %v : tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>
  %b = kiln.attention %q3, %q3, %q3 : tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>
  %c = kiln.attention %q2, %q2, %v2 : tensor<1x1x4x16xf32>, tensor<1x1x4x16xf32>, tensor<1x1x4x32xf32>
  %m = kiln.constant dense<[0.0, -1.0e+09, 0.0, 0.0]> : tensor<4xf32>
  %d = kiln.attention %q2, %q2, %q2 mask %m : tensor<4xf32> : tensor<1x1x4x16xf32>, tensor<1x1x4x16xf32>, tensor<1x1x4x16xf32>
  return %a, %b, %c, %d : tensor<1x1x4x8xf32>, tensor<2x4x16xf32>, tensor<1x1x4x32xf32>, tensor<1x1x4x16xf32>
}
