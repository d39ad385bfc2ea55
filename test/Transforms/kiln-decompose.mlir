// RUN: kiln-opt %s --kiln-decompose | FileCheck %s
// RUN: kiln-opt %s --kiln-decompose=keep-attention | FileCheck %s --check-prefix=KEEP
// RUN: kiln-opt %s --kiln-decompose=keep-layer-norm | FileCheck %s --check-prefix=KEEP-LN
// RUN: kiln-opt %s --kiln-decompose=keep-cross-entropy | FileCheck %s --check-prefix=KEEP-CE

// The composite kiln ops become core ops. The formulas are PyTorch's:
// softmax(x) = exp(x - max) / sum(exp(x - max)), log_softmax = (x - max) -
// log(sum(exp(x - max))), layer and batch normalization with the biased
// variance, nll_loss and cross_entropy with torch.nn.functional's weight,
// ignore_index, reduction and label_smoothing rules. Constants are hoisted to
// the top of each function, hence the CHECK-DAGs.

// CHECK-LABEL: func.func @softmax(
// CHECK-SAME: %[[X:.*]]: tensor<4x10xf32>
// CHECK: %[[MAX:.*]] = kiln.reduce_max %[[X]] {dimensions = array<i64: 1>, keepdims} : tensor<4x10xf32>
// CHECK: %[[MAXB:.*]] = kiln.broadcast %[[MAX]] : tensor<4x1xf32> to tensor<4x10xf32>
// CHECK: %[[SHIFTED:.*]] = kiln.sub %[[X]], %[[MAXB]] : tensor<4x10xf32>
// CHECK: %[[E:.*]] = kiln.exp %[[SHIFTED]] : tensor<4x10xf32>
// CHECK: %[[SUM:.*]] = kiln.reduce_sum %[[E]] {dimensions = array<i64: 1>, keepdims} : tensor<4x10xf32>
// CHECK: %[[SUMB:.*]] = kiln.broadcast %[[SUM]] : tensor<4x1xf32> to tensor<4x10xf32>
// CHECK: %[[Y:.*]] = kiln.div %[[E]], %[[SUMB]] : tensor<4x10xf32>
// CHECK: return %[[Y]]
func.func @softmax(%x: tensor<4x10xf32>) -> tensor<4x10xf32> {
  %y = kiln.softmax %x {axis = 1 : i64} : tensor<4x10xf32>
  return %y : tensor<4x10xf32>
}

// CHECK-LABEL: func.func @log_softmax(
// CHECK-SAME: %[[X:.*]]: tensor<2x3x4xf16>
// CHECK: %[[MAX:.*]] = kiln.reduce_max %[[X]] {dimensions = array<i64: 0>, keepdims} : tensor<2x3x4xf16>
// CHECK: %[[MAXB:.*]] = kiln.broadcast %[[MAX]] : tensor<1x3x4xf16> to tensor<2x3x4xf16>
// CHECK: %[[SHIFTED:.*]] = kiln.sub %[[X]], %[[MAXB]] : tensor<2x3x4xf16>
// CHECK: %[[E:.*]] = kiln.exp %[[SHIFTED]] : tensor<2x3x4xf16>
// CHECK: %[[SUM:.*]] = kiln.reduce_sum %[[E]] {dimensions = array<i64: 0>, keepdims} : tensor<2x3x4xf16>
// CHECK: %[[LOG:.*]] = kiln.log %[[SUM]] : tensor<1x3x4xf16>
// CHECK: %[[LOGB:.*]] = kiln.broadcast %[[LOG]] : tensor<1x3x4xf16> to tensor<2x3x4xf16>
// CHECK: %[[Y:.*]] = kiln.sub %[[SHIFTED]], %[[LOGB]] : tensor<2x3x4xf16>
// CHECK: return %[[Y]]
func.func @log_softmax(%x: tensor<2x3x4xf16>) -> tensor<2x3x4xf16> {
  %y = kiln.log_softmax %x {axis = 0 : i64} : tensor<2x3x4xf16>
  return %y : tensor<2x3x4xf16>
}

// softmax(q kᵀ scale + mask) v, the mask broadcast to the scores; the
// softmax decomposes further. With keep-attention the op stays.
// CHECK-LABEL: func.func @attention(
// CHECK-SAME: %[[Q:.*]]: tensor<2x3x4xf32>, %[[K:.*]]: tensor<2x5x4xf32>, %[[V:.*]]: tensor<2x5x6xf32>, %[[M:.*]]: tensor<3x5xf32>
// CHECK-DAG: %[[SCALE:.*]] = kiln.constant dense<5.000000e-01> : tensor<2x3x5xf32>
// CHECK: %[[QK:.*]] = kiln.matmul %[[Q]], %[[K]] {transpose_rhs} : tensor<2x3x4xf32>, tensor<2x5x4xf32>
// CHECK: %[[SCALED:.*]] = kiln.mul %[[QK]], %[[SCALE]] : tensor<2x3x5xf32>
// CHECK: %[[MB:.*]] = kiln.broadcast %[[M]] : tensor<3x5xf32> to tensor<2x3x5xf32>
// CHECK: %[[S:.*]] = kiln.add %[[SCALED]], %[[MB]] : tensor<2x3x5xf32>
// CHECK: kiln.reduce_max %[[S]] {dimensions = array<i64: 2>, keepdims}
// CHECK: %[[P:.*]] = kiln.div
// CHECK: %[[O:.*]] = kiln.matmul %[[P]], %[[V]] : tensor<2x3x5xf32>, tensor<2x5x6xf32>
// CHECK: return %[[O]]
// KEEP-LABEL: func.func @attention(
// KEEP-NEXT: kiln.attention
// KEEP-NEXT: return
func.func @attention(%q: tensor<2x3x4xf32>, %k: tensor<2x5x4xf32>, %v: tensor<2x5x6xf32>,
                     %m: tensor<3x5xf32>) -> tensor<2x3x6xf32> {
  %o = kiln.attention %q, %k, %v mask %m : tensor<3x5xf32> {scale = 0.5 : f64}
      : tensor<2x3x4xf32>, tensor<2x5x4xf32>, tensor<2x5x6xf32>
  return %o : tensor<2x3x6xf32>
}

// attention's gradient recomputes the probabilities P from q and k:
// dv = Pᵀ dO, dP = dO vᵀ, dS = P (dP - rowsum(dP P)) scale, dq = dS k,
// dk = dSᵀ q. With keep-attention the op stays.
// CHECK-LABEL: func.func @attention_grad(
// CHECK-SAME: %[[Q:[a-z0-9]+]]: tensor<2x3x4xf32>, %[[K:[a-z0-9]+]]: tensor<2x5x4xf32>, %[[V:[a-z0-9]+]]: tensor<2x5x6xf32>, %[[O:[a-z0-9]+]]: tensor<2x3x6xf32>, %[[G:[a-z0-9]+]]: tensor<2x3x6xf32>, %[[M:[a-z0-9]+]]: tensor<3x5xf32>
// CHECK-DAG: %[[SCALE:.*]] = kiln.constant dense<5.000000e-01> : tensor<2x3x5xf32>
// CHECK: %[[QK:.*]] = kiln.matmul %[[Q]], %[[K]] {transpose_rhs} : tensor<2x3x4xf32>, tensor<2x5x4xf32>
// CHECK: %[[SCALED:.*]] = kiln.mul %[[QK]], %[[SCALE]] : tensor<2x3x5xf32>
// CHECK: %[[MB:.*]] = kiln.broadcast %[[M]] : tensor<3x5xf32> to tensor<2x3x5xf32>
// CHECK: %[[S:.*]] = kiln.add %[[SCALED]], %[[MB]] : tensor<2x3x5xf32>
// CHECK: kiln.reduce_max %[[S]] {dimensions = array<i64: 2>, keepdims}
// CHECK: %[[P:.*]] = kiln.div
// CHECK: %[[DV:.*]] = kiln.matmul %[[P]], %[[G]] {transpose_lhs} : tensor<2x3x5xf32>, tensor<2x3x6xf32>
// CHECK: %[[DP:.*]] = kiln.matmul %[[G]], %[[V]] {transpose_rhs} : tensor<2x3x6xf32>, tensor<2x5x6xf32>
// CHECK: %[[DPP:.*]] = kiln.mul %[[DP]], %[[P]] : tensor<2x3x5xf32>
// CHECK: %[[ROW:.*]] = kiln.reduce_sum %[[DPP]] {dimensions = array<i64: 2>, keepdims} : tensor<2x3x5xf32>
// CHECK: %[[ROWB:.*]] = kiln.broadcast %[[ROW]] : tensor<2x3x1xf32> to tensor<2x3x5xf32>
// CHECK: %[[CENTERED:.*]] = kiln.sub %[[DP]], %[[ROWB]] : tensor<2x3x5xf32>
// CHECK: %[[DS:.*]] = kiln.mul %[[P]], %[[CENTERED]] : tensor<2x3x5xf32>
// CHECK: %[[DSS:.*]] = kiln.mul %[[DS]], %[[SCALE]] : tensor<2x3x5xf32>
// CHECK: %[[DQ:.*]] = kiln.matmul %[[DSS]], %[[K]] : tensor<2x3x5xf32>, tensor<2x5x4xf32>
// CHECK: %[[DK:.*]] = kiln.matmul %[[DSS]], %[[Q]] {transpose_lhs} : tensor<2x3x5xf32>, tensor<2x3x4xf32>
// CHECK: return %[[DQ]], %[[DK]], %[[DV]]
// KEEP-LABEL: func.func @attention_grad(
// KEEP-NEXT: kiln.attention_grad
// KEEP-NEXT: return
func.func @attention_grad(%q: tensor<2x3x4xf32>, %k: tensor<2x5x4xf32>, %v: tensor<2x5x6xf32>,
                          %o: tensor<2x3x6xf32>, %g: tensor<2x3x6xf32>, %m: tensor<3x5xf32>)
    -> (tensor<2x3x4xf32>, tensor<2x5x4xf32>, tensor<2x5x6xf32>) {
  %dq, %dk, %dv = kiln.attention_grad %q, %k, %v, %o, %g mask %m : tensor<3x5xf32> {scale = 0.5 : f64}
      : tensor<2x3x4xf32>, tensor<2x5x4xf32>, tensor<2x5x6xf32>, tensor<2x3x6xf32>
  return %dq, %dk, %dv : tensor<2x3x4xf32>, tensor<2x5x4xf32>, tensor<2x5x6xf32>
}

// masked_fill: dS is 0 where the mask is at most -2^100 (the scores it
// fills), before the scale.
// CHECK-LABEL: func.func @attention_grad_masked_fill(
// CHECK-SAME: %[[M:[a-z0-9]+]]: tensor<3x5xf32>
// CHECK-DAG: %[[ZERO:.*]] = kiln.constant dense<0.000000e+00> : tensor<2x3x5xf32>
// CHECK-DAG: %[[AT:.*]] = kiln.constant dense<-1.2676506E+30> : tensor<2x3x5xf32>
// CHECK: kiln.matmul %{{.*}}, %{{.*}} {transpose_rhs} : tensor<2x3x6xf32>, tensor<2x5x6xf32>
// CHECK: kiln.sub
// CHECK: %[[DS:.*]] = kiln.mul %{{.*}}, %{{.*}} : tensor<2x3x5xf32>
// CHECK: %[[MB:.*]] = kiln.broadcast %[[M]] : tensor<3x5xf32> to tensor<2x3x5xf32>
// CHECK: %[[FILLED:.*]] = kiln.compare <le>, %[[MB]], %[[AT]] : tensor<2x3x5xf32>
// CHECK: %[[KEPT:.*]] = kiln.select %[[FILLED]], %[[ZERO]], %[[DS]] : tensor<2x3x5xi1>, tensor<2x3x5xf32>
// CHECK: %[[DSS:.*]] = kiln.mul %[[KEPT]], %{{.*}} : tensor<2x3x5xf32>
// CHECK: kiln.matmul %[[DSS]], %{{.*}} : tensor<2x3x5xf32>, tensor<2x5x4xf32>
func.func @attention_grad_masked_fill(%q: tensor<2x3x4xf32>, %k: tensor<2x5x4xf32>, %v: tensor<2x5x6xf32>,
                                      %o: tensor<2x3x6xf32>, %g: tensor<2x3x6xf32>, %m: tensor<3x5xf32>)
    -> (tensor<2x3x4xf32>, tensor<2x5x4xf32>, tensor<2x5x6xf32>) {
  %dq, %dk, %dv = kiln.attention_grad %q, %k, %v, %o, %g mask %m : tensor<3x5xf32> {masked_fill, scale = 0.5 : f64}
      : tensor<2x3x4xf32>, tensor<2x5x4xf32>, tensor<2x5x6xf32>, tensor<2x3x6xf32>
  return %dq, %dk, %dv : tensor<2x3x4xf32>, tensor<2x5x4xf32>, tensor<2x5x6xf32>
}

// causal_fill: dS is 0 after each query's position.
// CHECK-LABEL: func.func @attention_grad_causal_fill(
// CHECK-DAG: %[[ZERO:.*]] = kiln.constant dense<0.000000e+00> : tensor<2x3x3xf32>
// CHECK-DAG: %[[AFTER:.*]] = kiln.constant dense<{{\[}}[false, true, true], [false, false, true], [false, false, false]]> : tensor<3x3xi1>
// CHECK: kiln.matmul %{{.*}}, %{{.*}} {transpose_lhs}
// CHECK: kiln.sub
// CHECK-NEXT: %[[DS:.*]] = kiln.mul %{{.*}}, %{{.*}} : tensor<2x3x3xf32>
// CHECK: %[[AB:.*]] = kiln.broadcast %[[AFTER]] : tensor<3x3xi1> to tensor<2x3x3xi1>
// CHECK: %[[KEPT:.*]] = kiln.select %[[AB]], %[[ZERO]], %[[DS]] : tensor<2x3x3xi1>, tensor<2x3x3xf32>
// CHECK: kiln.matmul %[[KEPT]], %{{.*}} : tensor<2x3x3xf32>, tensor<2x3x4xf32>
func.func @attention_grad_causal_fill(%q: tensor<2x3x4xf32>, %o: tensor<2x3x4xf32>, %m: tensor<3x3xf32>)
    -> (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>) {
  %dq, %dk, %dv = kiln.attention_grad %q, %q, %q, %o, %o mask %m : tensor<3x3xf32> {causal_fill}
      : tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>
  return %dq, %dk, %dv : tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>
}

// The divisor is the number of reduced elements: 4 for dimension 1, 3 * 5
// for dimensions 0 and 2.
// CHECK-LABEL: func.func @reduce_mean(
// CHECK-SAME: %[[X:.*]]: tensor<3x4x5xf32>
// CHECK-DAG: %[[FIFTEEN:.*]] = kiln.constant dense<1.500000e+01> : tensor<1x4x1xf32>
// CHECK-DAG: %[[FOUR:.*]] = kiln.constant dense<4.000000e+00> : tensor<3x5xf32>
// CHECK: %[[S:.*]] = kiln.reduce_sum %[[X]] {dimensions = array<i64: 1>} : tensor<3x4x5xf32>
// CHECK: %[[M:.*]] = kiln.div %[[S]], %[[FOUR]] : tensor<3x5xf32>
// CHECK: %[[SK:.*]] = kiln.reduce_sum %[[X]] {dimensions = array<i64: 0, 2>, keepdims} : tensor<3x4x5xf32>
// CHECK: %[[MK:.*]] = kiln.div %[[SK]], %[[FIFTEEN]] : tensor<1x4x1xf32>
// CHECK: return %[[M]], %[[MK]]
func.func @reduce_mean(%x: tensor<3x4x5xf32>) -> (tensor<3x5xf32>, tensor<1x4x1xf32>) {
  %y = kiln.reduce_mean %x {dimensions = array<i64: 1>} : tensor<3x4x5xf32>
  %z = kiln.reduce_mean %x {dimensions = array<i64: 0, 2>, keepdims} : tensor<3x4x5xf32>
  return %y, %z : tensor<3x5xf32>, tensor<1x4x1xf32>
}

// CHECK-LABEL: func.func @reduce_l2(
// CHECK-SAME: %[[X:.*]]: tensor<2x3x4xf32>
// CHECK: %[[SQ:.*]] = kiln.mul %[[X]], %[[X]] : tensor<2x3x4xf32>
// CHECK: %[[S:.*]] = kiln.reduce_sum %[[SQ]] {dimensions = array<i64: 1, 2>} : tensor<2x3x4xf32>
// CHECK: %[[Y:.*]] = kiln.sqrt %[[S]] : tensor<2xf32>
// CHECK: return %[[Y]]
func.func @reduce_l2(%x: tensor<2x3x4xf32>) -> tensor<2xf32> {
  %y = kiln.reduce_l2 %x {dimensions = array<i64: 1, 2>} : tensor<2x3x4xf32>
  return %y : tensor<2xf32>
}

// log(sum(exp(x - m))) + m with m the maximum, or 0 where the maximum is
// infinite (as torch.logsumexp does): an all -inf slice gives -inf, not
// -inf - -inf = NaN, so the shift must use the selected maximum too.
// CHECK-LABEL: func.func @reduce_logsumexp(
// CHECK-SAME: %[[X:.*]]: tensor<8x10xf64>
// CHECK-DAG: %[[ZERO:.*]] = kiln.constant dense<0.000000e+00> : tensor<8x1xf64>
// CHECK: %[[MAX:.*]] = kiln.reduce_max %[[X]] {dimensions = array<i64: 1>, keepdims} : tensor<8x10xf64>
// CHECK: %[[SAFE:.*]] = kiln.select %{{.*}}, %[[MAX]], %[[ZERO]] : tensor<8x1xi1>, tensor<8x1xf64>
// CHECK: %[[SAFEB:.*]] = kiln.broadcast %[[SAFE]] : tensor<8x1xf64> to tensor<8x10xf64>
// CHECK: %[[SHIFTED:.*]] = kiln.sub %[[X]], %[[SAFEB]] : tensor<8x10xf64>
// CHECK: %[[E:.*]] = kiln.exp %[[SHIFTED]] : tensor<8x10xf64>
// CHECK: %[[SUM:.*]] = kiln.reduce_sum %[[E]] {dimensions = array<i64: 1>, keepdims} : tensor<8x10xf64>
// CHECK: %[[LOG:.*]] = kiln.log %[[SUM]] : tensor<8x1xf64>
// CHECK: %[[Y:.*]] = kiln.add %[[LOG]], %[[SAFE]] : tensor<8x1xf64>
// CHECK: %[[R:.*]] = kiln.reshape %[[Y]] : tensor<8x1xf64> to tensor<8xf64>
// CHECK: return %[[R]] : tensor<8xf64>
func.func @reduce_logsumexp(%x: tensor<8x10xf64>) -> tensor<8xf64> {
  %y = kiln.reduce_logsumexp %x {dimensions = array<i64: 1>} : tensor<8x10xf64>
  return %y : tensor<8xf64>
}

// Normalized over the trailing dimensions 1..2 (3 * 4 = 12 elements), with
// epsilon inside the rsqrt, then scaled and shifted by the broadcast
// scale and bias.
// CHECK-LABEL: func.func @layer_norm(
// CHECK-SAME: %[[X:.*]]: tensor<2x3x4xf32>, %[[G:.*]]: tensor<3x4xf32>, %[[B:.*]]: tensor<3x4xf32>
// CHECK-DAG: %[[EPS:.*]] = kiln.constant dense<1.000000e-03> : tensor<2x1x1xf32>
// CHECK-DAG: %[[N:.*]] = kiln.constant dense<1.200000e+01> : tensor<2x1x1xf32>
// CHECK: %[[S:.*]] = kiln.reduce_sum %[[X]] {dimensions = array<i64: 1, 2>, keepdims} : tensor<2x3x4xf32>
// CHECK: %[[MEAN:.*]] = kiln.div %[[S]], %[[N]] : tensor<2x1x1xf32>
// CHECK: %[[MEANB:.*]] = kiln.broadcast %[[MEAN]] : tensor<2x1x1xf32> to tensor<2x3x4xf32>
// CHECK: %[[C:.*]] = kiln.sub %[[X]], %[[MEANB]] : tensor<2x3x4xf32>
// CHECK: %[[SQ:.*]] = kiln.mul %[[C]], %[[C]] : tensor<2x3x4xf32>
// CHECK: %[[SS:.*]] = kiln.reduce_sum %[[SQ]] {dimensions = array<i64: 1, 2>, keepdims} : tensor<2x3x4xf32>
// CHECK: %[[VAR:.*]] = kiln.div %[[SS]], %[[N]] : tensor<2x1x1xf32>
// CHECK: %[[VE:.*]] = kiln.add %[[VAR]], %[[EPS]] : tensor<2x1x1xf32>
// CHECK: %[[INV:.*]] = kiln.rsqrt %[[VE]] : tensor<2x1x1xf32>
// CHECK: %[[INVB:.*]] = kiln.broadcast %[[INV]] : tensor<2x1x1xf32> to tensor<2x3x4xf32>
// CHECK: %[[NORM:.*]] = kiln.mul %[[C]], %[[INVB]] : tensor<2x3x4xf32>
// CHECK: %[[GB:.*]] = kiln.broadcast %[[G]] : tensor<3x4xf32> to tensor<2x3x4xf32>
// CHECK: %[[SCALED:.*]] = kiln.mul %[[NORM]], %[[GB]] : tensor<2x3x4xf32>
// CHECK: %[[BB:.*]] = kiln.broadcast %[[B]] : tensor<3x4xf32> to tensor<2x3x4xf32>
// CHECK: %[[Y:.*]] = kiln.add %[[SCALED]], %[[BB]] : tensor<2x3x4xf32>
// CHECK: return %[[Y]]
func.func @layer_norm(%x: tensor<2x3x4xf32>, %g: tensor<3x4xf32>, %b: tensor<3x4xf32>) -> tensor<2x3x4xf32> {
  %y = kiln.layer_norm %x, %g bias %b : tensor<3x4xf32> {axis = 1 : i64, epsilon = 1.0e-3 : f64} : tensor<2x3x4xf32>, tensor<3x4xf32>
  return %y : tensor<2x3x4xf32>
}

// CHECK-LABEL: func.func @layer_norm_no_bias(
// CHECK-SAME: %[[X:.*]]: tensor<4x16xf32>, %[[G:.*]]: tensor<16xf32>
// CHECK-DAG: kiln.constant dense<1.600000e+01> : tensor<4x1xf32>
// CHECK: kiln.reduce_sum %[[X]] {dimensions = array<i64: 1>, keepdims} : tensor<4x16xf32>
// CHECK: kiln.rsqrt
// CHECK: %[[GB:.*]] = kiln.broadcast %[[G]] : tensor<16xf32> to tensor<4x16xf32>
// CHECK: %[[Y:.*]] = kiln.mul %{{.*}}, %[[GB]] : tensor<4x16xf32>
// CHECK-NOT: kiln.add
// CHECK: return %[[Y]]
func.func @layer_norm_no_bias(%x: tensor<4x16xf32>, %g: tensor<16xf32>) -> tensor<4x16xf32> {
  %y = kiln.layer_norm %x, %g {axis = 1 : i64} : tensor<4x16xf32>, tensor<16xf32>
  return %y : tensor<4x16xf32>
}

// The gradient recomputes x̂ and r = rsqrt(var + eps) as the forward does;
// with gs = dy · scale, dx = r (gs - mean(gs) - x̂ mean(gs x̂)), and the
// scale's and bias's gradients sum dy x̂ and dy over the leading dimensions.
// CHECK-LABEL: func.func @layer_norm_grad(
// CHECK-SAME: %[[X:.*]]: tensor<2x3x4xf32>, %[[G:.*]]: tensor<3x4xf32>, %[[DY:.*]]: tensor<2x3x4xf32>
// CHECK-DAG: %[[N:.*]] = kiln.constant dense<1.200000e+01> : tensor<2x1x1xf32>
// CHECK: %[[C:.*]] = kiln.sub %[[X]], %{{.*}} : tensor<2x3x4xf32>
// CHECK: %[[INV:.*]] = kiln.rsqrt %{{.*}} : tensor<2x1x1xf32>
// CHECK: %[[INVB:.*]] = kiln.broadcast %[[INV]] : tensor<2x1x1xf32> to tensor<2x3x4xf32>
// CHECK: %[[XHAT:.*]] = kiln.mul %[[C]], %[[INVB]] : tensor<2x3x4xf32>
// CHECK: %[[GB:.*]] = kiln.broadcast %[[G]] : tensor<3x4xf32> to tensor<2x3x4xf32>
// CHECK: %[[GS:.*]] = kiln.mul %[[DY]], %[[GB]] : tensor<2x3x4xf32>
// CHECK: %[[S1:.*]] = kiln.reduce_sum %[[GS]] {dimensions = array<i64: 1, 2>, keepdims} : tensor<2x3x4xf32>
// CHECK: %[[M1:.*]] = kiln.div %[[S1]], %[[N]] : tensor<2x1x1xf32>
// CHECK: %[[M1B:.*]] = kiln.broadcast %[[M1]] : tensor<2x1x1xf32> to tensor<2x3x4xf32>
// CHECK: %[[GX:.*]] = kiln.mul %[[GS]], %[[XHAT]] : tensor<2x3x4xf32>
// CHECK: %[[S2:.*]] = kiln.reduce_sum %[[GX]] {dimensions = array<i64: 1, 2>, keepdims} : tensor<2x3x4xf32>
// CHECK: %[[M2:.*]] = kiln.div %[[S2]], %[[N]] : tensor<2x1x1xf32>
// CHECK: %[[M2B:.*]] = kiln.broadcast %[[M2]] : tensor<2x1x1xf32> to tensor<2x3x4xf32>
// CHECK: %[[INVB2:.*]] = kiln.broadcast %[[INV]] : tensor<2x1x1xf32> to tensor<2x3x4xf32>
// CHECK: %[[D1:.*]] = kiln.sub %[[GS]], %[[M1B]] : tensor<2x3x4xf32>
// CHECK: %[[D2:.*]] = kiln.mul %[[XHAT]], %[[M2B]] : tensor<2x3x4xf32>
// CHECK: %[[D3:.*]] = kiln.sub %[[D1]], %[[D2]] : tensor<2x3x4xf32>
// CHECK: %[[DX:.*]] = kiln.mul %[[INVB2]], %[[D3]] : tensor<2x3x4xf32>
// CHECK: %[[DYX:.*]] = kiln.mul %[[DY]], %[[XHAT]] : tensor<2x3x4xf32>
// CHECK: %[[DG:.*]] = kiln.reduce_sum %[[DYX]] {dimensions = array<i64: 0>} : tensor<2x3x4xf32>
// CHECK: %[[DB:.*]] = kiln.reduce_sum %[[DY]] {dimensions = array<i64: 0>} : tensor<2x3x4xf32>
// CHECK: return %[[DX]], %[[DG]], %[[DB]]
// KEEP-LN-LABEL: func.func @layer_norm_grad(
// KEEP-LN-NEXT: kiln.layer_norm_grad
// KEEP-LN-NEXT: return
func.func @layer_norm_grad(%x: tensor<2x3x4xf32>, %g: tensor<3x4xf32>, %dy: tensor<2x3x4xf32>) -> (tensor<2x3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>) {
  %dx, %dg, %db = kiln.layer_norm_grad %x, %g, %dy {axis = 1 : i64, epsilon = 1.0e-3 : f64} : tensor<2x3x4xf32>, tensor<3x4xf32>
  return %dx, %dg, %db : tensor<2x3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>
}

// Every dimension normalized: nothing to sum over, the bias's gradient is
// dy itself.
// CHECK-LABEL: func.func @layer_norm_grad_whole(
// CHECK-SAME: %[[DY:[^:]*]]: tensor<8xf32>)
// CHECK: %[[R:.*]] = kiln.rsqrt %{{.*}} : tensor<1xf32>
// CHECK-NEXT: %[[INV:.*]] = kiln.broadcast %[[R]] : tensor<1xf32> to tensor<8xf32>
// CHECK-NEXT: %[[XHAT:.*]] = kiln.mul %{{.*}}, %[[INV]] : tensor<8xf32>
// CHECK: %[[DG:.*]] = kiln.mul %[[DY]], %[[XHAT]] : tensor<8xf32>
// CHECK-NEXT: return %{{.*}}, %[[DG]], %[[DY]]
func.func @layer_norm_grad_whole(%x: tensor<8xf32>, %g: tensor<8xf32>, %dy: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %dx, %dg, %db = kiln.layer_norm_grad %x, %g, %dy {axis = 0 : i64} : tensor<8xf32>, tensor<8xf32>
  return %dx, %dg, %db : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
}

// (x - mean) * (rsqrt(var + eps) * scale) + bias, the [C] vectors reshaped to
// [1, C, 1, 1] and broadcast.
// CHECK-LABEL: func.func @batch_norm(
// CHECK-SAME: %[[X:.*]]: tensor<2x3x4x4xf32>, %[[S:.*]]: tensor<3xf32>, %[[B:.*]]: tensor<3xf32>, %[[M:.*]]: tensor<3xf32>, %[[V:.*]]: tensor<3xf32>
// CHECK-DAG: %[[EPS:.*]] = kiln.constant dense<1.000000e-03> : tensor<3xf32>
// CHECK: %[[VE:.*]] = kiln.add %[[V]], %[[EPS]] : tensor<3xf32>
// CHECK: %[[INV:.*]] = kiln.rsqrt %[[VE]] : tensor<3xf32>
// CHECK: %[[K:.*]] = kiln.mul %[[INV]], %[[S]] : tensor<3xf32>
// CHECK: %[[MR:.*]] = kiln.reshape %[[M]] : tensor<3xf32> to tensor<1x3x1x1xf32>
// CHECK: %[[MB:.*]] = kiln.broadcast %[[MR]] : tensor<1x3x1x1xf32> to tensor<2x3x4x4xf32>
// CHECK: %[[C:.*]] = kiln.sub %[[X]], %[[MB]] : tensor<2x3x4x4xf32>
// CHECK: %[[KR:.*]] = kiln.reshape %[[K]] : tensor<3xf32> to tensor<1x3x1x1xf32>
// CHECK: %[[KB:.*]] = kiln.broadcast %[[KR]] : tensor<1x3x1x1xf32> to tensor<2x3x4x4xf32>
// CHECK: %[[P:.*]] = kiln.mul %[[C]], %[[KB]] : tensor<2x3x4x4xf32>
// CHECK: %[[BR:.*]] = kiln.reshape %[[B]] : tensor<3xf32> to tensor<1x3x1x1xf32>
// CHECK: %[[BB:.*]] = kiln.broadcast %[[BR]] : tensor<1x3x1x1xf32> to tensor<2x3x4x4xf32>
// CHECK: %[[Y:.*]] = kiln.add %[[P]], %[[BB]] : tensor<2x3x4x4xf32>
// CHECK: return %[[Y]]
func.func @batch_norm(%x: tensor<2x3x4x4xf32>, %s: tensor<3xf32>, %b: tensor<3xf32>, %m: tensor<3xf32>, %v: tensor<3xf32>) -> tensor<2x3x4x4xf32> {
  %y = kiln.batch_norm %x, %s, %b, %m, %v {epsilon = 1.0e-3 : f64} : tensor<2x3x4x4xf32>, tensor<3xf32>
  return %y : tensor<2x3x4x4xf32>
}

// The statistics are over every dimension but 1 (2 * 4 * 4 = 32 elements),
// the variance biased; both are returned as [C].
// CHECK-LABEL: func.func @batch_norm_train(
// CHECK-SAME: %[[X:.*]]: tensor<2x3x4x4xf32>, %[[S:.*]]: tensor<3xf32>, %[[B:.*]]: tensor<3xf32>
// CHECK-DAG: %[[N:.*]] = kiln.constant dense<3.200000e+01> : tensor<1x3x1x1xf32>
// CHECK: %[[SUM:.*]] = kiln.reduce_sum %[[X]] {dimensions = array<i64: 0, 2, 3>, keepdims} : tensor<2x3x4x4xf32>
// CHECK: %[[MEAN:.*]] = kiln.div %[[SUM]], %[[N]] : tensor<1x3x1x1xf32>
// CHECK: %[[MEANB:.*]] = kiln.broadcast %[[MEAN]] : tensor<1x3x1x1xf32> to tensor<2x3x4x4xf32>
// CHECK: %[[C:.*]] = kiln.sub %[[X]], %[[MEANB]] : tensor<2x3x4x4xf32>
// CHECK: %[[SQ:.*]] = kiln.mul %[[C]], %[[C]] : tensor<2x3x4x4xf32>
// CHECK: %[[SS:.*]] = kiln.reduce_sum %[[SQ]] {dimensions = array<i64: 0, 2, 3>, keepdims} : tensor<2x3x4x4xf32>
// CHECK: %[[VAR:.*]] = kiln.div %[[SS]], %[[N]] : tensor<1x3x1x1xf32>
// CHECK: kiln.rsqrt
// CHECK: %[[SR:.*]] = kiln.reshape %[[S]] : tensor<3xf32> to tensor<1x3x1x1xf32>
// CHECK: %[[SB:.*]] = kiln.broadcast %[[SR]] : tensor<1x3x1x1xf32> to tensor<2x3x4x4xf32>
// CHECK: %[[P:.*]] = kiln.mul %{{.*}}, %[[SB]] : tensor<2x3x4x4xf32>
// CHECK: %[[BR:.*]] = kiln.reshape %[[B]] : tensor<3xf32> to tensor<1x3x1x1xf32>
// CHECK: %[[BB:.*]] = kiln.broadcast %[[BR]] : tensor<1x3x1x1xf32> to tensor<2x3x4x4xf32>
// CHECK: %[[Y:.*]] = kiln.add %[[P]], %[[BB]] : tensor<2x3x4x4xf32>
// CHECK: %[[M:.*]] = kiln.reshape %[[MEAN]] : tensor<1x3x1x1xf32> to tensor<3xf32>
// CHECK: %[[V:.*]] = kiln.reshape %[[VAR]] : tensor<1x3x1x1xf32> to tensor<3xf32>
// CHECK: return %[[Y]], %[[M]], %[[V]]
func.func @batch_norm_train(%x: tensor<2x3x4x4xf32>, %s: tensor<3xf32>, %b: tensor<3xf32>)
    -> (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>) {
  %y, %m, %v = kiln.batch_norm_train %x, %s, %b : tensor<2x3x4x4xf32>, tensor<3xf32>
  return %y, %m, %v : tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>
}

// reduction = mean without weights: the sum of -logp[n, label[n]] divided by
// the number of elements (the sum of unit weights).
// CHECK-LABEL: func.func @nll_loss_mean(
// CHECK-SAME: %[[P:.*]]: tensor<8x10xf32>, %[[T:.*]]: tensor<8xi64>
// CHECK-DAG: %[[ONES:.*]] = kiln.constant dense<1.000000e+00> : tensor<8xf32>
// CHECK: %[[I:.*]] = kiln.reshape %[[T]] : tensor<8xi64> to tensor<8x1xi64>
// CHECK: %[[G:.*]] = kiln.gather_elements %[[P]], %[[I]] {axis = 1 : i64} : tensor<8x10xf32>, tensor<8x1xi64>
// CHECK: %[[PICKED:.*]] = kiln.reshape %[[G]] : tensor<8x1xf32> to tensor<8xf32>
// CHECK: %[[W:.*]] = kiln.mul %[[PICKED]], %[[ONES]] : tensor<8xf32>
// CHECK: %[[L:.*]] = kiln.neg %[[W]] : tensor<8xf32>
// CHECK: %[[SUM:.*]] = kiln.reduce_sum %[[L]] {dimensions = array<i64: 0>} : tensor<8xf32>
// CHECK: %[[COUNT:.*]] = kiln.reduce_sum %[[ONES]] {dimensions = array<i64: 0>} : tensor<8xf32>
// CHECK: %[[Y:.*]] = kiln.div %[[SUM]], %[[COUNT]] : tensor<f32>
// CHECK: return %[[Y]] : tensor<f32>
func.func @nll_loss_mean(%logp: tensor<8x10xf32>, %labels: tensor<8xi64>) -> tensor<f32> {
  %y = kiln.nll_loss %logp, %labels : tensor<8x10xf32>, tensor<8xi64>
  return %y : tensor<f32>
}

// reduction = none with class weights and ignore_index = 1 on [N, C, D]:
// ignored labels are gathered as class 0 and weigh 0.
// CHECK-LABEL: func.func @nll_loss_none(
// CHECK-SAME: %[[P:.*]]: tensor<2x5x6xf32>, %[[T:.*]]: tensor<2x6xi64>, %[[CW:.*]]: tensor<5xf32>
// CHECK-DAG: %[[FZERO:.*]] = kiln.constant dense<0.000000e+00> : tensor<2x6xf32>
// CHECK-DAG: %[[IZERO:.*]] = kiln.constant dense<0> : tensor<2x6xi64>
// CHECK-DAG: %[[IGNORE:.*]] = kiln.constant dense<1> : tensor<2x6xi64>
// CHECK: %[[COUNTED:.*]] = kiln.compare <ne>, %[[T]], %[[IGNORE]] : tensor<2x6xi64>
// CHECK: %[[SAFE:.*]] = kiln.select %[[COUNTED]], %[[T]], %[[IZERO]] : tensor<2x6xi1>, tensor<2x6xi64>
// CHECK: %[[WG:.*]] = kiln.gather %[[CW]], %[[SAFE]] {axis = 0 : i64} : tensor<5xf32>, tensor<2x6xi64>
// CHECK: %[[W:.*]] = kiln.select %[[COUNTED]], %[[WG]], %[[FZERO]] : tensor<2x6xi1>, tensor<2x6xf32>
// CHECK: %[[I:.*]] = kiln.reshape %[[SAFE]] : tensor<2x6xi64> to tensor<2x1x6xi64>
// CHECK: %[[G:.*]] = kiln.gather_elements %[[P]], %[[I]] {axis = 1 : i64} : tensor<2x5x6xf32>, tensor<2x1x6xi64>
// CHECK: %[[PICKED:.*]] = kiln.reshape %[[G]] : tensor<2x1x6xf32> to tensor<2x6xf32>
// CHECK: %[[PW:.*]] = kiln.mul %[[PICKED]], %[[W]] : tensor<2x6xf32>
// CHECK: %[[L:.*]] = kiln.neg %[[PW]] : tensor<2x6xf32>
// CHECK: %[[Y:.*]] = kiln.select %[[COUNTED]], %[[L]], %[[FZERO]] : tensor<2x6xi1>, tensor<2x6xf32>
// CHECK-NOT: kiln.reduce_sum
// CHECK: return %[[Y]] : tensor<2x6xf32>
func.func @nll_loss_none(%logp: tensor<2x5x6xf32>, %labels: tensor<2x6xi64>, %w: tensor<5xf32>) -> tensor<2x6xf32> {
  %y = kiln.nll_loss %logp, %labels weight %w : tensor<5xf32> {reduction = #kiln.reduction<none>, ignore_index = 1 : i64}
      : tensor<2x5x6xf32>, tensor<2x6xi64>
  return %y : tensor<2x6xf32>
}

// CHECK-LABEL: func.func @nll_loss_sum(
// CHECK: %[[L:.*]] = kiln.neg %{{.*}} : tensor<8xf32>
// CHECK: %[[Y:.*]] = kiln.reduce_sum %[[L]] {dimensions = array<i64: 0>} : tensor<8xf32>
// CHECK-NOT: kiln.div
// CHECK: return %[[Y]] : tensor<f32>
func.func @nll_loss_sum(%logp: tensor<8x10xf32>, %labels: tensor<8xi32>) -> tensor<f32> {
  %y = kiln.nll_loss %logp, %labels {reduction = #kiln.reduction<sum>} : tensor<8x10xf32>, tensor<8xi32>
  return %y : tensor<f32>
}

// reduction = mean with weights and a negative ignore_index: divided by the
// sum of the weights of the counted elements.
// CHECK-LABEL: func.func @nll_loss_weighted_mean(
// CHECK-SAME: %[[P:.*]]: tensor<8x10xf32>, %[[T:.*]]: tensor<8xi64>, %[[CW:.*]]: tensor<10xf32>
// CHECK-DAG: %[[IGNORE:.*]] = kiln.constant dense<-100> : tensor<8xi64>
// CHECK: %[[COUNTED:.*]] = kiln.compare <ne>, %[[T]], %[[IGNORE]] : tensor<8xi64>
// CHECK: %[[WG:.*]] = kiln.gather %[[CW]], %{{.*}} {axis = 0 : i64} : tensor<10xf32>, tensor<8xi64>
// CHECK: %[[W:.*]] = kiln.select %[[COUNTED]], %[[WG]], %{{.*}} : tensor<8xi1>, tensor<8xf32>
// CHECK: %[[PW:.*]] = kiln.mul %{{.*}}, %[[W]] : tensor<8xf32>
// CHECK: %[[L:.*]] = kiln.neg %[[PW]] : tensor<8xf32>
// CHECK: %[[LC:.*]] = kiln.select %[[COUNTED]], %[[L]], %{{.*}} : tensor<8xi1>, tensor<8xf32>
// CHECK: %[[SUM:.*]] = kiln.reduce_sum %[[LC]] {dimensions = array<i64: 0>} : tensor<8xf32>
// CHECK: %[[WSUM:.*]] = kiln.reduce_sum %[[W]] {dimensions = array<i64: 0>} : tensor<8xf32>
// CHECK: %[[Y:.*]] = kiln.div %[[SUM]], %[[WSUM]] : tensor<f32>
// CHECK: return %[[Y]] : tensor<f32>
func.func @nll_loss_weighted_mean(%logp: tensor<8x10xf32>, %labels: tensor<8xi64>, %w: tensor<10xf32>) -> tensor<f32> {
  %y = kiln.nll_loss %logp, %labels weight %w : tensor<10xf32> {ignore_index = -100 : i64} : tensor<8x10xf32>, tensor<8xi64>
  return %y : tensor<f32>
}

// -logp[label] = lse - logits[label], lse = max + log(sum(exp(x - max)))
// over the class dimension: the logits are read by the two reductions and
// at the labels; no [N, C] log-probabilities are computed.
// CHECK-LABEL: func.func @cross_entropy(
// CHECK-SAME: %[[L:.*]]: tensor<8x10xf32>, %[[T:.*]]: tensor<8xi64>
// CHECK: %[[MAX:.*]] = kiln.reduce_max %[[L]] {dimensions = array<i64: 1>, keepdims} : tensor<8x10xf32>
// CHECK: %[[MAXB:.*]] = kiln.broadcast %[[MAX]] : tensor<8x1xf32> to tensor<8x10xf32>
// CHECK: %[[SHIFTED:.*]] = kiln.sub %[[L]], %[[MAXB]] : tensor<8x10xf32>
// CHECK: %[[E:.*]] = kiln.exp %[[SHIFTED]] : tensor<8x10xf32>
// CHECK: %[[S:.*]] = kiln.reduce_sum %[[E]] {dimensions = array<i64: 1>, keepdims} : tensor<8x10xf32>
// CHECK: %[[LOGS:.*]] = kiln.log %[[S]] : tensor<8x1xf32>
// CHECK: %[[LSE:.*]] = kiln.add %[[MAX]], %[[LOGS]] : tensor<8x1xf32>
// CHECK: %[[LSER:.*]] = kiln.reshape %[[LSE]] : tensor<8x1xf32> to tensor<8xf32>
// CHECK: %[[I:.*]] = kiln.reshape %[[T]] : tensor<8xi64> to tensor<8x1xi64>
// CHECK: %[[PICKED:.*]] = kiln.gather_elements %[[L]], %[[I]] {axis = 1 : i64} : tensor<8x10xf32>, tensor<8x1xi64>
// CHECK: %[[PICKEDR:.*]] = kiln.reshape %[[PICKED]] : tensor<8x1xf32> to tensor<8xf32>
// CHECK: %[[NLL:.*]] = kiln.sub %[[LSER]], %[[PICKEDR]] : tensor<8xf32>
// CHECK: %[[LOSS:.*]] = kiln.mul %[[NLL]], %{{.*}} : tensor<8xf32>
// CHECK: %[[SUM:.*]] = kiln.reduce_sum %[[LOSS]] {dimensions = array<i64: 0>} : tensor<8xf32>
// CHECK: %[[COUNT:.*]] = kiln.reduce_sum %{{.*}} {dimensions = array<i64: 0>} : tensor<8xf32>
// CHECK: %[[Y:.*]] = kiln.div %[[SUM]], %[[COUNT]] : tensor<f32>
// CHECK: return %[[Y]] : tensor<f32>
// KEEP-CE-LABEL: func.func @cross_entropy(
// KEEP-CE: kiln.cross_entropy
func.func @cross_entropy(%logits: tensor<8x10xf32>, %labels: tensor<8xi64>) -> tensor<f32> {
  %y = kiln.cross_entropy %logits, %labels : tensor<8x10xf32>, tensor<8xi64>
  return %y : tensor<f32>
}

// nll_loss of a log_softmax over the classes is cross-entropy before
// anything expands: kept with keep-cross-entropy, else expanded as above,
// gathering the logits at the labels (no [N, C] log-probabilities).
// CHECK-LABEL: func.func @nll_loss_of_log_softmax(
// CHECK-SAME: %[[X:[^:]*]]: tensor<8x10xf32>
// CHECK: %[[MAX:.*]] = kiln.reduce_max %[[X]] {dimensions = array<i64: 1>, keepdims} : tensor<8x10xf32>
// CHECK: %[[LSE:.*]] = kiln.add %[[MAX]], %{{.*}} : tensor<8x1xf32>
// CHECK: %[[PICKED:.*]] = kiln.gather_elements %[[X]], %{{.*}} {axis = 1 : i64} : tensor<8x10xf32>, tensor<8x1xi64>
// CHECK-NOT: tensor<8x10xf32>
// CHECK: return
// KEEP-CE-LABEL: func.func @nll_loss_of_log_softmax(
// KEEP-CE-SAME: %[[X:[^:]*]]: tensor<8x10xf32>, %[[T:[^:]*]]: tensor<8xi64>)
// KEEP-CE-NOT: kiln.log_softmax
// KEEP-CE: %[[Y:.*]] = kiln.cross_entropy %[[X]], %[[T]] {ignore_index = 3 : i64} : tensor<8x10xf32>, tensor<8xi64>
// KEEP-CE: return %[[Y]]
func.func @nll_loss_of_log_softmax(%x: tensor<8x10xf32>, %labels: tensor<8xi64>) -> tensor<f32> {
  %logp = kiln.log_softmax %x {axis = 1 : i64} : tensor<8x10xf32>
  %y = kiln.nll_loss %logp, %labels {ignore_index = 3 : i64} : tensor<8x10xf32>, tensor<8xi64>
  return %y : tensor<f32>
}

// PyTorch's label smoothing s = 0.1 over C = 5 classes:
// (1 - s) * w[t] * -logp[t] + s * (-sum_c w_c logp_c) / C, both terms zero
// where the label is ignore_index (-100, the PyTorch default), the mean
// divided by the sum of the counted elements' weights; -sum_c w_c logp_c =
// lse * sum_c w_c - sum_c w_c logits_c.
// CHECK-LABEL: func.func @cross_entropy_smoothing(
// CHECK-SAME: %[[L:.*]]: tensor<2x5x3xf32>, %[[T:.*]]: tensor<2x3xi32>, %[[CW:.*]]: tensor<5xf32>
// CHECK-DAG: %[[S:.*]] = kiln.constant dense<1.000000e-01> : tensor<2x3xf32>
// CHECK-DAG: %[[ONE_MINUS_S:.*]] = kiln.constant dense<0.899999976> : tensor<2x3xf32>
// CHECK-DAG: %[[C:.*]] = kiln.constant dense<5.000000e+00> : tensor<2x3xf32>
// CHECK-DAG: %[[IGNORE:.*]] = kiln.constant dense<-100> : tensor<2x3xi32>
// CHECK: %[[COUNTED:.*]] = kiln.compare <ne>, %[[T]], %[[IGNORE]] : tensor<2x3xi32>
// CHECK: %[[SAFE:.*]] = kiln.select %[[COUNTED]], %[[T]], %{{.*}} : tensor<2x3xi1>, tensor<2x3xi32>
// CHECK: %[[WG:.*]] = kiln.gather %[[CW]], %[[SAFE]] {axis = 0 : i64} : tensor<5xf32>, tensor<2x3xi32>
// CHECK: %[[W:.*]] = kiln.select %[[COUNTED]], %[[WG]], %{{.*}} : tensor<2x3xi1>, tensor<2x3xf32>
// CHECK: %[[LSE:.*]] = kiln.add %{{.*}}, %{{.*}} : tensor<2x1x3xf32>
// CHECK: %[[LSER:.*]] = kiln.reshape %[[LSE]] : tensor<2x1x3xf32> to tensor<2x3xf32>
// CHECK: kiln.gather_elements %[[L]], %{{.*}} {axis = 1 : i64} : tensor<2x5x3xf32>, tensor<2x1x3xi32>
// CHECK: %[[NLL:.*]] = kiln.sub %[[LSER]], %{{.*}} : tensor<2x3xf32>
// CHECK: %[[WNLL:.*]] = kiln.mul %[[NLL]], %[[W]] : tensor<2x3xf32>
// CHECK: %[[CWR:.*]] = kiln.reshape %[[CW]] : tensor<5xf32> to tensor<1x5x1xf32>
// CHECK: %[[CWB:.*]] = kiln.broadcast %[[CWR]] : tensor<1x5x1xf32> to tensor<2x5x3xf32>
// CHECK: %[[WL:.*]] = kiln.mul %[[L]], %[[CWB]] : tensor<2x5x3xf32>
// CHECK: %[[WTOTAL:.*]] = kiln.reduce_sum %[[CW]] {dimensions = array<i64: 0>} : tensor<5xf32>
// CHECK: %[[WTOTALB:.*]] = kiln.broadcast %[[WTOTAL]] : tensor<f32> to tensor<2x3xf32>
// CHECK: %[[LSEW:.*]] = kiln.mul %[[LSER]], %[[WTOTALB]] : tensor<2x3xf32>
// CHECK: %[[CSUM:.*]] = kiln.reduce_sum %[[WL]] {dimensions = array<i64: 1>} : tensor<2x5x3xf32>
// CHECK: %[[NEGSUM:.*]] = kiln.sub %[[LSEW]], %[[CSUM]] : tensor<2x3xf32>
// CHECK: %[[SMOOTH:.*]] = kiln.div %[[NEGSUM]], %[[C]] : tensor<2x3xf32>
// CHECK: %[[SMOOTH0:.*]] = kiln.select %[[COUNTED]], %[[SMOOTH]], %{{.*}} : tensor<2x3xi1>, tensor<2x3xf32>
// CHECK: %[[A:.*]] = kiln.mul %[[WNLL]], %[[ONE_MINUS_S]] : tensor<2x3xf32>
// CHECK: %[[B:.*]] = kiln.mul %[[SMOOTH0]], %[[S]] : tensor<2x3xf32>
// CHECK: %[[LOSS:.*]] = kiln.add %[[A]], %[[B]] : tensor<2x3xf32>
// CHECK: %[[LOSSC:.*]] = kiln.select %[[COUNTED]], %[[LOSS]], %{{.*}} : tensor<2x3xi1>, tensor<2x3xf32>
// CHECK: %[[SUM:.*]] = kiln.reduce_sum %[[LOSSC]] {dimensions = array<i64: 0, 1>} : tensor<2x3xf32>
// CHECK: %[[WSUM:.*]] = kiln.reduce_sum %[[W]] {dimensions = array<i64: 0, 1>} : tensor<2x3xf32>
// CHECK: %[[Y:.*]] = kiln.div %[[SUM]], %[[WSUM]] : tensor<f32>
// CHECK: return %[[Y]] : tensor<f32>
func.func @cross_entropy_smoothing(%logits: tensor<2x5x3xf32>, %labels: tensor<2x3xi32>, %w: tensor<5xf32>) -> tensor<f32> {
  %y = kiln.cross_entropy %logits, %labels weight %w : tensor<5xf32>
      {ignore_index = -100 : i64, label_smoothing = 0.1 : f64}
      : tensor<2x5x3xf32>, tensor<2x3xi32>
  return %y : tensor<f32>
}

// The same with i64 labels, no weights and reduction = none: the smoothing
// term is (C lse - sum_c logits_c) / C.
// CHECK-LABEL: func.func @cross_entropy_smoothing_none(
// CHECK-SAME: %[[L:.*]]: tensor<4x3xf32>, %[[T:.*]]: tensor<4xi64>
// CHECK-DAG: %[[IGNORE:.*]] = kiln.constant dense<-1> : tensor<4xi64>
// CHECK-DAG: %[[C:.*]] = kiln.constant dense<3.000000e+00> : tensor<4xf32>
// CHECK: kiln.compare <ne>, %[[T]], %[[IGNORE]] : tensor<4xi64>
// CHECK: %[[LSE:.*]] = kiln.reshape %{{.*}} : tensor<4x1xf32> to tensor<4xf32>
// CHECK: %[[LSEC:.*]] = kiln.mul %[[LSE]], %[[C]] : tensor<4xf32>
// CHECK: %[[CSUM:.*]] = kiln.reduce_sum %[[L]] {dimensions = array<i64: 1>} : tensor<4x3xf32>
// CHECK: %[[NEGSUM:.*]] = kiln.sub %[[LSEC]], %[[CSUM]] : tensor<4xf32>
// CHECK: kiln.div %[[NEGSUM]], %[[C]] : tensor<4xf32>
// CHECK: %[[LOSS:.*]] = kiln.add %{{.*}}, %{{.*}} : tensor<4xf32>
// CHECK-NEXT: %[[Y:.*]] = kiln.select %{{.*}}, %[[LOSS]], %{{.*}} : tensor<4xi1>, tensor<4xf32>
// CHECK-NEXT: return %[[Y]] : tensor<4xf32>
func.func @cross_entropy_smoothing_none(%logits: tensor<4x3xf32>, %labels: tensor<4xi64>) -> tensor<4xf32> {
  %y = kiln.cross_entropy %logits, %labels {reduction = #kiln.reduction<none>, ignore_index = -1 : i64, label_smoothing = 0.2 : f64}
      : tensor<4x3xf32>, tensor<4xi64>
  return %y : tensor<4xf32>
}

// keep-cross-entropy leaves an op whose class weights are not a constant
// (kiln-autodiff's rule gives them no gradient) for the expansion.
// KEEP-CE-LABEL: func.func @cross_entropy_weight_argument(
// KEEP-CE-NOT: kiln.cross_entropy
// KEEP-CE: return
func.func @cross_entropy_weight_argument(%logits: tensor<8x10xf32>, %labels: tensor<8xi64>, %w: tensor<10xf32>) -> tensor<f32> {
  %y = kiln.cross_entropy %logits, %labels weight %w : tensor<10xf32> : tensor<8x10xf32>, tensor<8xi64>
  return %y : tensor<f32>
}

// The gradient, mean over the counted elements: (p - onehot(label)) times
// grad / count on each counted row, selected (0 on ignored rows even when
// every row is ignored and grad / count is infinite), p = exp(logits - lse) with lse built as
// the forward's (CSE computes it once for both).
// CHECK-LABEL: func.func @cross_entropy_grad(
// CHECK-SAME: %[[L:.*]]: tensor<8x10xf32>, %[[T:.*]]: tensor<8xi64>, %[[G:.*]]: tensor<f32>
// CHECK-DAG: %[[ZEROS:.*]] = kiln.constant dense<0.000000e+00> : tensor<8x10xf32>
// CHECK-DAG: %[[ONES:.*]] = kiln.constant dense<1.000000e+00> : tensor<8x10xf32>
// CHECK-DAG: %[[IGNORE:.*]] = kiln.constant dense<-100> : tensor<8xi64>
// CHECK: %[[COUNTED:.*]] = kiln.compare <ne>, %[[T]], %[[IGNORE]] : tensor<8xi64>
// CHECK: %[[SAFE:.*]] = kiln.select %[[COUNTED]], %[[T]], %{{.*}} : tensor<8xi1>, tensor<8xi64>
// CHECK: %[[W:.*]] = kiln.select %[[COUNTED]], %{{.*}}, %{{.*}} : tensor<8xi1>, tensor<8xf32>
// CHECK: %[[COUNT:.*]] = kiln.reduce_sum %[[W]] {dimensions = array<i64: 0>} : tensor<8xf32>
// CHECK: %[[R:.*]] = kiln.div %[[G]], %[[COUNT]] : tensor<f32>
// CHECK: %[[RB:.*]] = kiln.broadcast %[[R]] : tensor<f32> to tensor<8xf32>
// CHECK: %[[MAX:.*]] = kiln.reduce_max %[[L]] {dimensions = array<i64: 1>, keepdims} : tensor<8x10xf32>
// CHECK: %[[LSE:.*]] = kiln.add %[[MAX]], %{{.*}} : tensor<8x1xf32>
// CHECK: %[[LSEB:.*]] = kiln.broadcast %[[LSE]] : tensor<8x1xf32> to tensor<8x10xf32>
// CHECK: %[[LOGP:.*]] = kiln.sub %[[L]], %[[LSEB]] : tensor<8x10xf32>
// CHECK: %[[P:.*]] = kiln.exp %[[LOGP]] : tensor<8x10xf32>
// CHECK: %[[CLASS:.*]] = kiln.iota {dimension = 1 : i64} : tensor<8x10xi64>
// CHECK: %[[SAFER:.*]] = kiln.reshape %[[SAFE]] : tensor<8xi64> to tensor<8x1xi64>
// CHECK: %[[SAFEB:.*]] = kiln.broadcast %[[SAFER]] : tensor<8x1xi64> to tensor<8x10xi64>
// CHECK: %[[HIT:.*]] = kiln.compare <eq>, %[[CLASS]], %[[SAFEB]] : tensor<8x10xi64>
// CHECK: %[[TARGET:.*]] = kiln.select %[[HIT]], %[[ONES]], %[[ZEROS]] : tensor<8x10xi1>, tensor<8x10xf32>
// CHECK: %[[COEF:.*]] = kiln.mul %[[RB]], %[[W]] : tensor<8xf32>
// CHECK: %[[COEFC:.*]] = kiln.select %[[COUNTED]], %[[COEF]], %{{.*}} : tensor<8xi1>, tensor<8xf32>
// CHECK: %[[COEFR:.*]] = kiln.reshape %[[COEFC]] : tensor<8xf32> to tensor<8x1xf32>
// CHECK: %[[COEFB:.*]] = kiln.broadcast %[[COEFR]] : tensor<8x1xf32> to tensor<8x10xf32>
// CHECK: %[[DIFF:.*]] = kiln.sub %[[P]], %[[TARGET]] : tensor<8x10xf32>
// CHECK: %[[DX:.*]] = kiln.mul %[[COEFB]], %[[DIFF]] : tensor<8x10xf32>
// CHECK: return %[[DX]] : tensor<8x10xf32>
func.func @cross_entropy_grad(%logits: tensor<8x10xf32>, %labels: tensor<8xi64>, %g: tensor<f32>) -> tensor<8x10xf32> {
  %dx = kiln.cross_entropy_grad %logits, %labels, %g {ignore_index = -100 : i64} : tensor<8x10xf32>, tensor<8xi64>, tensor<f32>
  return %dx : tensor<8x10xf32>
}

// With class weights, smoothing s = 0.1 and reduction none: the nll term
// (1 - s) w[label] grad (p - onehot) plus the smoothing term
// grad s / C (W p - w) on each counted row, W the sum of the weights.
// CHECK-LABEL: func.func @cross_entropy_grad_smoothing(
// CHECK-SAME: %[[L:.*]]: tensor<2x5x3xf32>, %[[T:.*]]: tensor<2x3xi32>, %[[CW:.*]]: tensor<5xf32>, %[[G:.*]]: tensor<2x3xf32>
// CHECK-DAG: %[[S_OVER_C:.*]] = kiln.constant dense<2.000000e-02> : tensor<2x5x3xf32>
// CHECK-DAG: %[[ONE_MINUS_S:.*]] = kiln.constant dense<0.899999976> : tensor<2x3xf32>
// CHECK: %[[COUNTED:.*]] = kiln.compare <ne>, %[[T]], %{{.*}} : tensor<2x3xi32>
// CHECK: %[[WG:.*]] = kiln.gather %[[CW]], %{{.*}} {axis = 0 : i64} : tensor<5xf32>, tensor<2x3xi32>
// CHECK: %[[W:.*]] = kiln.select %[[COUNTED]], %[[WG]], %{{.*}} : tensor<2x3xi1>, tensor<2x3xf32>
// CHECK: %[[LSE:.*]] = kiln.add %{{.*}}, %{{.*}} : tensor<2x1x3xf32>
// CHECK: %[[LSEB:.*]] = kiln.broadcast %[[LSE]] : tensor<2x1x3xf32> to tensor<2x5x3xf32>
// CHECK: %[[LOGP:.*]] = kiln.sub %[[L]], %[[LSEB]] : tensor<2x5x3xf32>
// CHECK: %[[P:.*]] = kiln.exp %[[LOGP]] : tensor<2x5x3xf32>
// CHECK: kiln.iota {dimension = 1 : i64} : tensor<2x5x3xi32>
// CHECK: %[[GW:.*]] = kiln.mul %[[G]], %[[W]] : tensor<2x3xf32>
// CHECK: %[[GWC:.*]] = kiln.select %[[COUNTED]], %[[GW]], %{{.*}} : tensor<2x3xi1>, tensor<2x3xf32>
// CHECK: %[[NLLC:.*]] = kiln.mul %[[GWC]], %[[ONE_MINUS_S]] : tensor<2x3xf32>
// CHECK: %[[NLLCR:.*]] = kiln.reshape %[[NLLC]] : tensor<2x3xf32> to tensor<2x1x3xf32>
// CHECK: %[[NLLCB:.*]] = kiln.broadcast %[[NLLCR]] : tensor<2x1x3xf32> to tensor<2x5x3xf32>
// CHECK: %[[DIFF:.*]] = kiln.sub %[[P]], %{{.*}} : tensor<2x5x3xf32>
// CHECK: %[[NLL:.*]] = kiln.mul %[[NLLCB]], %[[DIFF]] : tensor<2x5x3xf32>
// CHECK: %[[GC:.*]] = kiln.select %[[COUNTED]], %[[G]], %{{.*}} : tensor<2x3xi1>, tensor<2x3xf32>
// CHECK: %[[WTOTAL:.*]] = kiln.reduce_sum %[[CW]] {dimensions = array<i64: 0>} : tensor<5xf32>
// CHECK: %[[WTOTALR:.*]] = kiln.reshape %[[WTOTAL]] : tensor<f32> to tensor<1x1x1xf32>
// CHECK: %[[WTOTALB:.*]] = kiln.broadcast %[[WTOTALR]] : tensor<1x1x1xf32> to tensor<2x5x3xf32>
// CHECK: %[[WP:.*]] = kiln.mul %[[WTOTALB]], %[[P]] : tensor<2x5x3xf32>
// CHECK: %[[CWR:.*]] = kiln.reshape %[[CW]] : tensor<5xf32> to tensor<1x5x1xf32>
// CHECK: %[[CWB:.*]] = kiln.broadcast %[[CWR]] : tensor<1x5x1xf32> to tensor<2x5x3xf32>
// CHECK: %[[SPREAD:.*]] = kiln.sub %[[WP]], %[[CWB]] : tensor<2x5x3xf32>
// CHECK: %[[SPREADS:.*]] = kiln.mul %[[SPREAD]], %[[S_OVER_C]] : tensor<2x5x3xf32>
// CHECK: %[[GCR:.*]] = kiln.reshape %[[GC]] : tensor<2x3xf32> to tensor<2x1x3xf32>
// CHECK: %[[GCB:.*]] = kiln.broadcast %[[GCR]] : tensor<2x1x3xf32> to tensor<2x5x3xf32>
// CHECK: %[[SMOOTH:.*]] = kiln.mul %[[GCB]], %[[SPREADS]] : tensor<2x5x3xf32>
// CHECK: %[[DX:.*]] = kiln.add %[[NLL]], %[[SMOOTH]] : tensor<2x5x3xf32>
// CHECK: return %[[DX]] : tensor<2x5x3xf32>
func.func @cross_entropy_grad_smoothing(%logits: tensor<2x5x3xf32>, %labels: tensor<2x3xi32>, %w: tensor<5xf32>, %g: tensor<2x3xf32>) -> tensor<2x5x3xf32> {
  %dx = kiln.cross_entropy_grad %logits, %labels, %g weight %w : tensor<5xf32>
      {reduction = #kiln.reduction<none>, ignore_index = -100 : i64, label_smoothing = 0.1 : f64}
      : tensor<2x5x3xf32>, tensor<2x3xi32>, tensor<2x3xf32>
  return %dx : tensor<2x5x3xf32>
}

// Without class weights or ignore_index, summed: every row's coefficient is
// grad, and the smoothing term s (p - 1 / C).
// CHECK-LABEL: func.func @cross_entropy_grad_smoothing_sum(
// CHECK-SAME: %[[L:.*]]: tensor<4x3xf32>, %[[T:.*]]: tensor<4xi64>, %[[G:.*]]: tensor<f32>
// CHECK-DAG: %[[S:.*]] = kiln.constant dense<2.000000e-01> : tensor<4x3xf32>
// CHECK-DAG: %[[ONE_OVER_C:.*]] = kiln.constant dense<0.333333343> : tensor<4x3xf32>
// CHECK-NOT: kiln.compare <ne>
// CHECK: %[[GB:.*]] = kiln.broadcast %[[G]] : tensor<f32> to tensor<4xf32>
// CHECK: %[[LSE:.*]] = kiln.add %{{.*}}, %{{.*}} : tensor<4x1xf32>
// CHECK: %[[LSEB:.*]] = kiln.broadcast %[[LSE]] : tensor<4x1xf32> to tensor<4x3xf32>
// CHECK: %[[LOGP:.*]] = kiln.sub %[[L]], %[[LSEB]] : tensor<4x3xf32>
// CHECK: %[[P:.*]] = kiln.exp %[[LOGP]] : tensor<4x3xf32>
// CHECK: %[[NLL:.*]] = kiln.mul %{{.*}}, %{{.*}} : tensor<4x3xf32>
// CHECK: %[[CENTRED:.*]] = kiln.sub %[[P]], %[[ONE_OVER_C]] : tensor<4x3xf32>
// CHECK: %[[SPREAD:.*]] = kiln.mul %[[CENTRED]], %[[S]] : tensor<4x3xf32>
// CHECK: %[[GR:.*]] = kiln.reshape %[[GB]] : tensor<4xf32> to tensor<4x1xf32>
// CHECK: %[[GRB:.*]] = kiln.broadcast %[[GR]] : tensor<4x1xf32> to tensor<4x3xf32>
// CHECK: %[[SMOOTH:.*]] = kiln.mul %[[GRB]], %[[SPREAD]] : tensor<4x3xf32>
// CHECK: %[[DX:.*]] = kiln.add %[[NLL]], %[[SMOOTH]] : tensor<4x3xf32>
// CHECK: return %[[DX]] : tensor<4x3xf32>
func.func @cross_entropy_grad_smoothing_sum(%logits: tensor<4x3xf32>, %labels: tensor<4xi64>, %g: tensor<f32>) -> tensor<4x3xf32> {
  %dx = kiln.cross_entropy_grad %logits, %labels, %g {reduction = #kiln.reduction<sum>, label_smoothing = 0.2 : f64}
      : tensor<4x3xf32>, tensor<4xi64>, tensor<f32>
  return %dx : tensor<4x3xf32>
}
