// RUN: kiln-opt %s --kiln-attention-kernel --cse --split-input-file | FileCheck %s
// RUN: kiln-opt %s --kiln-attention-kernel=amp=bf16 --cse --split-input-file | FileCheck %s --check-prefix=BF16
// RUN: not kiln-opt %s --kiln-attention-kernel=amp=f8 --split-input-file 2>&1 | FileCheck %s --check-prefix=BAD

// A point per batch index and query row; the scores are never stored: a
// first pass over the keys finds the maximum and the sum of exponentials,
// a second weights each value row by its probability. The mask is read
// through its broadcast (its batch dimension has size 1: index 0).
// CHECK-LABEL: func.func @masked(
// CHECK-SAME: %[[Q:[a-z0-9]+]]: tensor<2x3x4xf32>, %[[K:[a-z0-9]+]]: tensor<2x5x4xf32>, %[[V:[a-z0-9]+]]: tensor<2x5x2xf32>, %[[M:[a-z0-9]+]]: tensor<1x3x5xf32>
// CHECK: %[[EMPTY:.*]] = tensor.empty() : tensor<2x3x2xf32>
// CHECK: %[[OUT:.*]]:2 = scf.forall (%[[B:.*]], %[[I:.*]]) in (2, 3) shared_outs(%[[ACC:.*]] = %[[EMPTY]], %[[STATS_OUT:.*]] = %{{.*}})
// CHECK: %[[SCALE:.*]] = arith.constant 5.000000e-01 : f32
// CHECK: %[[Q0:.*]] = tensor.extract %[[Q]][%[[B]], %[[I]], %[[C0:.*]]]
// CHECK-COUNT-3: tensor.extract %[[Q]][%[[B]], %[[I]]
// CHECK: %[[QS0:.*]] = arith.mulf %[[Q0]], %[[SCALE]]
// CHECK-NOT: tensor.empty
// CHECK: %[[STATS:.*]]:2 = scf.for %[[J:.*]] = %{{.*}} to %[[END:.*]] step %{{.*}} iter_args(%[[MAX:.*]] = %cst{{.*}}, %[[SUM:.*]] = %cst{{.*}}) -> (f32, f32)
// CHECK: %[[K0:.*]] = tensor.extract %[[K]][%[[B]], %[[J]], %[[C0]]]
// CHECK-COUNT-3: tensor.extract %[[K]][%[[B]], %[[J]]
// CHECK: arith.mulf %[[QS0]], %[[K0]]
// CHECK-COUNT-3: math.fma
// CHECK: %[[MASK:.*]] = tensor.extract %[[M]][%[[C0]], %[[I]], %[[J]]]
// CHECK: %[[S:.*]] = arith.addf %{{.*}}, %[[MASK]]
// CHECK: %[[GROWN:.*]] = arith.maximumf %[[MAX]], %[[S]]
// CHECK: %[[NONE:.*]] = arith.cmpf oeq, %[[GROWN]], %cst
// CHECK: %[[SHIFT:.*]] = arith.select %[[NONE]], %{{.*}}, %[[GROWN]]
// CHECK: %[[OLD:.*]] = arith.subf %[[MAX]], %[[SHIFT]]
// CHECK: %[[RESCALE:.*]] = math.exp %[[OLD]]
// CHECK: %[[NEW:.*]] = arith.subf %[[S]], %[[SHIFT]]
// CHECK: %[[WEIGHT:.*]] = math.exp %[[NEW]]
// CHECK: %[[L:.*]] = math.fma %[[SUM]], %[[RESCALE]], %[[WEIGHT]]
// CHECK: scf.yield %[[GROWN]], %[[L]]
// CHECK: %[[FINAL:.*]] = arith.select %{{.*}}, %{{.*}}, %[[STATS]]#0
// CHECK: %[[ROW:.*]]:2 = scf.for %[[J2:.*]] = %{{.*}} to %[[END]] {{.*}} iter_args(%[[O0:.*]] = %cst{{.*}}, %[[O1:.*]] = %cst{{.*}}) -> (f32, f32)
// CHECK: %[[S2:.*]] = arith.addf
// CHECK: %[[E:.*]] = arith.subf %[[S2]], %[[FINAL]]
// CHECK: %[[X:.*]] = math.exp %[[E]]
// CHECK: %[[P:.*]] = arith.divf %[[X]], %[[STATS]]#1
// CHECK: %[[V0:.*]] = tensor.extract %[[V]][%[[B]], %[[J2]], %[[C0]]]
// CHECK: %[[V1:.*]] = tensor.extract %[[V]][%[[B]], %[[J2]], %c1
// CHECK: %[[N0:.*]] = math.fma %[[P]], %[[V0]], %[[O0]]
// CHECK: %[[N1:.*]] = math.fma %[[P]], %[[V1]], %[[O1]]
// CHECK: scf.yield %[[N0]], %[[N1]]
// CHECK: %[[SLICE:.*]] = tensor.extract_slice %[[ACC]][%[[B]], %[[I]], 0] [1, 1, 2] [1, 1, 1] : tensor<2x3x2xf32> to tensor<2xf32>
// CHECK: %[[W0:.*]] = tensor.insert %[[ROW]]#0 into %[[SLICE]]
// CHECK: %[[W1:.*]] = tensor.insert %[[ROW]]#1 into %[[W0]]
// CHECK: scf.forall.in_parallel
// CHECK-NEXT: tensor.parallel_insert_slice %[[W1]] into %[[ACC]][%[[B]], %[[I]], 0] [1, 1, 2] [1, 1, 1]
// CHECK: return %[[OUT]]#0
// BF16-LABEL: func.func @masked(
// Every query, key and value element read is rounded, and so is each
// probability before it weights its value row.
// BF16-COUNT-4: arith.truncf %{{.*}} : f32 to bf16
// BF16: scf.for
// BF16-COUNT-4: arith.truncf %{{.*}} : f32 to bf16
// BF16: scf.for
// BF16-COUNT-4: arith.truncf %{{.*}} : f32 to bf16
// BF16: %[[P:.*]] = arith.divf
// BF16-NEXT: %[[R:.*]] = arith.truncf %[[P]] : f32 to bf16
// BF16-NEXT: %[[PR:.*]] = arith.extf %[[R]] : bf16 to f32
// BF16-COUNT-2: arith.truncf
// BF16: math.fma %[[PR]]
// BAD: kiln-attention-kernel: amp must be bf16, f16 or empty, not 'f8'
func.func @masked(%q: tensor<2x3x4xf32>, %k: tensor<2x5x4xf32>, %v: tensor<2x5x2xf32>, %m: tensor<1x3x5xf32>) -> tensor<2x3x2xf32> {
  %o = kiln.attention %q, %k, %v mask %m : tensor<1x3x5xf32> {scale = 0.5 : f64} : tensor<2x3x4xf32>, tensor<2x5x4xf32>, tensor<2x5x2xf32>
  return %o : tensor<2x3x2xf32>
}

// -----

// A constant mask that drops exactly the keys after each query is causal:
// it is not read, and each row's loops stop at its diagonal.
// CHECK-LABEL: func.func @causal(
// CHECK: scf.forall (%{{.*}}, %[[I:.*]]) in (2, 3)
// CHECK: %[[END:.*]] = arith.addi %[[I]], %c1
// CHECK: scf.for %{{.*}} = %{{.*}} to %[[END]]
// CHECK-NOT: arith.addf
// CHECK: scf.for %{{.*}} = %{{.*}} to %[[END]]
// CHECK-NOT: arith.addf
// CHECK: scf.forall.in_parallel
func.func @causal(%q: tensor<2x3x4xf32>, %k: tensor<2x3x4xf32>, %v: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %m = arith.constant dense<[[0.0, 0xFF800000, 0xFF800000], [0.0, 0.0, 0xFF800000], [0.0, 0.0, 0.0]]> : tensor<3x3xf32>
  %o = kiln.attention %q, %k, %v mask %m : tensor<3x3xf32> : tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>
  return %o : tensor<2x3x4xf32>
}

// -----

// So is a select of two splats on a constant condition that gives that mask
// (kiln-fuse-attention's from a causal where(), too large to fold), with
// -inf on either side and a leading dimension of 1.
// CHECK-LABEL: func.func @causal_select(
// CHECK-SAME: %[[Q:[a-z0-9]+]]: tensor<2x3x4xf32>, %[[K:[a-z0-9]+]]: tensor<2x3x4xf32>, %[[V:[a-z0-9]+]]: tensor<2x3x4xf32>
// CHECK-NOT: linalg.generic
// CHECK: scf.forall (%{{.*}}, %[[I:.*]]) in (2, 3)
// CHECK: %[[END:.*]] = arith.addi %[[I]], %c1
// CHECK: scf.for %{{.*}} = %{{.*}} to %[[END]]
// CHECK-NOT: linalg.generic
// CHECK: scf.forall (%{{.*}}, %[[I2:.*]]) in (2, 3)
// CHECK: %[[END2:.*]] = arith.addi %[[I2]], %c1
// CHECK: scf.for %{{.*}} = %{{.*}} to %[[END2]]
// CHECK-NOT: linalg.generic
// CHECK: return
func.func @causal_select(%q: tensor<2x3x4xf32>, %k: tensor<2x3x4xf32>, %v: tensor<2x3x4xf32>)
    -> (tensor<2x3x4xf32>, tensor<2x3x4xf32>) {
  %keep = arith.constant dense<[[[true, false, false], [true, true, false], [true, true, true]]]> : tensor<1x3x3xi1>
  %zero = arith.constant dense<0.0> : tensor<1x3x3xf32>
  %ninf = arith.constant dense<0xFF800000> : tensor<1x3x3xf32>
  %m = kiln.select %keep, %zero, %ninf : tensor<1x3x3xi1>, tensor<1x3x3xf32>
  %o = kiln.attention %q, %k, %v mask %m : tensor<1x3x3xf32> : tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>
  %drop = arith.constant dense<[[[false, true, true], [false, false, true], [false, false, false]]]> : tensor<1x3x3xi1>
  %m2 = kiln.select %drop, %ninf, %zero : tensor<1x3x3xi1>, tensor<1x3x3xf32>
  %o2 = kiln.attention %q, %k, %k mask %m2 : tensor<1x3x3xf32> : tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>
  return %o, %o2 : tensor<2x3x4xf32>, tensor<2x3x4xf32>
}

// -----

// Any other mask is read. Its bounds are computed first: per row of the
// mask, one past its last key that is not -inf (here an argument, as a
// causal mask held in a buffer parameter is); each query row's loops end
// there (every key when the row has none: its probabilities are 0 / 0, as
// the softmax's). The scores skipped have probability 0.
// CHECK-LABEL: func.func @bounded(
// CHECK-SAME: %[[M:[a-z0-9]+]]: tensor<1x3x3xf32>
// CHECK: %[[ZERO:.*]] = arith.constant 0 : i32
// CHECK: %[[INIT:.*]] = linalg.fill ins(%[[ZERO]] : i32) outs(%{{.*}} : tensor<1x3xi32>)
// CHECK: %[[ENDS:.*]] = linalg.generic {{{.*}}iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[M]] : tensor<1x3x3xf32>) outs(%[[INIT]] : tensor<1x3xi32>)
// CHECK-NEXT: ^bb0(%[[X:.*]]: f32, %[[ACC:.*]]: i32):
// CHECK-NEXT: %[[J:.*]] = linalg.index 2
// CHECK-NEXT: %[[J32:.*]] = arith.index_cast %[[J]] : index to i32
// CHECK-NEXT: %[[ONE:.*]] = arith.constant 1 : i32
// CHECK-NEXT: %[[AFTER:.*]] = arith.addi %[[J32]], %[[ONE]]
// CHECK-NEXT: %[[NEGINF:.*]] = arith.constant 0xFF800000 : f32
// CHECK-NEXT: %[[KEPT:.*]] = arith.cmpf une, %[[X]], %[[NEGINF]]
// CHECK-NEXT: %[[HERE:.*]] = arith.select %[[KEPT]], %[[AFTER]], %[[ZERO]]
// CHECK-NEXT: %[[LAST:.*]] = arith.maxsi %[[ACC]], %[[HERE]]
// CHECK-NEXT: linalg.yield %[[LAST]]
// CHECK: scf.forall (%{{.*}}, %[[I:.*]]) in (2, 3)
// CHECK: %[[E32:.*]] = tensor.extract %[[ENDS]][%c0, %[[I]]]
// CHECK: %[[E:.*]] = arith.index_cast %[[E32]] : i32 to index
// CHECK: %[[NONE:.*]] = arith.cmpi eq, %[[E]], %c0
// CHECK: %[[END:.*]] = arith.select %[[NONE]], %c3, %[[E]]
// CHECK: scf.for %{{.*}} = %c0 to %[[END]]
// CHECK: tensor.extract %[[M]]
// CHECK: scf.for %{{.*}} = %c0 to %[[END]]
// CHECK: tensor.extract %[[M]]
func.func @bounded(%q: tensor<2x3x4xf32>, %k: tensor<2x3x4xf32>, %v: tensor<2x3x4xf32>, %m: tensor<1x3x3xf32>) -> tensor<2x3x4xf32> {
  %o = kiln.attention %q, %k, %v mask %m : tensor<1x3x3xf32> : tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>
  return %o : tensor<2x3x4xf32>
}

// -----

// The gradient's key rows start at their column's first query that is not
// -inf (the query count when there is none: that key has no weight). A
// padding mask, broadcast along the queries ([B, 1, Sk] here), bounds both
// by each batch's keys.
// CHECK-LABEL: func.func @bounded_grad(
// CHECK-SAME: %[[M:[a-z0-9]+]]: tensor<2x1x5xf32>
// CHECK: %[[ENDS:.*]] = linalg.generic {{.*}}ins(%[[M]] : tensor<2x1x5xf32>) outs(%{{.*}} : tensor<2x1xi32>)
// CHECK: %[[Q:.*]] = arith.constant 3 : i32
// CHECK: %[[INIT:.*]] = linalg.fill ins(%[[Q]] : i32) outs(%{{.*}} : tensor<2x5xi32>)
// CHECK: %[[STARTS:.*]] = linalg.generic {{.*}}ins(%[[M]] : tensor<2x1x5xf32>) outs(%[[INIT]] : tensor<2x5xi32>)
// CHECK: linalg.index 1
// CHECK-NOT: arith.addi
// CHECK: arith.minsi
// CHECK: scf.forall (%[[B:.*]], %[[I:.*]]) in (2, 3)
// CHECK: tensor.extract %[[ENDS]][%[[B]], %c0]
// CHECK: scf.forall (%[[B2:.*]], %[[J:.*]]) in (2, 5)
// CHECK: %[[S32:.*]] = tensor.extract %[[STARTS]][%[[B2]], %[[J]]]
// CHECK: %[[FIRST:.*]] = arith.index_cast %[[S32]] : i32 to index
// CHECK: scf.for %{{.*}} = %[[FIRST]] to %c3
// Not masked_fill: every dS counts.
// CHECK-NOT: arith.cmpf ole
func.func @bounded_grad(%q: tensor<2x3x4xf32>, %k: tensor<2x5x4xf32>, %v: tensor<2x5x4xf32>, %o: tensor<2x3x4xf32>, %g: tensor<2x3x4xf32>, %m: tensor<2x1x5xf32>) -> (tensor<2x3x4xf32>, tensor<2x5x4xf32>, tensor<2x5x4xf32>) {
  %dq, %dk, %dv = kiln.attention_grad %q, %k, %v, %o, %g mask %m : tensor<2x1x5xf32> : tensor<2x3x4xf32>, tensor<2x5x4xf32>, tensor<2x5x4xf32>, tensor<2x3x4xf32>
  return %dq, %dk, %dv : tensor<2x3x4xf32>, tensor<2x5x4xf32>, tensor<2x5x4xf32>
}

// -----

// masked_fill: in both loops, dS is 0 where the mask (read again for the
// score) is at most -2^100.
// CHECK-LABEL: func.func @masked_fill_grad(
// CHECK: scf.forall ({{.*}}) in (2, 3)
// CHECK: %[[AT:.*]] = arith.constant -1.2676506E+30 : f32
// CHECK: %[[FILLED:.*]] = arith.cmpf ole, %{{.*}}, %[[AT]] : f32
// CHECK: arith.select %[[FILLED]], %{{.*}}, %{{.*}} : f32
// CHECK: scf.forall ({{.*}}) in (2, 5)
// CHECK: %[[AT2:.*]] = arith.constant -1.2676506E+30 : f32
// CHECK: %[[FILLED2:.*]] = arith.cmpf ole, %{{.*}}, %[[AT2]] : f32
// CHECK: arith.select %[[FILLED2]], %{{.*}}, %{{.*}} : f32
func.func @masked_fill_grad(%q: tensor<2x3x4xf32>, %k: tensor<2x5x4xf32>, %v: tensor<2x5x4xf32>, %o: tensor<2x3x4xf32>, %g: tensor<2x3x4xf32>, %m: tensor<2x1x5xf32>) -> (tensor<2x3x4xf32>, tensor<2x5x4xf32>, tensor<2x5x4xf32>) {
  %dq, %dk, %dv = kiln.attention_grad %q, %k, %v, %o, %g mask %m : tensor<2x1x5xf32> {masked_fill} : tensor<2x3x4xf32>, tensor<2x5x4xf32>, tensor<2x5x4xf32>, tensor<2x3x4xf32>
  return %dq, %dk, %dv : tensor<2x3x4xf32>, tensor<2x5x4xf32>, tensor<2x5x4xf32>
}

// -----

// causal_fill: in both loops, dS is 0 where the key row comes after the
// query row.
// CHECK-LABEL: func.func @causal_fill_grad(
// CHECK: scf.forall (%{{.*}}, %[[I:arg[0-9]+]]) in (2, 3)
// CHECK: scf.for %[[J:arg[0-9]+]] =
// CHECK: %[[AFTER:.*]] = arith.cmpi ugt, %[[J]], %[[I]] : index
// CHECK: arith.select %[[AFTER]], %{{.*}}, %{{.*}} : f32
// CHECK: scf.forall (%{{.*}}, %[[K:arg[0-9]+]]) in (2, 3)
// CHECK: scf.for %[[R:arg[0-9]+]] =
// CHECK: %[[AFTER2:.*]] = arith.cmpi ugt, %[[K]], %[[R]] : index
// CHECK: arith.select %[[AFTER2]], %{{.*}}, %{{.*}} : f32
// CHECK-NOT: arith.cmpf ole
func.func @causal_fill_grad(%q: tensor<2x3x4xf32>, %o: tensor<2x3x4xf32>, %m: tensor<2x3x3xf32>) -> (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>) {
  %dq, %dk, %dv = kiln.attention_grad %q, %q, %q, %o, %o mask %m : tensor<2x3x3xf32> {causal_fill} : tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>
  return %dq, %dk, %dv : tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>
}

// -----

// The gradient: a point per query row computes the query's gradient (the
// statistics pass, then dS k over the keys) and keeps its shift, sum and
// rowsum(dO O); a point per key row then computes the key's and value's
// gradients over the query rows, each probability recomputed from the
// score and the row's statistics.
// CHECK-LABEL: func.func @grad(
// CHECK-SAME: %[[Q:[a-z0-9]+]]: tensor<2x3x4xf32>, %[[K:[a-z0-9]+]]: tensor<2x5x4xf32>, %[[V:[a-z0-9]+]]: tensor<2x5x2xf32>, %[[O:[a-z0-9]+]]: tensor<2x3x2xf32>, %[[G:[a-z0-9]+]]: tensor<2x3x2xf32>, %[[M:[a-z0-9]+]]: tensor<1x3x5xf32>
// CHECK: %[[QROWS:.*]]:2 = scf.forall (%[[B:.*]], %[[I:.*]]) in (2, 3) shared_outs(%[[DQ:.*]] = %{{.*}}, %[[ST:.*]] = %{{.*}}) -> (tensor<2x3x4xf32>, tensor<2x3x3xf32>)
// CHECK: %[[SCALE:.*]] = arith.constant 5.000000e-01 : f32
// CHECK: %[[G0:.*]] = tensor.extract %[[G]][%[[B]], %[[I]], %[[C0:[a-z0-9_]+]]]
// CHECK: %[[G1:.*]] = tensor.extract %[[G]][%[[B]], %[[I]], %[[C1:[a-z0-9_]+]]]
// CHECK: %[[O0:.*]] = tensor.extract %[[O]][%[[B]], %[[I]], %[[C0]]]
// CHECK: %[[O1:.*]] = tensor.extract %[[O]][%[[B]], %[[I]], %[[C1]]]
// CHECK: %[[GO:.*]] = arith.mulf %[[G0]], %[[O0]]
// CHECK: %[[CENTRE:.*]] = math.fma %[[G1]], %[[O1]], %[[GO]]
// CHECK: %[[STATS:.*]]:2 = scf.for
// CHECK: %[[SHIFT:.*]] = arith.select %{{.*}}, %{{.*}}, %[[STATS]]#0
// CHECK: %[[QG:.*]]:4 = scf.for %[[J:.*]] = %{{.*}} to %{{.*}} iter_args(%[[A0:[a-z0-9_]+]] = {{.*}}) -> (f32, f32, f32, f32)
// CHECK: %[[K0:.*]] = tensor.extract %[[K]][%[[B]], %[[J]], %[[C0]]]
// CHECK: %[[P:.*]] = arith.divf %{{.*}}, %[[STATS]]#1
// CHECK: %[[V0:.*]] = tensor.extract %[[V]][%[[B]], %[[J]], %[[C0]]]
// CHECK: %[[V1:.*]] = tensor.extract %[[V]][%[[B]], %[[J]], %[[C1]]]
// CHECK: %[[DP0:.*]] = arith.mulf %[[G0]], %[[V0]]
// CHECK: %[[DP:.*]] = math.fma %[[G1]], %[[V1]], %[[DP0]]
// CHECK: %[[CENTRED:.*]] = arith.subf %[[DP]], %[[CENTRE]]
// CHECK: %[[DS:.*]] = arith.mulf %[[P]], %[[CENTRED]]
// CHECK: %[[DSS:.*]] = arith.mulf %[[DS]], %[[SCALE]]
// CHECK: math.fma %[[DSS]], %[[K0]], %[[A0]]
// CHECK: tensor.insert %[[SHIFT]] into
// CHECK: tensor.insert %[[STATS]]#1 into
// CHECK: tensor.insert %[[CENTRE]] into
// CHECK: scf.forall.in_parallel
// CHECK-NEXT: tensor.parallel_insert_slice %{{.*}} into %[[DQ]][%[[B]], %[[I]], 0] [1, 1, 4]
// CHECK-NEXT: tensor.parallel_insert_slice %{{.*}} into %[[ST]][%[[B]], %[[I]], 0] [1, 1, 3]
// CHECK: %[[KROWS:.*]]:2 = scf.forall (%[[B2:.*]], %[[J2:.*]]) in (2, 5) shared_outs(%[[DK:.*]] = %{{.*}}, %[[DV:.*]] = %{{.*}}) -> (tensor<2x5x4xf32>, tensor<2x5x2xf32>)
// CHECK: %[[KR0:.*]] = tensor.extract %[[K]][%[[B2]], %[[J2]], %[[C0B:[a-z0-9_]+]]]
// CHECK: %[[VR0:.*]] = tensor.extract %[[V]][%[[B2]], %[[J2]], %[[C0B]]]
// CHECK: %[[VR1:.*]] = tensor.extract %[[V]][%[[B2]], %[[J2]], %[[C1B:[a-z0-9_]+]]]
// CHECK: scf.for %[[I2:.*]] = %{{.*}} to %c3 {{.*}} -> (f32, f32, f32, f32, f32, f32)
// CHECK: %[[QI0:.*]] = tensor.extract %[[Q]][%[[B2]], %[[I2]], %[[C0B]]]
// CHECK: %[[SH:.*]] = tensor.extract %[[QROWS]]#1[%[[B2]], %[[I2]], %[[C0B]]]
// CHECK: %[[SU:.*]] = tensor.extract %[[QROWS]]#1[%[[B2]], %[[I2]], %[[C1B]]]
// CHECK: %[[CE:.*]] = tensor.extract %[[QROWS]]#1[%[[B2]], %[[I2]], %c2
// CHECK: tensor.extract %[[M]][%[[C0B]], %[[I2]], %[[J2]]]
// CHECK: %[[X:.*]] = arith.subf %{{.*}}, %[[SH]]
// CHECK: %[[E:.*]] = math.exp %[[X]]
// CHECK: %[[P2:.*]] = arith.divf %[[E]], %[[SU]]
// CHECK: %[[GI0:.*]] = tensor.extract %[[G]][%[[B2]], %[[I2]], %[[C0B]]]
// CHECK: %[[GI1:.*]] = tensor.extract %[[G]][%[[B2]], %[[I2]], %[[C1B]]]
// CHECK: arith.mulf %[[GI0]], %[[VR0]]
// CHECK: %[[DP2:.*]] = math.fma %[[GI1]], %[[VR1]]
// CHECK: arith.subf %[[DP2]], %[[CE]]
// CHECK: %[[DS2:.*]] = arith.mulf %{{.*}}, %cst
// CHECK: math.fma %[[DS2]], %[[QI0]]
// CHECK-COUNT-3: math.fma %[[DS2]]
// CHECK: math.fma %[[P2]], %[[GI0]]
// CHECK: math.fma %[[P2]], %[[GI1]]
// CHECK: scf.forall.in_parallel
// CHECK-NEXT: tensor.parallel_insert_slice %{{.*}} into %[[DK]][%[[B2]], %[[J2]], 0] [1, 1, 4]
// CHECK-NEXT: tensor.parallel_insert_slice %{{.*}} into %[[DV]][%[[B2]], %[[J2]], 0] [1, 1, 2]
// CHECK: return %[[QROWS]]#0, %[[KROWS]]#0, %[[KROWS]]#1
// Under mixed precision the products' operands are rounded: in the key
// rows' loop, dS before it weights the query row and P before it weights
// the output gradient's.
// BF16-LABEL: func.func @grad(
// BF16: scf.forall
// BF16: scf.forall
// BF16: %[[P:.*]] = arith.divf
// BF16: %[[D:.*]] = arith.mulf %[[P]], %{{.*}}
// BF16-NEXT: %[[DS:.*]] = arith.mulf %[[D]], %cst
// BF16-NEXT: %[[DSN:.*]] = arith.truncf %[[DS]] : f32 to bf16
// BF16-NEXT: %[[DSR:.*]] = arith.extf %[[DSN]]
// BF16-NEXT: %[[PN:.*]] = arith.truncf %[[P]] : f32 to bf16
// BF16-NEXT: %[[PR:.*]] = arith.extf %[[PN]]
// BF16: math.fma %[[DSR]]
// BF16: math.fma %[[PR]]
func.func @grad(%q: tensor<2x3x4xf32>, %k: tensor<2x5x4xf32>, %v: tensor<2x5x2xf32>, %o: tensor<2x3x2xf32>, %g: tensor<2x3x2xf32>, %m: tensor<1x3x5xf32>) -> (tensor<2x3x4xf32>, tensor<2x5x4xf32>, tensor<2x5x2xf32>) {
  %dq, %dk, %dv = kiln.attention_grad %q, %k, %v, %o, %g mask %m : tensor<1x3x5xf32> {scale = 0.5 : f64} : tensor<2x3x4xf32>, tensor<2x5x4xf32>, tensor<2x5x2xf32>, tensor<2x3x2xf32>
  return %dq, %dk, %dv : tensor<2x3x4xf32>, tensor<2x5x4xf32>, tensor<2x5x2xf32>
}

// -----

// The forward loops also keep each row's shift and sum; the gradient of
// their output reads them instead of running the statistics pass again.
// CHECK-LABEL: func.func @forward_and_grad(
// CHECK: %[[FWD:.*]]:2 = scf.forall {{.*}} -> (tensor<2x3x4xf32>, tensor<2x3x2xf32>)
// CHECK-COUNT-2: scf.for
// CHECK: scf.forall.in_parallel
// CHECK: %[[QROWS:.*]]:2 = scf.forall {{.*}} -> (tensor<2x3x4xf32>, tensor<2x3x3xf32>)
// CHECK: %[[SHIFT:.*]] = tensor.extract %[[FWD]]#1[%{{.*}}, %{{.*}}, %c0]
// CHECK: %[[SUM:.*]] = tensor.extract %[[FWD]]#1[%{{.*}}, %{{.*}}, %c1]
// CHECK-NOT: scf.for
// CHECK: scf.for
// CHECK: arith.subf %{{.*}}, %[[SHIFT]]
// CHECK: arith.divf %{{.*}}, %[[SUM]]
// CHECK-NOT: scf.for
// CHECK: scf.forall.in_parallel
// CHECK: return %[[FWD]]#0, %[[QROWS]]#0
func.func @forward_and_grad(%q: tensor<2x3x4xf32>, %k: tensor<2x3x4xf32>, %v: tensor<2x3x4xf32>, %g: tensor<2x3x4xf32>) -> (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>) {
  %o = kiln.attention %q, %k, %v : tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>
  %dq, %dk, %dv = kiln.attention_grad %q, %k, %v, %o, %g : tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>
  return %o, %dq, %dk, %dv : tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>
}

// -----

// Causal: the query rows' loops stop at the diagonal, the key rows' start
// there.
// CHECK-LABEL: func.func @causal_grad(
// CHECK: scf.forall (%{{.*}}, %[[I:.*]]) in (2, 3)
// CHECK: %[[END:.*]] = arith.addi %[[I]], %c1
// CHECK: scf.for %{{.*}} = %{{.*}} to %[[END]]
// CHECK: scf.for %{{.*}} = %{{.*}} to %[[END]]
// CHECK: scf.forall (%{{.*}}, %[[J:.*]]) in (2, 3)
// CHECK: scf.for %{{.*}} = %[[J]] to %c3
// CHECK-NOT: arith.addf
// CHECK: return
func.func @causal_grad(%q: tensor<2x3x4xf32>, %k: tensor<2x3x4xf32>, %v: tensor<2x3x4xf32>, %o: tensor<2x3x4xf32>, %g: tensor<2x3x4xf32>) -> (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>) {
  %m = arith.constant dense<[[0.0, 0xFF800000, 0xFF800000], [0.0, 0.0, 0xFF800000], [0.0, 0.0, 0.0]]> : tensor<3x3xf32>
  %dq, %dk, %dv = kiln.attention_grad %q, %k, %v, %o, %g mask %m : tensor<3x3xf32> : tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>
  return %dq, %dk, %dv : tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>
}

// -----

// A constant mask is causal only if every batch of it is: here the second
// keeps a score above the diagonal, so the mask is read, with its bounds.
// CHECK-LABEL: func.func @causal_in_one_batch(
// CHECK: linalg.generic
// CHECK: scf.forall
// CHECK: tensor.extract %cst
func.func @causal_in_one_batch(%q: tensor<2x3x4xf32>, %k: tensor<2x3x4xf32>, %v: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %m = arith.constant dense<[[[0.0, 0xFF800000, 0xFF800000], [0.0, 0.0, 0xFF800000], [0.0, 0.0, 0.0]],
                             [[0.0, 0xFF800000, 0xFF800000], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]]> : tensor<2x3x3xf32>
  %o = kiln.attention %q, %k, %v mask %m : tensor<2x3x3xf32> : tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>
  return %o : tensor<2x3x4xf32>
}

// -----

// Head sizes over max-head-size (or empty value rows) and other element
// types stay for kiln-decompose.
// CHECK-LABEL: func.func @not_taken(
// CHECK-NOT: scf.forall
// CHECK: kiln.attention
// CHECK: kiln.attention
// CHECK: kiln.attention
func.func @not_taken(%q: tensor<1x2x200xf32>, %h: tensor<1x2x4xf16>, %s: tensor<1x2x4xf32>, %e: tensor<1x2x0xf32>) -> (tensor<1x2x200xf32>, tensor<1x2x4xf16>, tensor<1x2x0xf32>) {
  %0 = kiln.attention %q, %q, %q : tensor<1x2x200xf32>, tensor<1x2x200xf32>, tensor<1x2x200xf32>
  %1 = kiln.attention %h, %h, %h : tensor<1x2x4xf16>, tensor<1x2x4xf16>, tensor<1x2x4xf16>
  %2 = kiln.attention %s, %s, %e : tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x0xf32>
  return %0, %1, %2 : tensor<1x2x200xf32>, tensor<1x2x4xf16>, tensor<1x2x0xf32>
}

// -----

// Queries, keys and values that only rearrange a projection's output (its
// three parts split off, their heads split from the last dimension and
// moved before the rows) are read where the projection stored them: element
// [b, h, i, d] of the keys is [b, i, 4 + h * 2 + d] of the projection. The
// rearranged copies are then unused.
// CHECK-LABEL: func.func @projected(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<2x3x12xf32>
// CHECK-NOT: kiln.transpose
// CHECK: scf.forall (%[[B:.*]], %[[H:.*]], %[[I:.*]]) in (2, 2, 3)
// CHECK: %[[HQ:.*]] = arith.muli %[[H]], %c2
// CHECK: %[[Q0:.*]] = arith.addi %[[HQ]], %c0
// CHECK: tensor.extract %[[X]][%[[B]], %[[I]], %[[Q0]]]
// CHECK: scf.for %[[J:[a-z0-9]+]] =
// CHECK: %[[K0:.*]] = arith.addi %[[Q0]], %c4
// CHECK: tensor.extract %[[X]][%[[B]], %[[J]], %[[K0]]]
// CHECK: scf.for %[[J2:[a-z0-9]+]] =
// CHECK: %[[V0:.*]] = arith.addi %[[Q0]], %c8
// CHECK: tensor.extract %[[X]][%[[B]], %[[J2]], %[[V0]]]
// CHECK-NOT: tensor.extract %{{.*}} : tensor<2x2x3x2xf32>
// CHECK: scf.forall.in_parallel
func.func @projected(%x: tensor<2x3x12xf32>) -> tensor<2x2x3x2xf32> {
  %q, %k, %v = kiln.split %x {axis = 2 : i64, sizes = array<i64: 4, 4, 4>} : tensor<2x3x12xf32>
  %qh = kiln.reshape %q : tensor<2x3x4xf32> to tensor<2x3x2x2xf32>
  %kh = kiln.reshape %k : tensor<2x3x4xf32> to tensor<2x3x2x2xf32>
  %vh = kiln.reshape %v : tensor<2x3x4xf32> to tensor<2x3x2x2xf32>
  %qt = kiln.transpose %qh {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x3x2x2xf32>
  %kt = kiln.transpose %kh {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x3x2x2xf32>
  %vt = kiln.transpose %vh {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x3x2x2xf32>
  %o = kiln.attention %qt, %kt, %vt : tensor<2x2x3x2xf32>, tensor<2x2x3x2xf32>, tensor<2x2x3x2xf32>
  return %o : tensor<2x2x3x2xf32>
}
