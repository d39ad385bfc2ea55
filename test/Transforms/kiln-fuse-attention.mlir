// RUN: kiln-opt %s --kiln-fuse-attention | FileCheck %s
// RUN: kiln-opt %s --kiln-fuse-attention 2>&1 >/dev/null | FileCheck %s --check-prefix=REMARK

// matmul(q, kᵀ) [scaled] [masked] -> softmax over the last dimension ->
// matmul with v becomes one kiln.attention; the transposes move onto the
// operands, folded into the transposes that produce them. A chain with a
// value used elsewhere stays as it is.

// CHECK-LABEL: func.func @plain(
// CHECK-SAME: %[[Q:.*]]: tensor<2x8x4xf32>, %[[K:.*]]: tensor<2x6x4xf32>, %[[V:.*]]: tensor<2x6x5xf32>
// CHECK-NEXT: %[[O:.*]] = kiln.attention %[[Q]], %[[K]], %[[V]] : tensor<2x8x4xf32>, tensor<2x6x4xf32>, tensor<2x6x5xf32>
// CHECK-NEXT: return %[[O]]
func.func @plain(%q: tensor<2x8x4xf32>, %k: tensor<2x6x4xf32>, %v: tensor<2x6x5xf32>) -> tensor<2x8x5xf32> {
  %s = kiln.matmul %q, %k {transpose_rhs} : tensor<2x8x4xf32>, tensor<2x6x4xf32>
  %p = kiln.softmax %s {axis = 2 : i64} : tensor<2x8x6xf32>
  %o = kiln.matmul %p, %v : tensor<2x8x6xf32>, tensor<2x6x5xf32>
  return %o : tensor<2x8x5xf32>
}

// The BERT form: key heads split by a transpose that also swaps the last two
// dimensions (folded into one transpose of k), scores divided by a constant,
// a broadcast padding mask added (taken before its broadcast).
// CHECK-LABEL: func.func @div_add_mask(
// CHECK-SAME: %[[Q:.*]]: tensor<2x2x8x4xf32>, %[[KH:.*]]: tensor<2x8x2x4xf32>, %[[V:.*]]: tensor<2x2x8x4xf32>, %[[M:.*]]: tensor<2x1x1x8xf32>
// CHECK: %[[K:.*]] = kiln.transpose %[[KH]] {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x8x2x4xf32>
// CHECK-NEXT: %[[O:.*]] = kiln.attention %[[Q]], %[[K]], %[[V]] mask %[[M]] : tensor<2x1x1x8xf32> {scale = 5.000000e-01 : f64} : tensor<2x2x8x4xf32>, tensor<2x2x8x4xf32>, tensor<2x2x8x4xf32>
// CHECK-NOT: kiln.softmax
// CHECK: return %[[O]]
func.func @div_add_mask(%q: tensor<2x2x8x4xf32>, %kh: tensor<2x8x2x4xf32>, %v: tensor<2x2x8x4xf32>,
                        %m: tensor<2x1x1x8xf32>) -> tensor<2x2x8x4xf32> {
  %kt = kiln.transpose %kh {permutation = array<i64: 0, 2, 3, 1>} : tensor<2x8x2x4xf32>
  %s = kiln.matmul %q, %kt : tensor<2x2x8x4xf32>, tensor<2x2x4x8xf32>
  %c = kiln.constant dense<2.0> : tensor<2x2x8x8xf32>
  %scaled = kiln.div %s, %c : tensor<2x2x8x8xf32>
  %mb = kiln.broadcast %m : tensor<2x1x1x8xf32> to tensor<2x2x8x8xf32>
  %masked = kiln.add %scaled, %mb : tensor<2x2x8x8xf32>
  %p = kiln.softmax %masked {axis = 3 : i64} : tensor<2x2x8x8xf32>
  %o = kiln.matmul %p, %v : tensor<2x2x8x8xf32>, tensor<2x2x8x4xf32>
  return %o : tensor<2x2x8x4xf32>
}

// The GPT-2 form: scores multiplied by a constant (on either side), then
// masked_fill(cond, -inf) as a select, which becomes the additive mask
// select(cond, -inf, 0) on the condition before its broadcast. A k that is
// no transpose gets one.
// CHECK-LABEL: func.func @mul_select_mask(
// CHECK-SAME: %[[Q:.*]]: tensor<2x8x4xf32>, %[[KT:.*]]: tensor<2x4x8xf32>, %[[V:.*]]: tensor<2x8x4xf32>, %[[C:.*]]: tensor<8x8xi1>
// CHECK-DAG: %[[NEGINF:.*]] = kiln.constant dense<0xFF800000> : tensor<8x8xf32>
// CHECK-DAG: %[[ZERO:.*]] = kiln.constant dense<0.000000e+00> : tensor<8x8xf32>
// CHECK-DAG: %[[K:.*]] = kiln.transpose %[[KT]] {permutation = array<i64: 0, 2, 1>} : tensor<2x4x8xf32>
// CHECK: %[[M:.*]] = kiln.select %[[C]], %[[NEGINF]], %[[ZERO]] : tensor<8x8xi1>, tensor<8x8xf32>
// CHECK-NEXT: %[[O:.*]] = kiln.attention %[[Q]], %[[K]], %[[V]] mask %[[M]] : tensor<8x8xf32> {scale = 2.500000e-01 : f64} : tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>
// CHECK-NOT: kiln.softmax
// CHECK: return %[[O]]
func.func @mul_select_mask(%q: tensor<2x8x4xf32>, %kt: tensor<2x4x8xf32>, %v: tensor<2x8x4xf32>,
                           %cond: tensor<8x8xi1>) -> tensor<2x8x4xf32> {
  %s = kiln.matmul %q, %kt : tensor<2x8x4xf32>, tensor<2x4x8xf32>
  %c = kiln.constant dense<0.25> : tensor<2x8x8xf32>
  %scaled = kiln.mul %c, %s : tensor<2x8x8xf32>
  %cb = kiln.broadcast %cond : tensor<8x8xi1> to tensor<2x8x8xi1>
  %ninf = kiln.constant dense<0xFF800000> : tensor<2x8x8xf32>
  %masked = kiln.select %cb, %ninf, %scaled : tensor<2x8x8xi1>, tensor<2x8x8xf32>
  %p = kiln.softmax %masked {axis = 2 : i64} : tensor<2x8x8xf32>
  %o = kiln.matmul %p, %v : tensor<2x8x8xf32>, tensor<2x8x4xf32>
  return %o : tensor<2x8x4xf32>
}

// A select that keeps the scores where the condition holds drops them where
// it does not; q and v given transposed to the matmuls are transposed back.
// CHECK-LABEL: func.func @keep_where_true(
// CHECK-SAME: %[[QT:.*]]: tensor<4x8xf32>, %[[K:.*]]: tensor<6x4xf32>, %[[VT:.*]]: tensor<3x6xf32>, %[[C:.*]]: tensor<8x6xi1>
// CHECK-DAG: %[[NEGINF:.*]] = kiln.constant dense<0xFF800000> : tensor<8x6xf32>
// CHECK-DAG: %[[ZERO:.*]] = kiln.constant dense<0.000000e+00> : tensor<8x6xf32>
// CHECK-DAG: %[[Q:.*]] = kiln.transpose %[[QT]] {permutation = array<i64: 1, 0>} : tensor<4x8xf32>
// CHECK-DAG: %[[V:.*]] = kiln.transpose %[[VT]] {permutation = array<i64: 1, 0>} : tensor<3x6xf32>
// CHECK: %[[M:.*]] = kiln.select %[[C]], %[[ZERO]], %[[NEGINF]] : tensor<8x6xi1>, tensor<8x6xf32>
// CHECK-NEXT: %[[O:.*]] = kiln.attention %[[Q]], %[[K]], %[[V]] mask %[[M]] : tensor<8x6xf32> : tensor<8x4xf32>, tensor<6x4xf32>, tensor<6x3xf32>
func.func @keep_where_true(%qt: tensor<4x8xf32>, %k: tensor<6x4xf32>, %vt: tensor<3x6xf32>,
                           %cond: tensor<8x6xi1>) -> tensor<8x3xf32> {
  %s = kiln.matmul %qt, %k {transpose_lhs, transpose_rhs} : tensor<4x8xf32>, tensor<6x4xf32>
  %ninf = kiln.constant dense<0xFF800000> : tensor<8x6xf32>
  %masked = kiln.select %cond, %s, %ninf : tensor<8x6xi1>, tensor<8x6xf32>
  %p = kiln.softmax %masked {axis = 1 : i64} : tensor<8x6xf32>
  %o = kiln.matmul %p, %vt {transpose_rhs} : tensor<8x6xf32>, tensor<3x6xf32>
  return %o : tensor<8x3xf32>
}

// The scale applied to the operands instead of the scores (DistilBERT
// divides the query; the export of scaled_dot_product_attention multiplies
// the query and the key by the scale's root): the factors multiply.
// CHECK-LABEL: func.func @scaled_operands(
// CHECK-SAME: %[[Q:.*]]: tensor<2x8x4xf32>, %[[K:.*]]: tensor<2x6x4xf32>, %[[V:.*]]: tensor<2x6x5xf32>
// CHECK-NEXT: %[[O:.*]] = kiln.attention %[[Q]], %[[K]], %[[V]] {scale = 1.250000e-01 : f64} : tensor<2x8x4xf32>, tensor<2x6x4xf32>, tensor<2x6x5xf32>
// CHECK-NEXT: return %[[O]]
func.func @scaled_operands(%q: tensor<2x8x4xf32>, %k: tensor<2x6x4xf32>, %v: tensor<2x6x5xf32>) -> tensor<2x8x5xf32> {
  %two = kiln.constant dense<2.0> : tensor<2x8x4xf32>
  %qs = kiln.div %q, %two : tensor<2x8x4xf32>
  %half = kiln.constant dense<0.5> : tensor<2x6x4xf32>
  %ks = kiln.mul %half, %k : tensor<2x6x4xf32>
  %s = kiln.matmul %qs, %ks {transpose_rhs} : tensor<2x8x4xf32>, tensor<2x6x4xf32>
  %c = kiln.constant dense<0.5> : tensor<2x8x6xf32>
  %scaled = kiln.mul %s, %c : tensor<2x8x6xf32>
  %p = kiln.softmax %scaled {axis = 2 : i64} : tensor<2x8x6xf32>
  %o = kiln.matmul %p, %v : tensor<2x8x6xf32>, tensor<2x6x5xf32>
  return %o : tensor<2x8x5xf32>
}

// A select of -inf, then a mask added: the two masks add up, broadcast to
// the shape both broadcast to.
// CHECK-LABEL: func.func @select_then_mask(
// CHECK-SAME: %[[Q:.*]]: tensor<2x2x4x4xf32>, %[[K:.*]]: tensor<2x2x4x4xf32>, %[[V:.*]]: tensor<2x2x4x4xf32>, %[[C:.*]]: tensor<1x1x4x4xi1>, %[[PAD:.*]]: tensor<2x1x1x4xf32>
// CHECK-DAG: %[[NEGINF:.*]] = kiln.constant dense<0xFF800000> : tensor<1x1x4x4xf32>
// CHECK-DAG: %[[ZERO:.*]] = kiln.constant dense<0.000000e+00> : tensor<1x1x4x4xf32>
// CHECK: %[[DROP:.*]] = kiln.select %[[C]], %[[ZERO]], %[[NEGINF]] : tensor<1x1x4x4xi1>, tensor<1x1x4x4xf32>
// CHECK-NEXT: %[[DROPB:.*]] = kiln.broadcast %[[DROP]] : tensor<1x1x4x4xf32> to tensor<2x1x4x4xf32>
// CHECK-NEXT: %[[PADB:.*]] = kiln.broadcast %[[PAD]] : tensor<2x1x1x4xf32> to tensor<2x1x4x4xf32>
// CHECK-NEXT: %[[M:.*]] = kiln.add %[[DROPB]], %[[PADB]] : tensor<2x1x4x4xf32>
// CHECK-NEXT: %[[O:.*]] = kiln.attention %[[Q]], %[[K]], %[[V]] mask %[[M]] : tensor<2x1x4x4xf32> {scale = 5.000000e-01 : f64}
// CHECK-NOT: kiln.softmax
func.func @select_then_mask(%q: tensor<2x2x4x4xf32>, %k: tensor<2x2x4x4xf32>, %v: tensor<2x2x4x4xf32>,
                            %cond: tensor<1x1x4x4xi1>, %pad: tensor<2x1x1x4xf32>) -> tensor<2x2x4x4xf32> {
  %s = kiln.matmul %q, %k {transpose_rhs} : tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>
  %c = kiln.constant dense<2.0> : tensor<2x2x4x4xf32>
  %scaled = kiln.div %s, %c : tensor<2x2x4x4xf32>
  %cb = kiln.broadcast %cond : tensor<1x1x4x4xi1> to tensor<2x2x4x4xi1>
  %ninf = kiln.constant dense<0xFF800000> : tensor<2x2x4x4xf32>
  %kept = kiln.select %cb, %scaled, %ninf : tensor<2x2x4x4xi1>, tensor<2x2x4x4xf32>
  %pb = kiln.broadcast %pad : tensor<2x1x1x4xf32> to tensor<2x2x4x4xf32>
  %masked = kiln.add %kept, %pb : tensor<2x2x4x4xf32>
  %p = kiln.softmax %masked {axis = 3 : i64} : tensor<2x2x4x4xf32>
  %o = kiln.matmul %p, %v : tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>
  return %o : tensor<2x2x4x4xf32>
}

// Hugging Face's GPT-2: where(causal buffer, scores, lowest float). The
// condition is constant and keeps a key in every row, so no row drops every
// key, and the lowest float is exactly -inf's mask there.
// CHECK-LABEL: func.func @lowest_fill(
// CHECK-DAG: %[[C:.*]] = kiln.constant dense<{{\[\[}}true, false, false], [true, true, false], [true, true, true]]> : tensor<3x3xi1>
// CHECK-DAG: %[[NEGINF:.*]] = kiln.constant dense<0xFF800000> : tensor<3x3xf32>
// CHECK-DAG: %[[ZERO:.*]] = kiln.constant dense<0.000000e+00> : tensor<3x3xf32>
// CHECK: %[[M:.*]] = kiln.select %[[C]], %[[ZERO]], %[[NEGINF]] : tensor<3x3xi1>, tensor<3x3xf32>
// CHECK-NEXT: kiln.attention %{{.*}}, %{{.*}}, %{{.*}} mask %[[M]] : tensor<3x3xf32>
// CHECK-NOT: kiln.softmax
func.func @lowest_fill(%q: tensor<2x3x4xf32>, %k: tensor<2x3x4xf32>, %v: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %s = kiln.matmul %q, %k {transpose_rhs} : tensor<2x3x4xf32>, tensor<2x3x4xf32>
  %cond = kiln.constant dense<[[true, false, false], [true, true, false], [true, true, true]]> : tensor<3x3xi1>
  %cb = kiln.broadcast %cond : tensor<3x3xi1> to tensor<2x3x3xi1>
  %lowest = kiln.constant dense<-3.40282347E+38> : tensor<2x3x3xf32>
  %masked = kiln.select %cb, %s, %lowest : tensor<2x3x3xi1>, tensor<2x3x3xf32>
  %p = kiln.softmax %masked {axis = 2 : i64} : tensor<2x3x3xf32>
  %o = kiln.matmul %p, %v : tensor<2x3x3xf32>, tensor<2x3x4xf32>
  return %o : tensor<2x3x4xf32>
}

// masked_fill(constant, lowest) drops where its condition holds: every row
// here keeps a key. A condition broadcast along the keys ([3, 1]) keeps or
// drops whole rows: with no row dropped it fuses too.
// CHECK-LABEL: func.func @lowest_fill_where_true(
// CHECK-DAG: %[[C:.*]] = kiln.constant dense<{{\[\[}}false, true, true], [false, false, true], [false, false, false]]> : tensor<3x3xi1>
// CHECK-DAG: %[[R:.*]] = kiln.constant dense<false> : tensor<3x1xi1>
// CHECK-DAG: %[[NEGINF:.*]] = kiln.constant dense<0xFF800000> : tensor<3x3xf32>
// CHECK-DAG: %[[ZERO:.*]] = kiln.constant dense<0.000000e+00> : tensor<3x3xf32>
// CHECK-DAG: %[[NEGINF1:.*]] = kiln.constant dense<0xFF800000> : tensor<3x1xf32>
// CHECK-DAG: %[[ZERO1:.*]] = kiln.constant dense<0.000000e+00> : tensor<3x1xf32>
// CHECK: %[[M:.*]] = kiln.select %[[C]], %[[NEGINF]], %[[ZERO]] : tensor<3x3xi1>, tensor<3x3xf32>
// CHECK-NEXT: kiln.attention %{{.*}}, %{{.*}}, %{{.*}} mask %[[M]] : tensor<3x3xf32>
// CHECK: %[[M1:.*]] = kiln.select %[[R]], %[[NEGINF1]], %[[ZERO1]] : tensor<3x1xi1>, tensor<3x1xf32>
// CHECK-NEXT: kiln.attention %{{.*}}, %{{.*}}, %{{.*}} mask %[[M1]] : tensor<3x1xf32>
// CHECK-NOT: kiln.softmax
func.func @lowest_fill_where_true(%q: tensor<3x4xf32>, %k: tensor<3x4xf32>, %v: tensor<3x4xf32>)
    -> (tensor<3x4xf32>, tensor<3x4xf32>) {
  %lowest = kiln.constant dense<-3.40282347E+38> : tensor<3x3xf32>
  %drop = kiln.constant dense<[[false, true, true], [false, false, true], [false, false, false]]> : tensor<3x3xi1>
  %s0 = kiln.matmul %q, %k {transpose_rhs} : tensor<3x4xf32>, tensor<3x4xf32>
  %m0 = kiln.select %drop, %lowest, %s0 : tensor<3x3xi1>, tensor<3x3xf32>
  %p0 = kiln.softmax %m0 {axis = 1 : i64} : tensor<3x3xf32>
  %o0 = kiln.matmul %p0, %v : tensor<3x3xf32>, tensor<3x4xf32>
  %rows = kiln.constant dense<false> : tensor<3x1xi1>
  %rb = kiln.broadcast %rows : tensor<3x1xi1> to tensor<3x3xi1>
  %s1 = kiln.matmul %q, %k {transpose_rhs} : tensor<3x4xf32>, tensor<3x4xf32>
  %m1 = kiln.select %rb, %lowest, %s1 : tensor<3x3xi1>, tensor<3x3xf32>
  %p1 = kiln.softmax %m1 {axis = 1 : i64} : tensor<3x3xf32>
  %o1 = kiln.matmul %p1, %v : tensor<3x3xf32>, tensor<3x4xf32>
  return %o0, %o1 : tensor<3x4xf32>, tensor<3x4xf32>
}

// A scaled query that something else reads too is the query as it is.
// CHECK-LABEL: func.func @scaled_query_used_twice(
// CHECK-SAME: %[[Q:.*]]: tensor<8x4xf32>, %[[K:.*]]: tensor<6x4xf32>, %[[V:.*]]: tensor<6x5xf32>
// CHECK: %[[QS:.*]] = kiln.mul %[[Q]], %{{.*}} : tensor<8x4xf32>
// CHECK-NEXT: %[[O:.*]] = kiln.attention %[[QS]], %[[K]], %[[V]] : tensor<8x4xf32>, tensor<6x4xf32>, tensor<6x5xf32>
// CHECK-NEXT: return %[[O]], %[[QS]]
func.func @scaled_query_used_twice(%q: tensor<8x4xf32>, %k: tensor<6x4xf32>, %v: tensor<6x5xf32>)
    -> (tensor<8x5xf32>, tensor<8x4xf32>) {
  %c = kiln.constant dense<0.5> : tensor<8x4xf32>
  %qs = kiln.mul %q, %c : tensor<8x4xf32>
  %s = kiln.matmul %qs, %k {transpose_rhs} : tensor<8x4xf32>, tensor<6x4xf32>
  %p = kiln.softmax %s {axis = 1 : i64} : tensor<8x6xf32>
  %o = kiln.matmul %p, %v : tensor<8x6xf32>, tensor<6x5xf32>
  return %o, %qs : tensor<8x5xf32>, tensor<8x4xf32>
}

// A finite fill alone where a row may drop every key is masked_fill: the
// mask holds the fill where the select drops (not -inf), so that a row it
// drops whole has PyTorch's uniform probabilities, and the attention's
// gradient gives the filled scores none. A condition that is an input (a
// padding mask, as DistilBERT's), a constant one with a row of nothing
// kept, and a condition broadcast along the keys that drops a whole row.
// CHECK-LABEL: func.func @lowest_fill_masked_fill(
// CHECK-SAME: %[[Q:[a-z0-9]+]]: tensor<3x4xf32>, %[[K:[a-z0-9]+]]: tensor<3x4xf32>, %[[V:[a-z0-9]+]]: tensor<3x4xf32>, %[[COND:[a-z0-9]+]]: tensor<3x3xi1>
// CHECK-DAG: %[[L1:.*]] = kiln.constant dense<-3.40282347E+38> : tensor<3x1xf32>
// CHECK-DAG: %[[Z1:.*]] = kiln.constant dense<0.000000e+00> : tensor<3x1xf32>
// CHECK-DAG: %[[ROW:.*]] = kiln.constant dense<{{\[}}[false], [true], [false]]> : tensor<3x1xi1>
// CHECK-DAG: %[[L:.*]] = kiln.constant dense<-3.40282347E+38> : tensor<3x3xf32>
// CHECK-DAG: %[[Z:.*]] = kiln.constant dense<0.000000e+00> : tensor<3x3xf32>
// CHECK: %[[M0:.*]] = kiln.select %[[COND]], %[[L]], %[[Z]] : tensor<3x3xi1>, tensor<3x3xf32>
// CHECK: %[[O0:.*]] = kiln.attention %[[Q]], %[[K]], %[[V]] mask %[[M0]] : tensor<3x3xf32> {masked_fill}
// CHECK: %[[M1:.*]] = kiln.select %{{.*}}, %[[Z]], %[[L]] : tensor<3x3xi1>, tensor<3x3xf32>
// CHECK: %[[O1:.*]] = kiln.attention %[[Q]], %[[K]], %[[V]] mask %[[M1]] : tensor<3x3xf32> {masked_fill}
// CHECK: %[[M2:.*]] = kiln.select %[[ROW]], %[[L1]], %[[Z1]] : tensor<3x1xi1>, tensor<3x1xf32>
// CHECK: %[[O2:.*]] = kiln.attention %[[Q]], %[[K]], %[[V]] mask %[[M2]] : tensor<3x1xf32> {masked_fill}
// CHECK: return %[[O0]], %[[O1]], %[[O2]]
func.func @lowest_fill_masked_fill(%q: tensor<3x4xf32>, %k: tensor<3x4xf32>, %v: tensor<3x4xf32>,
                                   %cond: tensor<3x3xi1>)
    -> (tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>) {
  %lowest = kiln.constant dense<-3.40282347E+38> : tensor<3x3xf32>
  %s0 = kiln.matmul %q, %k {transpose_rhs} : tensor<3x4xf32>, tensor<3x4xf32>
  %m0 = kiln.select %cond, %lowest, %s0 : tensor<3x3xi1>, tensor<3x3xf32>
  %p0 = kiln.softmax %m0 {axis = 1 : i64} : tensor<3x3xf32>
  %o0 = kiln.matmul %p0, %v : tensor<3x3xf32>, tensor<3x4xf32>
  %rowless = kiln.constant dense<[[true, false, false], [false, false, false], [true, true, true]]> : tensor<3x3xi1>
  %s1 = kiln.matmul %q, %k {transpose_rhs} : tensor<3x4xf32>, tensor<3x4xf32>
  %m1 = kiln.select %rowless, %s1, %lowest : tensor<3x3xi1>, tensor<3x3xf32>
  %p1 = kiln.softmax %m1 {axis = 1 : i64} : tensor<3x3xf32>
  %o1 = kiln.matmul %p1, %v : tensor<3x3xf32>, tensor<3x4xf32>
  %onerow = kiln.constant dense<[[false], [true], [false]]> : tensor<3x1xi1>
  %orb = kiln.broadcast %onerow : tensor<3x1xi1> to tensor<3x3xi1>
  %s2 = kiln.matmul %q, %k {transpose_rhs} : tensor<3x4xf32>, tensor<3x4xf32>
  %m2 = kiln.select %orb, %lowest, %s2 : tensor<3x3xi1>, tensor<3x3xf32>
  %p2 = kiln.softmax %m2 {axis = 1 : i64} : tensor<3x3xf32>
  %o2 = kiln.matmul %p2, %v : tensor<3x3xf32>, tensor<3x4xf32>
  return %o0, %o1, %o2 : tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>
}

// A mask added after a finite fill of the scores after each query's
// position (Hugging Face's GPT-2 with an attention mask) is causal_fill: the
// mask is the fill where the select drops plus the added mask (in a row
// whose kept keys are all masked, the keys at the lowest float share the
// probabilities, and only those the select kept get a gradient).
// CHECK-LABEL: func.func @causal_fill(
// CHECK-SAME: %[[Q:[a-z0-9]+]]: tensor<3x4xf32>, %[[K:[a-z0-9]+]]: tensor<3x4xf32>, %[[V:[a-z0-9]+]]: tensor<3x4xf32>, %[[PAD:[a-z0-9]+]]: tensor<3xf32>
// CHECK-DAG: %[[L:.*]] = kiln.constant dense<-3.40282347E+38> : tensor<3x3xf32>
// CHECK-DAG: %[[Z:.*]] = kiln.constant dense<0.000000e+00> : tensor<3x3xf32>
// CHECK: %[[SEL:.*]] = kiln.select %{{.*}}, %[[Z]], %[[L]] : tensor<3x3xi1>, tensor<3x3xf32>
// CHECK: %[[PB:.*]] = kiln.broadcast %[[PAD]] : tensor<3xf32> to tensor<3x3xf32>
// CHECK: %[[M:.*]] = kiln.add %[[SEL]], %[[PB]] : tensor<3x3xf32>
// CHECK: kiln.attention %[[Q]], %[[K]], %[[V]] mask %[[M]] : tensor<3x3xf32> {causal_fill}
func.func @causal_fill(%q: tensor<3x4xf32>, %k: tensor<3x4xf32>, %v: tensor<3x4xf32>,
                       %pad: tensor<3xf32>) -> tensor<3x4xf32> {
  %lowest = kiln.constant dense<-3.40282347E+38> : tensor<3x3xf32>
  %causal = kiln.constant dense<[[true, false, false], [true, true, false], [true, true, true]]> : tensor<3x3xi1>
  %s2 = kiln.matmul %q, %k {transpose_rhs} : tensor<3x4xf32>, tensor<3x4xf32>
  %m2 = kiln.select %causal, %s2, %lowest : tensor<3x3xi1>, tensor<3x3xf32>
  %pb = kiln.broadcast %pad : tensor<3xf32> to tensor<3x3xf32>
  %a2 = kiln.add %m2, %pb : tensor<3x3xf32>
  %p2 = kiln.softmax %a2 {axis = 1 : i64} : tensor<3x3xf32>
  %o2 = kiln.matmul %p2, %v : tensor<3x3xf32>, tensor<3x4xf32>
  return %o2 : tensor<3x4xf32>
}

// The same as exporters write it for [B, H, S, S] scores: a [1, 1, S, S]
// condition broadcast, filling where it holds (masked_fill(after diagonal,
// lowest)), with a [B, 1, 1, S] padding mask.
// CHECK-LABEL: func.func @causal_fill_4d(
// CHECK: %[[SEL:.*]] = kiln.select %{{.*}}, %{{.*}}, %{{.*}} : tensor<1x1x3x3xi1>, tensor<1x1x3x3xf32>
// CHECK: %[[SB:.*]] = kiln.broadcast %[[SEL]] : tensor<1x1x3x3xf32> to tensor<2x1x3x3xf32>
// CHECK: %[[PB:.*]] = kiln.broadcast %{{.*}} : tensor<2x1x1x3xf32> to tensor<2x1x3x3xf32>
// CHECK: %[[M:.*]] = kiln.add %[[SB]], %[[PB]] : tensor<2x1x3x3xf32>
// CHECK: kiln.attention %{{.*}}, %{{.*}}, %{{.*}} mask %[[M]] : tensor<2x1x3x3xf32> {causal_fill, scale = 2.500000e-01 : f64}
func.func @causal_fill_4d(%q: tensor<2x2x3x4xf32>, %k: tensor<2x2x3x4xf32>, %v: tensor<2x2x3x4xf32>,
                          %pad: tensor<2x1x1x3xf32>) -> tensor<2x2x3x4xf32> {
  %lowest = kiln.constant dense<-3.40282347E+38> : tensor<2x2x3x3xf32>
  %quarter = kiln.constant dense<2.500000e-01> : tensor<2x2x3x3xf32>
  %after = kiln.constant dense<[[[[false, true, true], [false, false, true], [false, false, false]]]]> : tensor<1x1x3x3xi1>
  %ab = kiln.broadcast %after : tensor<1x1x3x3xi1> to tensor<2x2x3x3xi1>
  %s = kiln.matmul %q, %k {transpose_rhs} : tensor<2x2x3x4xf32>, tensor<2x2x3x4xf32>
  %scaled = kiln.mul %s, %quarter : tensor<2x2x3x3xf32>
  %m = kiln.select %ab, %lowest, %scaled : tensor<2x2x3x3xi1>, tensor<2x2x3x3xf32>
  %pb = kiln.broadcast %pad : tensor<2x1x1x3xf32> to tensor<2x2x3x3xf32>
  %a = kiln.add %m, %pb : tensor<2x2x3x3xf32>
  %p = kiln.softmax %a {axis = 3 : i64} : tensor<2x2x3x3xf32>
  %o = kiln.matmul %p, %v : tensor<2x2x3x3xf32>, tensor<2x2x3x4xf32>
  return %o : tensor<2x2x3x4xf32>
}

// A mask added after a finite fill on any other condition where a row may
// drop every key stays as it is: where the fill drops a row whole, the sum
// is the fill plus the mask, whose probabilities are uniform over some keys
// only, and whose scores the select kept still get a gradient; which those
// are, no attention knows. Nor is a fill above -2^100 (not the same as -inf
// for every score) one this pass knows.
// CHECK-LABEL: func.func @lowest_fill_not_exact(
// CHECK-NOT: kiln.attention
// Such a chain gets a remark (kilnc prints the first as a note); the fill
// above -2^100 is no attention this pass knows, and gets none.
// REMARK: remark: attention stays expanded, storing its score matrices: it adds a mask after filling dropped scores with a finite value where a row may drop every key, on a condition other than a causal one
// REMARK-NEXT: %o2 = kiln.matmul %p2
// REMARK-NOT: remark:
func.func @lowest_fill_not_exact(%q: tensor<3x4xf32>, %k: tensor<3x4xf32>, %v: tensor<3x4xf32>,
                                 %cond: tensor<3x3xi1>, %pad: tensor<3xf32>)
    -> (tensor<3x4xf32>, tensor<3x4xf32>) {
  %lowest = kiln.constant dense<-3.40282347E+38> : tensor<3x3xf32>
  %s2 = kiln.matmul %q, %k {transpose_rhs} : tensor<3x4xf32>, tensor<3x4xf32>
  %m2 = kiln.select %cond, %s2, %lowest : tensor<3x3xi1>, tensor<3x3xf32>
  %pb = kiln.broadcast %pad : tensor<3xf32> to tensor<3x3xf32>
  %a2 = kiln.add %m2, %pb : tensor<3x3xf32>
  %p2 = kiln.softmax %a2 {axis = 1 : i64} : tensor<3x3xf32>
  %o2 = kiln.matmul %p2, %v : tensor<3x3xf32>, tensor<3x4xf32>
  %causal = kiln.constant dense<[[true, false, false], [true, true, false], [true, true, true]]> : tensor<3x3xi1>
  %near = kiln.constant dense<-1.0e+29> : tensor<3x3xf32>
  %s3 = kiln.matmul %q, %k {transpose_rhs} : tensor<3x4xf32>, tensor<3x4xf32>
  %m3 = kiln.select %causal, %s3, %near : tensor<3x3xi1>, tensor<3x3xf32>
  %p3 = kiln.softmax %m3 {axis = 1 : i64} : tensor<3x3xf32>
  %o3 = kiln.matmul %p3, %v : tensor<3x3xf32>, tensor<3x4xf32>
  return %o2, %o3 : tensor<3x4xf32>, tensor<3x4xf32>
}

// The probabilities are returned too: no fusion.
// CHECK-LABEL: func.func @softmax_used_twice(
// CHECK-NOT: kiln.attention
// CHECK: kiln.softmax
// CHECK: kiln.matmul
// CHECK-NOT: kiln.attention
func.func @softmax_used_twice(%q: tensor<8x4xf32>, %k: tensor<6x4xf32>, %v: tensor<6x5xf32>)
    -> (tensor<8x5xf32>, tensor<8x6xf32>) {
  %s = kiln.matmul %q, %k {transpose_rhs} : tensor<8x4xf32>, tensor<6x4xf32>
  %p = kiln.softmax %s {axis = 1 : i64} : tensor<8x6xf32>
  %o = kiln.matmul %p, %v : tensor<8x6xf32>, tensor<6x5xf32>
  return %o, %p : tensor<8x5xf32>, tensor<8x6xf32>
}

// The scaled scores feed something else as well: no fusion.
// CHECK-LABEL: func.func @scores_used_twice(
// CHECK-NOT: kiln.attention
// CHECK: kiln.softmax
// CHECK-NOT: kiln.attention
func.func @scores_used_twice(%q: tensor<8x4xf32>, %k: tensor<6x4xf32>, %v: tensor<6x5xf32>)
    -> (tensor<8x5xf32>, tensor<8x6xf32>) {
  %s = kiln.matmul %q, %k {transpose_rhs} : tensor<8x4xf32>, tensor<6x4xf32>
  %c = kiln.constant dense<0.5> : tensor<8x6xf32>
  %scaled = kiln.mul %s, %c : tensor<8x6xf32>
  %p = kiln.softmax %scaled {axis = 1 : i64} : tensor<8x6xf32>
  %o = kiln.matmul %p, %v : tensor<8x6xf32>, tensor<6x5xf32>
  return %o, %scaled : tensor<8x5xf32>, tensor<8x6xf32>
}

// A softmax over the queries, a scale that is no constant, or a mask filled
// with a finite value is no attention this pass knows.
// CHECK-LABEL: func.func @not_attention(
// CHECK-NOT: kiln.attention
func.func @not_attention(%q: tensor<8x4xf32>, %k: tensor<8x4xf32>, %v: tensor<8x5xf32>,
                         %scale: tensor<8x8xf32>, %cond: tensor<8x8xi1>)
    -> (tensor<8x5xf32>, tensor<8x5xf32>, tensor<8x5xf32>) {
  %s0 = kiln.matmul %q, %k {transpose_rhs} : tensor<8x4xf32>, tensor<8x4xf32>
  %p0 = kiln.softmax %s0 {axis = 0 : i64} : tensor<8x8xf32>
  %o0 = kiln.matmul %p0, %v : tensor<8x8xf32>, tensor<8x5xf32>
  %s1 = kiln.matmul %q, %k {transpose_rhs} : tensor<8x4xf32>, tensor<8x4xf32>
  %scaled = kiln.mul %s1, %scale : tensor<8x8xf32>
  %p1 = kiln.softmax %scaled {axis = 1 : i64} : tensor<8x8xf32>
  %o1 = kiln.matmul %p1, %v : tensor<8x8xf32>, tensor<8x5xf32>
  %s2 = kiln.matmul %q, %k {transpose_rhs} : tensor<8x4xf32>, tensor<8x4xf32>
  %fill = kiln.constant dense<-1.0e+04> : tensor<8x8xf32>
  %masked = kiln.select %cond, %fill, %s2 : tensor<8x8xi1>, tensor<8x8xf32>
  %p2 = kiln.softmax %masked {axis = 1 : i64} : tensor<8x8xf32>
  %o2 = kiln.matmul %p2, %v : tensor<8x8xf32>, tensor<8x5xf32>
  return %o0, %o1, %o2 : tensor<8x5xf32>, tensor<8x5xf32>, tensor<8x5xf32>
}
