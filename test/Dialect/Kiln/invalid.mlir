// RUN: kiln-opt %s -split-input-file -verify-diagnostics

// Every user-facing error of the kiln verifiers and type inference, and the
// type constraints of the operands.

//===----------------------------------------------------------------------===//
// Type constraints.
//===----------------------------------------------------------------------===//

func.func @float_op_on_integers(%x: tensor<4xi32>) -> tensor<4xi32> {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 32-bit float or 16-bit float or bfloat16 type or 64-bit float values, but got 'tensor<4xi32>'}}
  %y = kiln.exp %x : tensor<4xi32>
  return %y : tensor<4xi32>
}

// -----

func.func @dynamic_shape(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {
  // expected-error @+1 {{operand #0 must be statically shaped tensor}}
  %y = kiln.relu %x : tensor<?x4xf32>
  return %y : tensor<?x4xf32>
}

// -----

func.func @dynamic_shape_inferred(%x: tensor<?x3xf32>) {
  // expected-error @+1 {{expected a statically shaped tensor operand}}
  %y = kiln.transpose %x {permutation = array<i64: 1, 0>} : tensor<?x3xf32>
  return
}

// -----

func.func @unranked_inferred(%x: tensor<*xf32>) {
  // expected-error @+1 {{expected a statically shaped tensor operand}}
  %y = kiln.is_nan %x : tensor<*xf32>
  return
}

// -----

func.func @dynamic_conv(%x: tensor<1x3x?x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+1 {{expected statically shaped tensor operands}}
  %y = kiln.conv %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : tensor<1x3x?x8xf32>, tensor<4x3x3x3xf32>
  return
}

// -----

func.func @unsupported_element_type(%x: tensor<4xi4>) -> tensor<4xi4> {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 32-bit float or 16-bit float or bfloat16 type or 64-bit float or 64-bit signless integer or 32-bit signless integer or 16-bit signless integer or 8-bit signless integer or 64-bit unsigned integer or 32-bit unsigned integer or 16-bit unsigned integer or 8-bit unsigned integer values, but got 'tensor<4xi4>'}}
  %y = kiln.neg %x : tensor<4xi4>
  return %y : tensor<4xi4>
}

// -----

func.func @numeric_op_on_booleans(%x: tensor<4xi1>) -> tensor<4xi1> {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 32-bit float or 16-bit float or bfloat16 type or 64-bit float or 64-bit signless integer or 32-bit signless integer or 16-bit signless integer or 8-bit signless integer or 64-bit unsigned integer or 32-bit unsigned integer or 16-bit unsigned integer or 8-bit unsigned integer values, but got 'tensor<4xi1>'}}
  %y = kiln.add %x, %x : tensor<4xi1>
  return %y : tensor<4xi1>
}

// -----

func.func @boolean_op_on_floats(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 64-bit signless integer or 32-bit signless integer or 16-bit signless integer or 8-bit signless integer or 64-bit unsigned integer or 32-bit unsigned integer or 16-bit unsigned integer or 8-bit unsigned integer or 1-bit signless integer values, but got 'tensor<4xf32>'}}
  %y = kiln.and %x, %x : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @binary_operand_types_differ(%x: tensor<4xf32>, %y: tensor<4xf16>) -> tensor<4xf32> {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %z = "kiln.add"(%x, %y) : (tensor<4xf32>, tensor<4xf16>) -> tensor<4xf32>
  return %z : tensor<4xf32>
}

// -----

func.func @float_indices(%x: tensor<4x3xf32>, %i: tensor<2xf32>) {
  // expected-error @+1 {{operand #1 must be statically shaped tensor of 64-bit signless integer or 32-bit signless integer values, but got 'tensor<2xf32>'}}
  %y = kiln.gather %x, %i {axis = 0 : i64} : tensor<4x3xf32>, tensor<2xf32>
  return
}

// -----

func.func @seed_not_scalar_i64(%x: tensor<4xf32>, %seed: tensor<1xi64>) {
  // expected-error @+1 {{operand #1 must be tensor<i64> random seed, but got 'tensor<1xi64>'}}
  %y:2 = "kiln.dropout"(%x, %seed) <{ratio = 0.5 : f64}> : (tensor<4xf32>, tensor<1xi64>) -> (tensor<4xf32>, tensor<4xi1>)
  return
}

// -----

func.func @inferred_type_mismatch(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  // expected-error @+2 {{'kiln.transpose' op inferred type(s) 'tensor<3x2xf32>' are incompatible with return type(s) of operation 'tensor<2x3xf32>'}}
  // expected-error @+1 {{'kiln.transpose' op failed to infer returned types}}
  %y = "kiln.transpose"(%x) <{permutation = array<i64: 1, 0>}> : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}

// -----

func.func @missing_attribute(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'kiln.transpose' op requires attribute 'permutation'}}
  %y = kiln.transpose %x : tensor<2x3xf32>
  return
}

// -----

func.func @wrong_attribute_kind(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{attribute 'permutation' failed to satisfy constraint: i64 dense array attribute}}
  %y = kiln.transpose %x {permutation = [1, 0]} : tensor<2x3xf32>
  return
}

// -----

func.func @compare_operand_types_differ(%x: tensor<4xf32>, %y: tensor<4xi32>) {
  // expected-error @+1 {{all of {lhs, rhs} have same type}}
  %m = "kiln.compare"(%x, %y) <{predicate = #kiln.compare<lt>}> : (tensor<4xf32>, tensor<4xi32>) -> tensor<4xi1>
  return
}

// -----

func.func @select_branch_types_differ(%m: tensor<4xi1>, %x: tensor<4xf32>, %y: tensor<4xf16>) {
  // expected-error @+1 {{all of {on_true, on_false, result} have same type}}
  %z = "kiln.select"(%m, %x, %y) : (tensor<4xi1>, tensor<4xf32>, tensor<4xf16>) -> tensor<4xf32>
  return
}

// -----

func.func @not_on_floats(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 64-bit signless integer}}
  %y = kiln.not %x : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @iota_of_booleans() -> tensor<4xi1> {
  // expected-error @+1 {{result #0 must be statically shaped tensor of}}
  %y = kiln.iota {dimension = 0 : i64} : tensor<4xi1>
  return %y : tensor<4xi1>
}

// -----

func.func @conv_integer_input(%x: tensor<1x1x4x4xi32>, %w: tensor<1x1x3x3xi32>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 32-bit float or 16-bit float or bfloat16 type or 64-bit float values}}
  %y = kiln.conv %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : tensor<1x1x4x4xi32>, tensor<1x1x3x3xi32>
  return
}

// -----

func.func @reduce_mean_integers(%x: tensor<4x3xi32>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 32-bit float or 16-bit float or bfloat16 type or 64-bit float values}}
  %y = kiln.reduce_mean %x {dimensions = array<i64: 1>} : tensor<4x3xi32>
  return
}

// -----

func.func @unknown_compare_predicate(%x: tensor<4xf32>) {
  // expected-error @+2 {{expected ::kiln::ComparePredicate to be one of: eq, ne, lt, le, gt, ge}}
  // expected-error @+1 {{failed to parse Kiln_ComparePredicateAttr parameter 'value'}}
  %m = kiln.compare <lte>, %x, %x : tensor<4xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Parameters.
//===----------------------------------------------------------------------===//

// expected-error @+1 {{'kiln.param' op initial value type 'tensor<4xf32>' does not match parameter type 'tensor<4x2xf32>'}}
kiln.param @w : tensor<4x2xf32> = dense<0.5> : tensor<4xf32>

// -----

// expected-error @+1 {{'kiln.param' op attribute 'type' failed to satisfy constraint}}
kiln.param @w : tensor<?xf32>

// -----

func.func @constant_vector() {
  // expected-error @+1 {{'kiln.constant' op result #0 must be statically shaped tensor}}
  %c = kiln.constant dense<1> : vector<2xi64>
  return
}

// -----

func.func @param_outside_module() {
  // expected-error @+1 {{'kiln.param' op expects parent op 'builtin.module'}}
  kiln.param @w : tensor<2xf32>
  return
}

// -----

func.func @get_param_of_no_param() -> tensor<2xf32> {
  // expected-error @+1 {{'kiln.get_param' op 'nothing' is not a kiln.param}}
  %w = kiln.get_param @nothing : tensor<2xf32>
  return %w : tensor<2xf32>
}

// -----

func.func @not_a_param() {
  return
}

func.func @get_param_of_a_function() -> tensor<2xf32> {
  // expected-error @+1 {{'kiln.get_param' op 'not_a_param' is not a kiln.param}}
  %w = kiln.get_param @not_a_param : tensor<2xf32>
  return %w : tensor<2xf32>
}

// -----

kiln.param @w : tensor<4x2xf32>

func.func @get_param_type_mismatch() -> tensor<2x4xf32> {
  // expected-error @+1 {{'kiln.get_param' op result type 'tensor<2x4xf32>' does not match parameter type 'tensor<4x2xf32>'}}
  %w = kiln.get_param @w : tensor<2x4xf32>
  return %w : tensor<2x4xf32>
}

// -----

//===----------------------------------------------------------------------===//
// Elementwise.
//===----------------------------------------------------------------------===//

// The Elementwise trait rejects operands of another shape before the op's own
// verifier runs (here and for kiln.cast).
func.func @select_condition_shape(%m: tensor<2xi1>, %x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'kiln.select' op all non-scalar operands/results must have the same shape and base type}}
  %z = kiln.select %m, %x, %x : tensor<2xi1>, tensor<4xf32>
  return %z : tensor<4xf32>
}

// -----

func.func @cast_shape(%x: tensor<4xf32>) -> tensor<2x2xi32> {
  // expected-error @+1 {{'kiln.cast' op all non-scalar operands/results must have the same shape and base type}}
  %y = kiln.cast %x : tensor<4xf32> to tensor<2x2xi32>
  return %y : tensor<2x2xi32>
}

// -----

//===----------------------------------------------------------------------===//
// Shape and data movement.
//===----------------------------------------------------------------------===//

func.func @reshape_element_type(%x: tensor<2x3xf32>) -> tensor<6xf16> {
  // expected-error @+1 {{'kiln.reshape' op cannot change the element type}}
  %y = kiln.reshape %x : tensor<2x3xf32> to tensor<6xf16>
  return %y : tensor<6xf16>
}

// -----

func.func @reshape_element_count(%x: tensor<2x3xf32>) -> tensor<7xf32> {
  // expected-error @+1 {{'kiln.reshape' op element count changes from 6 to 7}}
  %y = kiln.reshape %x : tensor<2x3xf32> to tensor<7xf32>
  return %y : tensor<7xf32>
}

// -----

func.func @broadcast_element_type(%x: tensor<4xf32>) -> tensor<2x4xi32> {
  // expected-error @+1 {{'kiln.broadcast' op cannot change the element type}}
  %y = kiln.broadcast %x : tensor<4xf32> to tensor<2x4xi32>
  return %y : tensor<2x4xi32>
}

// -----

func.func @broadcast_rank(%x: tensor<2x4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'kiln.broadcast' op result rank 1 is below the operand rank 2}}
  %y = kiln.broadcast %x : tensor<2x4xf32> to tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @broadcast_dimension(%x: tensor<3x1xf32>) -> tensor<2x4x5xf32> {
  // expected-error @+1 {{'kiln.broadcast' op operand dimension 0 of size 3 cannot broadcast to 4}}
  %y = kiln.broadcast %x : tensor<3x1xf32> to tensor<2x4x5xf32>
  return %y : tensor<2x4x5xf32>
}

// -----

func.func @transpose_permutation_size(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{permutation has 3 entries for rank 2}}
  %y = kiln.transpose %x {permutation = array<i64: 0, 1, 2>} : tensor<2x3xf32>
  return
}

// -----

func.func @transpose_permutation_range(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{permutation entry 2 is out of range for rank 2}}
  %y = kiln.transpose %x {permutation = array<i64: 2, 0>} : tensor<2x3xf32>
  return
}

// -----

func.func @transpose_permutation_twice(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{permutation entry 1 appears twice}}
  %y = kiln.transpose %x {permutation = array<i64: 1, 1>} : tensor<2x3xf32>
  return
}

// -----

func.func @slice_entries(%x: tensor<4x4xf32>) {
  // expected-error @+1 {{start, limit and stride need 2 entries each}}
  %y = kiln.slice %x {start = array<i64: 0, 0>, limit = array<i64: 4>, stride = array<i64: 1, 1>} : tensor<4x4xf32>
  return
}

// -----

func.func @slice_stride(%x: tensor<4x4xf32>) {
  // expected-error @+1 {{stride of dimension 1 must be positive}}
  %y = kiln.slice %x {start = array<i64: 0, 0>, limit = array<i64: 4, 4>, stride = array<i64: 1, 0>} : tensor<4x4xf32>
  return
}

// -----

func.func @slice_window(%x: tensor<4x4xf32>) {
  // expected-error @+1 {{window [1, 5) of dimension 0 is outside [0, 4]}}
  %y = kiln.slice %x {start = array<i64: 1, 0>, limit = array<i64: 5, 4>, stride = array<i64: 1, 1>} : tensor<4x4xf32>
  return
}

// -----

func.func @slice_negative_start(%x: tensor<4x4xf32>) {
  // expected-error @+1 {{window [-1, 2) of dimension 1 is outside [0, 4]}}
  %y = kiln.slice %x {start = array<i64: 0, -1>, limit = array<i64: 4, 2>, stride = array<i64: 1, 1>} : tensor<4x4xf32>
  return
}

// -----

func.func @slice_start_after_limit(%x: tensor<4x4xf32>) {
  // expected-error @+1 {{window [3, 2) of dimension 0 is outside [0, 4]}}
  %y = kiln.slice %x {start = array<i64: 3, 0>, limit = array<i64: 2, 4>, stride = array<i64: 1, 1>} : tensor<4x4xf32>
  return
}

// -----

func.func @reverse_dimension_range(%x: tensor<4x3xf32>) -> tensor<4x3xf32> {
  // expected-error @+1 {{dimension 2 is out of range for rank 2}}
  %y = kiln.reverse %x {dimensions = array<i64: 2>} : tensor<4x3xf32>
  return %y : tensor<4x3xf32>
}

// -----

func.func @reverse_dimension_twice(%x: tensor<4x3xf32>) -> tensor<4x3xf32> {
  // expected-error @+1 {{dimension 0 appears twice}}
  %y = kiln.reverse %x {dimensions = array<i64: 0, 0>} : tensor<4x3xf32>
  return %y : tensor<4x3xf32>
}

// -----

func.func @concat_no_operands() {
  // expected-error @+2 {{needs at least one operand}}
  // expected-error @+1 {{'kiln.concat' op failed to infer returned types}}
  %y = "kiln.concat"() <{axis = 0 : i64}> : () -> tensor<0xf32>
  return
}

// -----

func.func @concat_axis(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{axis 2 is out of range for rank 2}}
  %y = kiln.concat %a, %a {axis = 2 : i64} : tensor<2x3xf32>, tensor<2x3xf32>
  return
}

// -----

func.func @concat_negative_axis(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{axis -1 is out of range for rank 2}}
  %y = kiln.concat %a, %a {axis = -1 : i64} : tensor<2x3xf32>, tensor<2x3xf32>
  return
}

// -----

func.func @concat_rank(%a: tensor<2x3xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{operand 1 differs in rank or element type}}
  %y = kiln.concat %a, %b {axis = 0 : i64} : tensor<2x3xf32>, tensor<3xf32>
  return
}

// -----

func.func @concat_element_type(%a: tensor<2x3xf32>, %b: tensor<2x3xf16>) {
  // expected-error @+1 {{operand 1 differs in rank or element type}}
  %y = kiln.concat %a, %b {axis = 0 : i64} : tensor<2x3xf32>, tensor<2x3xf16>
  return
}

// -----

func.func @concat_dimension(%a: tensor<2x3xf32>, %b: tensor<2x4xf32>) {
  // expected-error @+1 {{operand 1 differs in dimension 1}}
  %y = kiln.concat %a, %b {axis = 0 : i64} : tensor<2x3xf32>, tensor<2x4xf32>
  return
}

// -----

func.func @split_axis(%x: tensor<3x6xf32>) {
  // expected-error @+1 {{axis 2 is out of range for rank 2}}
  %a, %b = kiln.split %x {axis = 2 : i64, sizes = array<i64: 3, 3>} : tensor<3x6xf32>
  return
}

// -----

func.func @split_negative_size(%x: tensor<3x6xf32>) {
  // expected-error @+1 {{split sizes must not be negative}}
  %a, %b = kiln.split %x {axis = 1 : i64, sizes = array<i64: 8, -2>} : tensor<3x6xf32>
  return
}

// -----

func.func @split_sizes_sum(%x: tensor<3x6xf32>) {
  // expected-error @+1 {{split sizes add up to 5, not to dimension size 6}}
  %a, %b = kiln.split %x {axis = 1 : i64, sizes = array<i64: 2, 3>} : tensor<3x6xf32>
  return
}

// -----

func.func @split_result_count(%x: tensor<3x6xf32>) {
  // expected-error @+2 {{'kiln.split' op inferred type(s) 'tensor<3x2xf32>', 'tensor<3x4xf32>' are incompatible with return type(s) of operation 'tensor<3x6xf32>'}}
  // expected-error @+1 {{'kiln.split' op failed to infer returned types}}
  %a = "kiln.split"(%x) <{axis = 1 : i64, sizes = array<i64: 2, 4>}> : (tensor<3x6xf32>) -> tensor<3x6xf32>
  return
}

// -----

func.func @pad_entries(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{low and high need one entry per dimension}}
  %y = kiln.pad %x {low = array<i64: 0, 1>, high = array<i64: 0>} : tensor<2x3xf32>
  return
}

// -----

func.func @pad_negative(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{padding must not be negative}}
  %y = kiln.pad %x {low = array<i64: 0, -1>, high = array<i64: 0, 0>} : tensor<2x3xf32>
  return
}

// -----

func.func @pad_reflect_too_wide(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{reflect padding of dimension 1 must be smaller than its size}}
  %y = kiln.pad %x {low = array<i64: 1, 0>, high = array<i64: 1, 3>, mode = #kiln.pad_mode<reflect>} : tensor<2x3xf32>
  return
}

// -----

func.func @pad_edge_of_empty(%x: tensor<0x3xf32>) {
  // expected-error @+1 {{edge padding of an empty dimension}}
  %y = kiln.pad %x {low = array<i64: 1, 0>, high = array<i64: 0, 0>, mode = #kiln.pad_mode<edge>} : tensor<0x3xf32>
  return
}

// -----

func.func @tile_entries(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{multiples need one entry per dimension}}
  %y = kiln.tile %x {multiples = array<i64: 2>} : tensor<2x3xf32>
  return
}

// -----

func.func @tile_negative(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{multiples must not be negative}}
  %y = kiln.tile %x {multiples = array<i64: 2, -1>} : tensor<2x3xf32>
  return
}

// -----

func.func @iota_dimension() -> tensor<2x3xf32> {
  // expected-error @+1 {{axis 2 is out of range for rank 2}}
  %y = kiln.iota {dimension = 2 : i64} : tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}

// -----

func.func @gather_axis(%x: tensor<4x3xf32>, %i: tensor<2xi64>) {
  // expected-error @+1 {{axis 2 is out of range for rank 2}}
  %y = kiln.gather %x, %i {axis = 2 : i64} : tensor<4x3xf32>, tensor<2xi64>
  return
}

// -----

func.func @gather_elements_rank(%x: tensor<4x3xf32>, %i: tensor<2xi64>) {
  // expected-error @+1 {{indices rank 1 differs from input rank 2}}
  %y = kiln.gather_elements %x, %i {axis = 0 : i64} : tensor<4x3xf32>, tensor<2xi64>
  return
}

// -----

func.func @gather_elements_axis(%x: tensor<4x3xf32>, %i: tensor<2x3xi64>) {
  // expected-error @+1 {{axis -1 is out of range for rank 2}}
  %y = kiln.gather_elements %x, %i {axis = -1 : i64} : tensor<4x3xf32>, tensor<2x3xi64>
  return
}

// -----

func.func @gather_elements_indices_too_large(%x: tensor<4x3xf32>, %i: tensor<2x5xi64>) {
  // expected-error @+1 {{indices dimension 1 of size 5 exceeds the input's 3}}
  %y = kiln.gather_elements %x, %i {axis = 0 : i64} : tensor<4x3xf32>, tensor<2x5xi64>
  return
}

// -----

func.func @gather_nd_batch_dims(%x: tensor<2x3xf32>, %i: tensor<2x1xi64>) {
  // expected-error @+1 {{batch_dims 2 does not fit the operand ranks}}
  %y = kiln.gather_nd %x, %i {batch_dims = 2 : i64} : tensor<2x3xf32>, tensor<2x1xi64>
  return
}

// -----

func.func @gather_nd_scalar_indices(%x: tensor<2x3xf32>, %i: tensor<i64>) {
  // expected-error @+1 {{batch_dims 0 does not fit the operand ranks}}
  %y = kiln.gather_nd %x, %i : tensor<2x3xf32>, tensor<i64>
  return
}

// -----

func.func @gather_nd_depth(%x: tensor<2x3xf32>, %i: tensor<4x3xi64>) {
  // expected-error @+1 {{index depth 3 exceeds the input rank}}
  %y = kiln.gather_nd %x, %i : tensor<2x3xf32>, tensor<4x3xi64>
  return
}

// -----

func.func @gather_nd_zero_depth(%x: tensor<2x3xf32>, %i: tensor<4x0xi64>) {
  // expected-error @+1 {{index depth 0 exceeds the input rank}}
  %y = kiln.gather_nd %x, %i : tensor<2x3xf32>, tensor<4x0xi64>
  return
}

// -----

func.func @gather_nd_batch_dimension(%x: tensor<2x3x4xf32>, %i: tensor<3x1xi64>) {
  // expected-error @+1 {{batch dimension 0 differs}}
  %y = kiln.gather_nd %x, %i {batch_dims = 1 : i64} : tensor<2x3x4xf32>, tensor<3x1xi64>
  return
}

// -----

func.func @scatter_elements_rank(%x: tensor<3x3xf32>, %i: tensor<3xi64>, %u: tensor<3xf32>) {
  // expected-error @+1 {{'kiln.scatter_elements' op indices rank differs from the input rank}}
  %y = kiln.scatter_elements %x, %i, %u {axis = 0 : i64} : tensor<3x3xf32>, tensor<3xi64>, tensor<3xf32>
  return
}

// -----

func.func @scatter_elements_updates_shape(%x: tensor<3x3xf32>, %i: tensor<2x3xi64>, %u: tensor<3x2xf32>) {
  // expected-error @+1 {{'kiln.scatter_elements' op updates shape differs from the indices shape}}
  %y = kiln.scatter_elements %x, %i, %u {axis = 0 : i64} : tensor<3x3xf32>, tensor<2x3xi64>, tensor<3x2xf32>
  return
}

// -----

func.func @scatter_elements_updates_type(%x: tensor<3x3xf32>, %i: tensor<2x3xi64>, %u: tensor<2x3xf16>) {
  // expected-error @+1 {{'kiln.scatter_elements' op updates element type differs from the input's}}
  %y = kiln.scatter_elements %x, %i, %u {axis = 0 : i64} : tensor<3x3xf32>, tensor<2x3xi64>, tensor<2x3xf16>
  return
}

// -----

func.func @scatter_elements_axis(%x: tensor<3x3xf32>, %i: tensor<2x3xi64>, %u: tensor<2x3xf32>) {
  // expected-error @+1 {{axis 2 is out of range for rank 2}}
  %y = kiln.scatter_elements %x, %i, %u {axis = 2 : i64} : tensor<3x3xf32>, tensor<2x3xi64>, tensor<2x3xf32>
  return
}

// -----

func.func @scatter_elements_indices_too_large(%x: tensor<3x3xf32>, %i: tensor<2x4xi64>, %u: tensor<2x4xf32>) {
  // expected-error @+1 {{indices dimension 1 of size 4 exceeds the input's 3}}
  %y = kiln.scatter_elements %x, %i, %u {axis = 0 : i64} : tensor<3x3xf32>, tensor<2x4xi64>, tensor<2x4xf32>
  return
}

// -----

func.func @scatter_nd_scalar_indices(%x: tensor<8xf32>, %i: tensor<i64>, %u: tensor<f32>) {
  // expected-error @+1 {{'kiln.scatter_nd' op indices must have rank 1 or more}}
  %y = kiln.scatter_nd %x, %i, %u : tensor<8xf32>, tensor<i64>, tensor<f32>
  return
}

// -----

func.func @scatter_nd_depth(%x: tensor<8xf32>, %i: tensor<4x2xi64>, %u: tensor<4xf32>) {
  // expected-error @+1 {{'kiln.scatter_nd' op index depth 2 exceeds the input rank}}
  %y = kiln.scatter_nd %x, %i, %u : tensor<8xf32>, tensor<4x2xi64>, tensor<4xf32>
  return
}

// -----

func.func @scatter_nd_updates_shape(%x: tensor<4x5xf32>, %i: tensor<3x1xi64>, %u: tensor<3x4xf32>) {
  // expected-error @+1 {{'kiln.scatter_nd' op updates shape does not match indices and input}}
  %y = kiln.scatter_nd %x, %i, %u : tensor<4x5xf32>, tensor<3x1xi64>, tensor<3x4xf32>
  return
}

// -----

func.func @scatter_nd_updates_type(%x: tensor<8xf32>, %i: tensor<4x1xi64>, %u: tensor<4xf64>) {
  // expected-error @+1 {{'kiln.scatter_nd' op updates element type differs from the input's}}
  %y = kiln.scatter_nd %x, %i, %u : tensor<8xf32>, tensor<4x1xi64>, tensor<4xf64>
  return
}

// -----

func.func @trilu_rank(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'kiln.trilu' op needs a tensor of rank 2 or more}}
  %y = kiln.trilu %x : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @cumsum_axis(%x: tensor<2x5xf32>) -> tensor<2x5xf32> {
  // expected-error @+1 {{axis 2 is out of range for rank 2}}
  %y = kiln.cumsum %x {axis = 2 : i64} : tensor<2x5xf32>
  return %y : tensor<2x5xf32>
}

// -----

func.func @top_k_axis(%x: tensor<3x4xf32>) {
  // expected-error @+1 {{axis 2 is out of range for rank 2}}
  %v, %i = kiln.top_k %x {k = 2 : i64, axis = 2 : i64} : tensor<3x4xf32>
  return
}

// -----

func.func @top_k_too_many(%x: tensor<3x4xf32>) {
  // expected-error @+1 {{k = 5 exceeds dimension size 4}}
  %v, %i = kiln.top_k %x {k = 5 : i64, axis = 1 : i64} : tensor<3x4xf32>
  return
}

// -----

func.func @argmax_axis(%x: tensor<3x4xf32>) {
  // expected-error @+1 {{axis 2 is out of range for rank 2}}
  %i = kiln.argmax %x {axis = 2 : i64} : tensor<3x4xf32>
  return
}

// -----

func.func @argmin_axis(%x: tensor<3x4xf32>) {
  // expected-error @+1 {{axis -1 is out of range for rank 2}}
  %i = kiln.argmin %x {axis = -1 : i64} : tensor<3x4xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Reductions.
//===----------------------------------------------------------------------===//

func.func @reduce_dimension_range(%x: tensor<3x4xf32>) {
  // expected-error @+1 {{dimension 2 is out of range for rank 2}}
  %y = kiln.reduce_sum %x {dimensions = array<i64: 2>} : tensor<3x4xf32>
  return
}

// -----

func.func @reduce_dimension_twice(%x: tensor<3x4xf32>) {
  // expected-error @+1 {{dimension 1 appears twice}}
  %y = kiln.reduce_max %x {dimensions = array<i64: 1, 1>} : tensor<3x4xf32>
  return
}

// -----

func.func @reduce_dimensions_unsorted(%x: tensor<3x4xf32>) {
  // expected-error @+1 {{dimensions must be sorted}}
  %y = kiln.reduce_mean %x {dimensions = array<i64: 1, 0>} : tensor<3x4xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Neural network operations.
//===----------------------------------------------------------------------===//

func.func @matmul_rank(%a: tensor<8xf32>, %b: tensor<8x4xf32>) {
  // expected-error @+1 {{operands need the same rank, 2 or more (got 1 and 2)}}
  %y = kiln.matmul %a, %b : tensor<8xf32>, tensor<8x4xf32>
  return
}

// -----

func.func @matmul_element_type(%a: tensor<2x8xf32>, %b: tensor<8x4xf16>) {
  // expected-error @+1 {{operands differ in element type}}
  %y = kiln.matmul %a, %b : tensor<2x8xf32>, tensor<8x4xf16>
  return
}

// -----

func.func @matmul_batch(%a: tensor<3x2x8xf32>, %b: tensor<2x8x4xf32>) {
  // expected-error @+1 {{batch dimensions differ}}
  %y = kiln.matmul %a, %b : tensor<3x2x8xf32>, tensor<2x8x4xf32>
  return
}

// -----

func.func @matmul_contraction(%a: tensor<2x8xf32>, %b: tensor<4x8xf32>) {
  // expected-error @+1 {{contraction sizes differ: 8 and 4}}
  %y = kiln.matmul %a, %b : tensor<2x8xf32>, tensor<4x8xf32>
  return
}

// -----

func.func @matmul_contraction_transposed(%a: tensor<8x2xf32>, %b: tensor<8x4xf32>) {
  // expected-error @+1 {{contraction sizes differ: 2 and 4}}
  %y = kiln.matmul %a, %b {transpose_rhs} : tensor<8x2xf32>, tensor<8x4xf32>
  return
}

// -----

func.func @conv_rank(%x: tensor<1x3xf32>, %w: tensor<4x3xf32>) {
  // expected-error @+1 {{input and filter need the same rank, 3 or more}}
  %y = kiln.conv %x, %w {strides = array<i64>, padding = array<i64>, dilations = array<i64>} : tensor<1x3xf32>, tensor<4x3xf32>
  return
}

// -----

func.func @conv_attribute_sizes(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+1 {{strides, dilations and kernel need 2 entries, padding 4}}
  %y = kiln.conv %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilations = array<i64: 1, 1>} : tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>
  return
}

// -----

func.func @conv_missing_dilations(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+1 {{strides, dilations and kernel need 2 entries, padding 4}}
  %y = kiln.conv %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64>} : tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>
  return
}

// -----

func.func @conv_stride(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+1 {{strides, dilations and kernel sizes must be positive}}
  %y = kiln.conv %x, %w {strides = array<i64: 1, 0>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>
  return
}

// -----

func.func @conv_empty_kernel(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x0x3xf32>) {
  // expected-error @+1 {{strides, dilations and kernel sizes must be positive}}
  %y = kiln.conv %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : tensor<1x3x8x8xf32>, tensor<4x3x0x3xf32>
  return
}

// -----

func.func @conv_negative_padding(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+1 {{padding must not be negative}}
  %y = kiln.conv %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, -1>, dilations = array<i64: 1, 1>} : tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>
  return
}

// -----

func.func @conv_groups(%x: tensor<1x4x8x8xf32>, %w: tensor<4x2x3x3xf32>) {
  // expected-error @+1 {{groups 3 does not divide the channels}}
  %y = kiln.conv %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 3 : i64} : tensor<1x4x8x8xf32>, tensor<4x2x3x3xf32>
  return
}

// -----

func.func @conv_groups_filters(%x: tensor<1x4x8x8xf32>, %w: tensor<3x2x3x3xf32>) {
  // expected-error @+1 {{groups 2 does not divide the channels}}
  %y = kiln.conv %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 2 : i64} : tensor<1x4x8x8xf32>, tensor<3x2x3x3xf32>
  return
}

// -----

func.func @conv_zero_groups(%x: tensor<1x4x8x8xf32>, %w: tensor<4x2x3x3xf32>) {
  // expected-error @+1 {{groups 0 does not divide the channels}}
  %y = kiln.conv %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 0 : i64} : tensor<1x4x8x8xf32>, tensor<4x2x3x3xf32>
  return
}

// -----

func.func @conv_filter_channels(%x: tensor<1x4x8x8xf32>, %w: tensor<4x4x3x3xf32>) {
  // expected-error @+1 {{filter has 4 input channels, expected 2}}
  %y = kiln.conv %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 2 : i64} : tensor<1x4x8x8xf32>, tensor<4x4x3x3xf32>
  return
}

// -----

func.func @conv_filter_too_large(%x: tensor<1x3x4x4xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+1 {{filter is larger than the padded input}}
  %y = kiln.conv %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 2>} : tensor<1x3x4x4xf32>, tensor<4x3x3x3xf32>
  return
}

// -----

func.func @conv_transpose_rank(%x: tensor<1x4x4xf32>, %w: tensor<4x2x3x3xf32>) {
  // expected-error @+1 {{input and filter need the same rank, 3 or more}}
  %y = kiln.conv_transpose %x, %w {strides = array<i64: 1>, padding = array<i64: 0, 0>, dilations = array<i64: 1>, output_padding = array<i64: 0>} : tensor<1x4x4xf32>, tensor<4x2x3x3xf32>
  return
}

// -----

func.func @conv_transpose_attribute_sizes(%x: tensor<1x4x4x4xf32>, %w: tensor<4x2x3x3xf32>) {
  // expected-error @+1 {{strides, dilations and kernel need 2 entries, padding 4}}
  %y = kiln.conv_transpose %x, %w {strides = array<i64: 2>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, output_padding = array<i64: 0, 0>} : tensor<1x4x4x4xf32>, tensor<4x2x3x3xf32>
  return
}

// -----

func.func @conv_transpose_output_padding(%x: tensor<1x4x4x4xf32>, %w: tensor<4x2x3x3xf32>) {
  // expected-error @+1 {{output_padding needs 2 entries}}
  %y = kiln.conv_transpose %x, %w {strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, output_padding = array<i64: 0>} : tensor<1x4x4x4xf32>, tensor<4x2x3x3xf32>
  return
}

// -----

func.func @conv_transpose_groups(%x: tensor<1x4x4x4xf32>, %w: tensor<4x2x3x3xf32>) {
  // expected-error @+1 {{groups 3 does not divide the channels}}
  %y = kiln.conv_transpose %x, %w {strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, output_padding = array<i64: 0, 0>, groups = 3 : i64} : tensor<1x4x4x4xf32>, tensor<4x2x3x3xf32>
  return
}

// -----

func.func @conv_transpose_filter_channels(%x: tensor<1x4x4x4xf32>, %w: tensor<2x2x3x3xf32>) {
  // expected-error @+1 {{filter has 2 input channels, expected 4}}
  %y = kiln.conv_transpose %x, %w {strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, output_padding = array<i64: 0, 0>} : tensor<1x4x4x4xf32>, tensor<2x2x3x3xf32>
  return
}

// -----

func.func @conv_transpose_output_size(%x: tensor<1x4x1x1xf32>, %w: tensor<4x2x1x1xf32>) {
  // expected-error @+1 {{output size of spatial dimension 1 is not positive}}
  %y = kiln.conv_transpose %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 1, 0, 0>, dilations = array<i64: 1, 1>, output_padding = array<i64: 0, 0>} : tensor<1x4x1x1xf32>, tensor<4x2x1x1xf32>
  return
}

// -----

func.func @pool_rank(%x: tensor<3x8xf32>) {
  // expected-error @+1 {{expected a tensor of rank 3 or more}}
  %y = kiln.max_pool %x {kernel = array<i64>, strides = array<i64>, padding = array<i64>} : tensor<3x8xf32>
  return
}

// -----

func.func @pool_attribute_sizes(%x: tensor<1x3x8x8xf32>) {
  // expected-error @+1 {{strides, dilations and kernel need 2 entries, padding 4}}
  %y = kiln.avg_pool %x {kernel = array<i64: 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>} : tensor<1x3x8x8xf32>
  return
}

// -----

func.func @pool_dilation_sizes(%x: tensor<1x3x8x8xf32>) {
  // expected-error @+1 {{strides, dilations and kernel need 2 entries, padding 4}}
  %y = kiln.max_pool %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1>} : tensor<1x3x8x8xf32>
  return
}

// -----

func.func @pool_dilation_zero(%x: tensor<1x3x8x8xf32>) {
  // expected-error @+1 {{strides, dilations and kernel sizes must be positive}}
  %y = kiln.max_pool %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 0>} : tensor<1x3x8x8xf32>
  return
}

// -----

func.func @pool_kernel_zero(%x: tensor<1x3x8x8xf32>) {
  // expected-error @+1 {{strides, dilations and kernel sizes must be positive}}
  %y = kiln.avg_pool %x {kernel = array<i64: 0, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>} : tensor<1x3x8x8xf32>
  return
}

// -----

func.func @pool_negative_padding(%x: tensor<1x3x8x8xf32>) {
  // expected-error @+1 {{padding must not be negative}}
  %y = kiln.avg_pool %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: -1, 0, 0, 0>} : tensor<1x3x8x8xf32>
  return
}

// -----

func.func @pool_padding_not_below_kernel(%x: tensor<1x3x8x8xf32>) {
  // expected-error @+1 {{padding must be smaller than the kernel}}
  %y = kiln.max_pool %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 2>} : tensor<1x3x8x8xf32>
  return
}

// -----

func.func @pool_kernel_too_large(%x: tensor<1x3x2x8xf32>) {
  // expected-error @+1 {{kernel is larger than the padded input}}
  %y = kiln.max_pool %x {kernel = array<i64: 4, 2>, strides = array<i64: 1, 1>, padding = array<i64: 1, 0, 0, 0>} : tensor<1x3x2x8xf32>
  return
}

// -----

func.func @softmax_axis(%x: tensor<4x10xf32>) -> tensor<4x10xf32> {
  // expected-error @+1 {{axis 2 is out of range for rank 2}}
  %y = kiln.softmax %x {axis = 2 : i64} : tensor<4x10xf32>
  return %y : tensor<4x10xf32>
}

// -----

func.func @log_softmax_axis(%x: tensor<4x10xf32>) -> tensor<4x10xf32> {
  // expected-error @+1 {{axis -1 is out of range for rank 2}}
  %y = kiln.log_softmax %x {axis = -1 : i64} : tensor<4x10xf32>
  return %y : tensor<4x10xf32>
}

// -----

func.func @attention_rank(%q: tensor<2x8x4xf32>, %k: tensor<6x4xf32>) {
  // expected-error @+1 {{query, key and value need the same rank, 2 or more (got 3, 2 and 2)}}
  %y = kiln.attention %q, %k, %k : tensor<2x8x4xf32>, tensor<6x4xf32>, tensor<6x4xf32>
  return
}

// -----

func.func @attention_element_type(%q: tensor<8x4xf32>, %k: tensor<6x4xf32>, %v: tensor<6x4xf16>) {
  // expected-error @+1 {{query, key and value differ in element type}}
  %y = kiln.attention %q, %k, %v : tensor<8x4xf32>, tensor<6x4xf32>, tensor<6x4xf16>
  return
}

// -----

func.func @attention_batch(%q: tensor<2x8x4xf32>, %k: tensor<3x6x4xf32>) {
  // expected-error @+1 {{batch dimensions differ}}
  %y = kiln.attention %q, %k, %k : tensor<2x8x4xf32>, tensor<3x6x4xf32>, tensor<3x6x4xf32>
  return
}

// -----

func.func @attention_depth(%q: tensor<8x4xf32>, %k: tensor<6x5xf32>) {
  // expected-error @+1 {{query and key rows differ in size: 4 and 5}}
  %y = kiln.attention %q, %k, %k : tensor<8x4xf32>, tensor<6x5xf32>, tensor<6x5xf32>
  return
}

// -----

func.func @attention_sequence(%q: tensor<8x4xf32>, %k: tensor<6x4xf32>, %v: tensor<5x4xf32>) {
  // expected-error @+1 {{key and value differ in sequence length: 6 and 5}}
  %y = kiln.attention %q, %k, %v : tensor<8x4xf32>, tensor<6x4xf32>, tensor<5x4xf32>
  return
}

// -----

func.func @attention_mask_element_type(%q: tensor<8x4xf32>, %k: tensor<6x4xf32>, %m: tensor<8x6xf16>) {
  // expected-error @+1 {{'kiln.attention' op mask element type 'f16' differs from the query's 'f32'}}
  %y = kiln.attention %q, %k, %k mask %m : tensor<8x6xf16> : tensor<8x4xf32>, tensor<6x4xf32>, tensor<6x4xf32>
  return
}

// -----

func.func @attention_mask_rank(%q: tensor<8x4xf32>, %k: tensor<6x4xf32>, %m: tensor<1x8x6xf32>) {
  // expected-error @+1 {{'kiln.attention' op mask rank 3 exceeds the scores' rank 2}}
  %y = kiln.attention %q, %k, %k mask %m : tensor<1x8x6xf32> : tensor<8x4xf32>, tensor<6x4xf32>, tensor<6x4xf32>
  return
}

// -----

func.func @attention_mask_shape(%q: tensor<8x4xf32>, %k: tensor<6x4xf32>, %m: tensor<8x4xf32>) {
  // expected-error @+1 {{'kiln.attention' op mask dimension 1 of size 4 cannot broadcast to 6}}
  %y = kiln.attention %q, %k, %k mask %m : tensor<8x4xf32> : tensor<8x4xf32>, tensor<6x4xf32>, tensor<6x4xf32>
  return
}

// -----

func.func @attention_masked_fill_without_mask(%q: tensor<8x4xf32>) {
  // expected-error @+1 {{'kiln.attention' op is masked_fill without a mask}}
  %y = kiln.attention %q, %q, %q {masked_fill} : tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>
  return
}

// -----

func.func @attention_grad_masked_fill_without_mask(%q: tensor<8x4xf32>) {
  // expected-error @+1 {{'kiln.attention_grad' op is masked_fill without a mask}}
  %dq, %dk, %dv = kiln.attention_grad %q, %q, %q, %q, %q {masked_fill} : tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>
  return
}

// -----

func.func @attention_causal_fill_without_mask(%q: tensor<8x4xf32>) {
  // expected-error @+1 {{'kiln.attention' op is causal_fill without a mask}}
  %y = kiln.attention %q, %q, %q {causal_fill} : tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>
  return
}

// -----

func.func @attention_causal_fill_not_square(%q: tensor<8x4xf32>, %k: tensor<6x4xf32>, %m: tensor<8x6xf32>) {
  // expected-error @+1 {{'kiln.attention' op is causal_fill over 8 queries and 6 keys (they must match)}}
  %y = kiln.attention %q, %k, %k mask %m : tensor<8x6xf32> {causal_fill} : tensor<8x4xf32>, tensor<6x4xf32>, tensor<6x4xf32>
  return
}

// -----

func.func @layer_norm_axis(%x: tensor<4x16xf32>, %g: tensor<16xf32>) -> tensor<4x16xf32> {
  // expected-error @+1 {{axis 2 is out of range for rank 2}}
  %y = kiln.layer_norm %x, %g {axis = 2 : i64} : tensor<4x16xf32>, tensor<16xf32>
  return %y : tensor<4x16xf32>
}

// -----

func.func @layer_norm_scale_shape(%x: tensor<4x16xf32>, %g: tensor<4x16xf32>) -> tensor<4x16xf32> {
  // expected-error @+1 {{'kiln.layer_norm' op scale must have the normalized shape and the input element type}}
  %y = kiln.layer_norm %x, %g {axis = 1 : i64} : tensor<4x16xf32>, tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

func.func @layer_norm_scale_type(%x: tensor<4x16xf32>, %g: tensor<16xf16>) -> tensor<4x16xf32> {
  // expected-error @+1 {{'kiln.layer_norm' op scale must have the normalized shape and the input element type}}
  %y = kiln.layer_norm %x, %g {axis = 1 : i64} : tensor<4x16xf32>, tensor<16xf16>
  return %y : tensor<4x16xf32>
}

// -----

func.func @layer_norm_bias(%x: tensor<4x16xf32>, %g: tensor<16xf32>, %b: tensor<8xf32>) -> tensor<4x16xf32> {
  // expected-error @+1 {{'kiln.layer_norm' op bias must have the normalized shape and the input element type}}
  %y = kiln.layer_norm %x, %g bias %b : tensor<8xf32> {axis = 1 : i64} : tensor<4x16xf32>, tensor<16xf32>
  return %y : tensor<4x16xf32>
}

// -----

func.func @batch_norm_rank(%x: tensor<3xf32>, %s: tensor<3xf32>) -> tensor<3xf32> {
  // expected-error @+1 {{'kiln.batch_norm' op input needs rank 2 or more}}
  %y = kiln.batch_norm %x, %s, %s, %s, %s : tensor<3xf32>, tensor<3xf32>
  return %y : tensor<3xf32>
}

// -----

func.func @batch_norm_channels(%x: tensor<2x3x4x4xf32>, %s: tensor<4xf32>) -> tensor<2x3x4x4xf32> {
  // expected-error @+1 {{'kiln.batch_norm' op per-channel operands must be 'tensor<3xf32>'}}
  %y = kiln.batch_norm %x, %s, %s, %s, %s : tensor<2x3x4x4xf32>, tensor<4xf32>
  return %y : tensor<2x3x4x4xf32>
}

// -----

func.func @batch_norm_statistics_types(%x: tensor<2x3xf32>, %s: tensor<3xf32>, %m: tensor<3xf16>) -> tensor<2x3xf32> {
  // expected-error @+1 {{all of {scale, bias, mean, variance} have same type}}
  %y = "kiln.batch_norm"(%x, %s, %s, %m, %s) : (tensor<2x3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf16>, tensor<3xf32>) -> tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}

// -----

func.func @batch_norm_train_rank(%x: tensor<3xf32>, %s: tensor<3xf32>) {
  // expected-error @+1 {{input needs rank 2 or more}}
  %y, %m, %v = kiln.batch_norm_train %x, %s, %s : tensor<3xf32>, tensor<3xf32>
  return
}

// -----

func.func @batch_norm_train_channels(%x: tensor<2x3x4xf32>, %s: tensor<4xf32>) {
  // expected-error @+1 {{scale and bias must be tensor<3x...> of the input element type}}
  %y, %m, %v = kiln.batch_norm_train %x, %s, %s : tensor<2x3x4xf32>, tensor<4xf32>
  return
}

// -----

func.func @dropout_ratio(%x: tensor<4xf32>, %seed: tensor<i64>) {
  // expected-error @+1 {{ratio must be in [0, 1)}}
  %y, %m = kiln.dropout %x, %seed {ratio = 1.0 : f64} : tensor<4xf32>
  return
}

// -----

func.func @dropout_negative_ratio(%x: tensor<4xf32>, %seed: tensor<i64>) {
  // expected-error @+1 {{ratio must be in [0, 1)}}
  %y, %m = kiln.dropout %x, %seed {ratio = -0.5 : f64} : tensor<4xf32>
  return
}

// -----

func.func @cross_entropy_rank(%l: tensor<10xf32>, %t: tensor<i64>) {
  // expected-error @+1 {{scores need rank 2 or more ([N, C, ...])}}
  %y = kiln.cross_entropy %l, %t : tensor<10xf32>, tensor<i64>
  return
}

// -----

func.func @cross_entropy_labels(%l: tensor<8x10xf32>, %t: tensor<10xi64>) {
  // expected-error @+1 {{labels shape does not match the scores without their class dimension}}
  %y = kiln.cross_entropy %l, %t : tensor<8x10xf32>, tensor<10xi64>
  return
}

// -----

func.func @cross_entropy_labels_spatial(%l: tensor<2x5x3xf32>, %t: tensor<2x5xi64>) {
  // expected-error @+1 {{labels shape does not match the scores without their class dimension}}
  %y = kiln.cross_entropy %l, %t : tensor<2x5x3xf32>, tensor<2x5xi64>
  return
}

// -----

func.func @cross_entropy_weight(%l: tensor<8x10xf32>, %t: tensor<8xi64>, %w: tensor<8xf32>) {
  // expected-error @+1 {{weight must hold one value per class}}
  %y = kiln.cross_entropy %l, %t weight %w : tensor<8xf32> : tensor<8x10xf32>, tensor<8xi64>
  return
}

// -----

func.func @cross_entropy_reduction(%l: tensor<8x10xf32>, %t: tensor<8xi64>) {
  // expected-error @+1 {{reduction must be none, sum or mean}}
  %y = kiln.cross_entropy %l, %t {reduction = #kiln.reduction<max>} : tensor<8x10xf32>, tensor<8xi64>
  return
}

// -----

func.func @cross_entropy_grad_grad_type(%l: tensor<8x10xf32>, %t: tensor<8xi64>, %g: tensor<f32>) {
  // expected-error @+1 {{grad must have the loss's type 'tensor<8xf32>', not 'tensor<f32>'}}
  %y = kiln.cross_entropy_grad %l, %t, %g {reduction = #kiln.reduction<none>} : tensor<8x10xf32>, tensor<8xi64>, tensor<f32>
  return
}

// -----

func.func @cross_entropy_grad_labels(%l: tensor<8x10xf32>, %t: tensor<10xi64>, %g: tensor<f32>) {
  // expected-error @+1 {{labels shape does not match the scores without their class dimension}}
  %y = kiln.cross_entropy_grad %l, %t, %g : tensor<8x10xf32>, tensor<10xi64>, tensor<f32>
  return
}

// -----

func.func @cross_entropy_grad_smoothing(%l: tensor<8x10xf32>, %t: tensor<8xi64>, %g: tensor<f32>) {
  // expected-error @+1 {{label_smoothing must be in [0, 1]}}
  %y = kiln.cross_entropy_grad %l, %t, %g {label_smoothing = 1.5 : f64} : tensor<8x10xf32>, tensor<8xi64>, tensor<f32>
  return
}

// -----

func.func @cross_entropy_grad_result(%l: tensor<8x10xf32>, %t: tensor<8xi64>, %g: tensor<f32>) {
  // expected-error @+1 {{all of {logits, logits_grad} have same type}}
  %y = "kiln.cross_entropy_grad"(%l, %t, %g) : (tensor<8x10xf32>, tensor<8xi64>, tensor<f32>) -> tensor<8x9xf32>
  return
}

// -----

func.func @cross_entropy_label_smoothing(%l: tensor<8x10xf32>, %t: tensor<8xi64>) {
  // expected-error @+1 {{label_smoothing must be in [0, 1]}}
  %y = kiln.cross_entropy %l, %t {label_smoothing = 1.5 : f64} : tensor<8x10xf32>, tensor<8xi64>
  return
}

// -----

func.func @nll_loss_rank(%l: tensor<10xf32>, %t: tensor<i64>) {
  // expected-error @+1 {{scores need rank 2 or more ([N, C, ...])}}
  %y = kiln.nll_loss %l, %t : tensor<10xf32>, tensor<i64>
  return
}

// -----

func.func @nll_loss_labels(%l: tensor<8x10xf32>, %t: tensor<8x1xi64>) {
  // expected-error @+1 {{labels shape does not match the scores without their class dimension}}
  %y = kiln.nll_loss %l, %t : tensor<8x10xf32>, tensor<8x1xi64>
  return
}

// -----

func.func @nll_loss_weight(%l: tensor<8x10xf32>, %t: tensor<8xi64>, %w: tensor<10xf64>) {
  // expected-error @+1 {{weight must hold one value per class}}
  %y = kiln.nll_loss %l, %t weight %w : tensor<10xf64> : tensor<8x10xf32>, tensor<8xi64>
  return
}

// -----

func.func @nll_loss_reduction(%l: tensor<8x10xf32>, %t: tensor<8xi64>) {
  // expected-error @+1 {{reduction must be none, sum or mean}}
  %y = kiln.nll_loss %l, %t {reduction = #kiln.reduction<add>} : tensor<8x10xf32>, tensor<8xi64>
  return
}

// -----

func.func @resize_rank(%x: tensor<1x4x4xf32>) -> tensor<1x3x8x8xf32> {
  // expected-error @+1 {{result must have the input's rank and element type}}
  %y = kiln.resize %x {mode = #kiln.resize_mode<linear>, coordinate_mode = #kiln.coordinate_mode<half_pixel>,
                       scales = array<f64: 1.0, 2.0, 2.0>} : tensor<1x4x4xf32> to tensor<1x3x8x8xf32>
  return %y : tensor<1x3x8x8xf32>
}

// -----

func.func @resize_scales_count(%x: tensor<4x4xf32>) -> tensor<8x8xf32> {
  // expected-error @+1 {{scales need one entry per dimension}}
  %y = kiln.resize %x {mode = #kiln.resize_mode<linear>, coordinate_mode = #kiln.coordinate_mode<half_pixel>,
                       scales = array<f64: 2.0>} : tensor<4x4xf32> to tensor<8x8xf32>
  return %y : tensor<8x8xf32>
}

// -----

func.func @resize_scale_positive(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{scale of dimension 1 must be positive}}
  %y = kiln.resize %x {mode = #kiln.resize_mode<nearest>, coordinate_mode = #kiln.coordinate_mode<asymmetric>,
                       scales = array<f64: 1.0, 0.0>} : tensor<4x4xf32> to tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}

// -----

func.func @all_reduce_mean_mixed(%a: tensor<4xf32>, %m: memref<4xf32>) {
  // expected-error @+1 {{takes only tensors or only buffers}}
  %r = kiln.all_reduce_mean %a, %m : tensor<4xf32>, memref<4xf32>
  return
}

// -----

func.func @all_reduce_mean_f64(%a: tensor<4xf64>) {
  // expected-error @+1 {{averages f32 values, not 'f64'}}
  %r = kiln.all_reduce_mean %a : tensor<4xf64>
  return
}

// -----

func.func @all_reduce_mean_empty() {
  // expected-error @+1 {{needs at least one operand}}
  "kiln.all_reduce_mean"() : () -> ()
  return
}

// -----

func.func @reduce_scatter_uneven(%a: tensor<10xf32>) {
  // expected-error @+1 {{needs the whole value (10 elements) to be 3 shards of 4}}
  %r = kiln.reduce_scatter_mean %a {ranks = 3 : i64} : (tensor<10xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @all_gather_2d(%a: tensor<2x2xf32>) {
  // expected-error @+1 {{works on 1-D values, not 'tensor<2x2xf32>'}}
  %r = kiln.all_gather %a {ranks = 2 : i64} : (tensor<2x2xf32>) -> tensor<8xf32>
  return
}

// -----

func.func @local_shard_f16(%a: tensor<8xf16>) {
  // expected-error @+1 {{works on f32 values, not 'tensor<8xf16>'}}
  %r = kiln.local_shard %a {ranks = 2 : i64} : (tensor<8xf16>) -> tensor<4xf16>
  return
}

// -----

func.func @all_gather_both(%a: memref<4xf32>, %b: memref<8xf32>) {
  // expected-error @+1 {{takes a tensor and returns one, or takes two buffers}}
  %r = "kiln.all_gather"(%a, %b) {ranks = 2 : i64} : (memref<4xf32>, memref<8xf32>) -> tensor<8xf32>
  return
}

// -----

func.func @local_shard_zero_ranks(%a: tensor<8xf32>) {
  // expected-error @+1 {{attribute 'ranks' failed to satisfy constraint}}
  %r = kiln.local_shard %a {ranks = 0 : i64} : (tensor<8xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @reduce_scatter_buffer_to_tensor(%a: memref<8xf32>) {
  // expected-error @+1 {{takes two buffers or a tensor, not both}}
  %r = "kiln.reduce_scatter_mean"(%a) {ranks = 2 : i64} : (memref<8xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @attention_grad_operands(%q: tensor<8x4xf32>, %k: tensor<6x5xf32>, %o: tensor<8x5xf32>) {
  // expected-error @+1 {{query and key rows differ in size: 4 and 5}}
  %dq, %dk, %dv = kiln.attention_grad %q, %k, %k, %o, %o : tensor<8x4xf32>, tensor<6x5xf32>, tensor<6x5xf32>, tensor<8x5xf32>
  return
}

// -----

func.func @attention_grad_out(%q: tensor<8x4xf32>, %k: tensor<6x4xf32>, %o: tensor<6x4xf32>) {
  // expected-error @+1 {{'kiln.attention_grad' op out has type 'tensor<6x4xf32>', not the attention's 'tensor<8x4xf32>'}}
  %dq, %dk, %dv = kiln.attention_grad %q, %k, %k, %o, %o : tensor<8x4xf32>, tensor<6x4xf32>, tensor<6x4xf32>, tensor<6x4xf32>
  return
}

// -----

func.func @attention_grad_mask_shape(%q: tensor<8x4xf32>, %k: tensor<6x4xf32>, %o: tensor<8x4xf32>, %m: tensor<8x4xf32>) {
  // expected-error @+1 {{'kiln.attention_grad' op mask dimension 1 of size 4 cannot broadcast to 6}}
  %dq, %dk, %dv = kiln.attention_grad %q, %k, %k, %o, %o mask %m : tensor<8x4xf32> : tensor<8x4xf32>, tensor<6x4xf32>, tensor<6x4xf32>, tensor<8x4xf32>
  return
}

// -----

func.func @flash_attention_head_size(%q: tensor<1x1x4x8xbf16>) {
  // expected-error @+1 {{'kiln.flash_attention' op head size 8 is not 16, 32, 64 or 128}}
  %o, %s = kiln.flash_attention %q, %q, %q : (tensor<1x1x4x8xbf16>, tensor<1x1x4x8xbf16>, tensor<1x1x4x8xbf16>) -> (tensor<1x1x4x8xf32>, tensor<1x1x4x2xf32>)
  return
}

// -----

func.func @flash_attention_f32(%q: tensor<1x1x4x16xf32>) {
  // expected-error @+1 {{'kiln.flash_attention' op takes bf16 or f16 query, key and value, not 'f32', 'f32', 'f32'}}
  %o, %s = kiln.flash_attention %q, %q, %q : (tensor<1x1x4x16xf32>, tensor<1x1x4x16xf32>, tensor<1x1x4x16xf32>) -> (tensor<1x1x4x16xf32>, tensor<1x1x4x2xf32>)
  return
}

// -----

func.func @flash_attention_causal(%q: tensor<1x1x4x16xbf16>, %k: tensor<1x1x6x16xbf16>) {
  // expected-error @+1 {{'kiln.flash_attention' op is causal over 4 queries and 6 keys (they must match)}}
  %o, %s = kiln.flash_attention %q, %k, %k {causal} : (tensor<1x1x4x16xbf16>, tensor<1x1x6x16xbf16>, tensor<1x1x6x16xbf16>) -> (tensor<1x1x4x16xf32>, tensor<1x1x4x2xf32>)
  return
}

// -----

func.func @flash_attention_mask(%q: tensor<2x1x4x16xbf16>, %m: tensor<2x1x4x5xf32>) {
  // expected-error @+1 {{'kiln.flash_attention' op mask must be f32 [B or 1, H or 1, Sq or 1, Sk], not 'tensor<2x1x4x5xf32>'}}
  %o, %s = kiln.flash_attention %q, %q, %q mask %m : (tensor<2x1x4x16xbf16>, tensor<2x1x4x16xbf16>, tensor<2x1x4x16xbf16>, tensor<2x1x4x5xf32>) -> (tensor<2x1x4x16xf32>, tensor<2x1x4x2xf32>)
  return
}

// -----

func.func @flash_attention_mixed(%q: tensor<1x1x4x16xbf16>, %o: memref<1x1x4x16xf32>, %s: memref<1x1x4x2xf32>) {
  // expected-error @+1 {{'kiln.flash_attention' op takes only tensors or only buffers}}
  kiln.flash_attention %q, %q, %q into %o, %s : (tensor<1x1x4x16xbf16>, tensor<1x1x4x16xbf16>, tensor<1x1x4x16xbf16>, memref<1x1x4x16xf32>, memref<1x1x4x2xf32>) -> ()
  return
}

// -----

func.func @flash_attention_grad_stats(%q: tensor<1x1x4x16xbf16>, %o: tensor<1x1x4x16xf32>, %s: tensor<1x1x4xf32>) {
  // expected-error @+1 {{'kiln.flash_attention_grad' op stats must be f32 of shape [1, 1, 4, 2], not 'tensor<1x1x4xf32>'}}
  %dq, %dk, %dv, %d = kiln.flash_attention_grad %q, %q, %q, %o, %o, %s : (tensor<1x1x4x16xbf16>, tensor<1x1x4x16xbf16>, tensor<1x1x4x16xbf16>, tensor<1x1x4x16xf32>, tensor<1x1x4x16xf32>, tensor<1x1x4xf32>) -> (tensor<1x1x4x16xf32>, tensor<1x1x4x16xf32>, tensor<1x1x4x16xf32>, tensor<1x1x4xf32>)
  return
}

// -----

func.func @flash_attention_grad_masked_fill(%q: tensor<1x1x4x16xbf16>, %o: tensor<1x1x4x16xf32>, %s: tensor<1x1x4x2xf32>) {
  // expected-error @+1 {{'kiln.flash_attention_grad' op is masked_fill without a mask}}
  %dq, %dk, %dv, %d = kiln.flash_attention_grad %q, %q, %q, %o, %o, %s {masked_fill} : (tensor<1x1x4x16xbf16>, tensor<1x1x4x16xbf16>, tensor<1x1x4x16xbf16>, tensor<1x1x4x16xf32>, tensor<1x1x4x16xf32>, tensor<1x1x4x2xf32>) -> (tensor<1x1x4x16xf32>, tensor<1x1x4x16xf32>, tensor<1x1x4x16xf32>, tensor<1x1x4xf32>)
  return
}

// -----

func.func @flash_attention_strided(%q: memref<1x1x4x16xbf16, strided<[128, 128, 32, 1]>>, %o: memref<1x1x4x16xf32>, %s: memref<1x1x4x2xf32>) {
  // expected-error @+1 {{'kiln.flash_attention' op takes buffers with the identity layout, not 'memref<1x1x4x16xbf16, strided<[128, 128, 32, 1]>>'}}
  kiln.flash_attention %q, %q, %q into %o, %s : (memref<1x1x4x16xbf16, strided<[128, 128, 32, 1]>>, memref<1x1x4x16xbf16, strided<[128, 128, 32, 1]>>, memref<1x1x4x16xbf16, strided<[128, 128, 32, 1]>>, memref<1x1x4x16xf32>, memref<1x1x4x2xf32>) -> ()
  return
}

// -----

func.func @flash_attention_cudnn_f32_out(%q: tensor<1x1x4x16xbf16>) {
  // expected-error @+1 {{'kiln.flash_attention' op out must be bf16 of shape [1, 1, 4, 16], not 'tensor<1x1x4x16xf32>'}}
  %o, %s = kiln.flash_attention %q, %q, %q {cudnn} : (tensor<1x1x4x16xbf16>, tensor<1x1x4x16xbf16>, tensor<1x1x4x16xbf16>) -> (tensor<1x1x4x16xf32>, tensor<1x1x4x2xf32>)
  return
}

// -----

func.func @flash_attention_grouped_kernels(%q: tensor<1x4x4x16xbf16>, %k: tensor<1x2x4x16xbf16>) {
  // expected-error @+1 {{'kiln.flash_attention' op key has 2 heads for 4 query heads (as many; cuDNN groups them expected)}}
  %o, %s = kiln.flash_attention %q, %k, %k : (tensor<1x4x4x16xbf16>, tensor<1x2x4x16xbf16>, tensor<1x2x4x16xbf16>) -> (tensor<1x4x4x16xf32>, tensor<1x4x4x2xf32>)
  return
}

// -----

func.func @flash_attention_cudnn_groups_unequal(%q: tensor<1x6x4x16xbf16>, %k: tensor<1x4x4x16xbf16>) {
  // expected-error @+1 {{'kiln.flash_attention' op key has 4 heads for 6 query heads (a divisor of them expected)}}
  %o, %s = kiln.flash_attention %q, %k, %k {cudnn} : (tensor<1x6x4x16xbf16>, tensor<1x4x4x16xbf16>, tensor<1x4x4x16xbf16>) -> (tensor<1x6x4x16xbf16>, tensor<1x6x4x2xf32>)
  return
}

// -----

func.func @flash_attention_cudnn_grouped_value(%q: tensor<1x4x4x16xbf16>, %k: tensor<1x2x4x16xbf16>, %v: tensor<1x4x4x16xbf16>) {
  // expected-error @+1 {{'kiln.flash_attention' op key and value must be [1, 2, Sk, 16] like the query}}
  %o, %s = kiln.flash_attention %q, %k, %v {cudnn} : (tensor<1x4x4x16xbf16>, tensor<1x2x4x16xbf16>, tensor<1x4x4x16xbf16>) -> (tensor<1x4x4x16xbf16>, tensor<1x4x4x2xf32>)
  return
}

// -----

func.func @flash_attention_grad_cudnn_masked_fill(%q: tensor<1x1x4x16xbf16>, %s: tensor<1x1x4x2xf32>, %m: tensor<1x1x1x4xf32>) {
  // expected-error @+1 {{'kiln.flash_attention_grad' op on cuDNN takes no causal_fill or masked_fill (its mask is added to the scores)}}
  %dq, %dk, %dv, %d = kiln.flash_attention_grad %q, %q, %q, %q, %q, %s mask %m {masked_fill, cudnn} : (tensor<1x1x4x16xbf16>, tensor<1x1x4x16xbf16>, tensor<1x1x4x16xbf16>, tensor<1x1x4x16xbf16>, tensor<1x1x4x16xbf16>, tensor<1x1x4x2xf32>, tensor<1x1x1x4xf32>) -> (tensor<1x1x4x16xbf16>, tensor<1x1x4x16xbf16>, tensor<1x1x4x16xbf16>, tensor<1x1x4xf32>)
  return
}

// -----

func.func @flash_attention_grad_cudnn_f32_grad(%q: tensor<1x1x4x16xbf16>, %o: tensor<1x1x4x16xbf16>, %g: tensor<1x1x4x16xf32>, %s: tensor<1x1x4x2xf32>) {
  // expected-error @+1 {{'kiln.flash_attention_grad' op grad must be bf16 of shape [1, 1, 4, 16], not 'tensor<1x1x4x16xf32>'}}
  %dq, %dk, %dv, %d = kiln.flash_attention_grad %q, %q, %q, %o, %g, %s {cudnn} : (tensor<1x1x4x16xbf16>, tensor<1x1x4x16xbf16>, tensor<1x1x4x16xbf16>, tensor<1x1x4x16xbf16>, tensor<1x1x4x16xf32>, tensor<1x1x4x2xf32>) -> (tensor<1x1x4x16xbf16>, tensor<1x1x4x16xbf16>, tensor<1x1x4x16xbf16>, tensor<1x1x4xf32>)
  return
}

// -----

func.func @flash_attention_grad_cudnn_causal_fill(%q: tensor<1x1x4x16xbf16>, %s: tensor<1x1x4x2xf32>) {
  // expected-error @+1 {{'kiln.flash_attention_grad' op on cuDNN takes no causal_fill or masked_fill (its mask is added to the scores)}}
  %dq, %dk, %dv, %d = kiln.flash_attention_grad %q, %q, %q, %q, %q, %s {causal, causal_fill, cudnn} : (tensor<1x1x4x16xbf16>, tensor<1x1x4x16xbf16>, tensor<1x1x4x16xbf16>, tensor<1x1x4x16xbf16>, tensor<1x1x4x16xbf16>, tensor<1x1x4x2xf32>) -> (tensor<1x1x4x16xbf16>, tensor<1x1x4x16xbf16>, tensor<1x1x4x16xbf16>, tensor<1x1x4xf32>)
  return
}

// -----

func.func @layer_norm_grad_scale(%x: tensor<4x16xf32>, %g: tensor<8xf32>, %dy: tensor<4x16xf32>) {
  // expected-error @+1 {{'kiln.layer_norm_grad' op scale must have the normalized shape and the input element type}}
  %dx, %dg, %db = kiln.layer_norm_grad %x, %g, %dy {axis = 1 : i64} : tensor<4x16xf32>, tensor<8xf32>
  return
}

// -----

func.func @fused_layer_norm_rank(%x: tensor<2x4x16xf32>, %g: tensor<16xf32>) {
  // expected-error @+1 {{'kiln.fused_layer_norm' op takes a non-empty [rows, cols] input, not 'tensor<2x4x16xf32>'}}
  %y = kiln.fused_layer_norm %x, %g : (tensor<2x4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  return
}

// -----

func.func @fused_layer_norm_output(%x: tensor<4x16xf32>, %g: tensor<16xf32>) {
  // expected-error @+1 {{'kiln.fused_layer_norm' op result must be f32, bf16 or f16 of shape [4, 16], not 'tensor<4x16xf64>'}}
  %y = kiln.fused_layer_norm %x, %g : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf64>
  return
}

// -----

func.func @fused_layer_norm_bias(%x: tensor<4x16xf32>, %g: tensor<16xf32>, %b: tensor<16xbf16>) {
  // expected-error @+1 {{'kiln.fused_layer_norm' op bias must be f32 of shape [16], not 'tensor<16xbf16>'}}
  %y = kiln.fused_layer_norm %x, %g bias %b : (tensor<4x16xf32>, tensor<16xf32>, tensor<16xbf16>) -> tensor<4x16xbf16>
  return
}

// -----

func.func @fused_layer_norm_grad_partials(%x: tensor<40x16xf32>, %g: tensor<16xf32>) {
  // expected-error @+1 {{'kiln.fused_layer_norm_grad' op partials must be f32 of shape [2, 2, 16], not 'tensor<1x2x16xf32>'}}
  %dx, %dg, %db, %p = kiln.fused_layer_norm_grad %x, %g, %x : (tensor<40x16xf32>, tensor<16xf32>, tensor<40x16xf32>) -> (tensor<40x16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<1x2x16xf32>)
  return
}

// -----

func.func @fused_layer_norm_grad_bf16(%x: tensor<4x16xf32>, %g: tensor<16xf32>) {
  // expected-error @+1 {{'kiln.fused_layer_norm_grad' op input_grad must be f32 of shape [4, 16], not 'tensor<4x16xbf16>'}}
  %dx, %dg, %db, %p = kiln.fused_layer_norm_grad %x, %g, %x : (tensor<4x16xf32>, tensor<16xf32>, tensor<4x16xf32>) -> (tensor<4x16xbf16>, tensor<16xf32>, tensor<16xf32>, tensor<1x2x16xf32>)
  return
}

// -----

func.func @fused_layer_norm_mixed(%x: memref<4x16xf32>, %g: tensor<16xf32>, %y: memref<4x16xf32>) {
  // expected-error @+1 {{'kiln.fused_layer_norm' op takes only tensors or only buffers}}
  kiln.fused_layer_norm %x, %g into %y : (memref<4x16xf32>, tensor<16xf32>, memref<4x16xf32>) -> ()
  return
}

// -----

func.func @fused_layer_norm_strided(%x: memref<4x16xf32, strided<[32, 1]>>, %g: memref<16xf32>, %y: memref<4x16xf32>) {
  // expected-error @+1 {{'kiln.fused_layer_norm' op takes buffers with the identity layout, not 'memref<4x16xf32, strided<[32, 1]>>'}}
  kiln.fused_layer_norm %x, %g into %y : (memref<4x16xf32, strided<[32, 1]>>, memref<16xf32>, memref<4x16xf32>) -> ()
  return
}

// -----

func.func @fused_layer_norm_both(%x: memref<4x16xf32>, %g: memref<16xf32>, %y: memref<4x16xf32>) {
  // expected-error @+1 {{'kiln.fused_layer_norm' op has 1 results on tensors, or as many output buffers and none}}
  %r = kiln.fused_layer_norm %x, %g into %y : (memref<4x16xf32>, memref<16xf32>, memref<4x16xf32>) -> tensor<4x16xf32>
  return
}

// -----

func.func @fused_layer_norm_residual_sum(%x: tensor<4x16xf32>, %g: tensor<16xf32>) {
  // expected-error @+1 {{'kiln.fused_layer_norm' op has 2 results on tensors, or as many output buffers and none}}
  %y = kiln.fused_layer_norm %x, %g residual %x : (tensor<4x16xf32>, tensor<16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  return
}

// -----

func.func @fused_layer_norm_residual_shape(%x: tensor<4x16xf32>, %g: tensor<16xf32>, %r: tensor<16xf32>) {
  // expected-error @+1 {{'kiln.fused_layer_norm' op residual must be f32, bf16 or f16 of shape [4, 16], not 'tensor<16xf32>'}}
  %y:2 = kiln.fused_layer_norm %x, %g residual %r : (tensor<4x16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>)
  return
}

// -----

func.func @fused_layer_norm_copy_of_bf16(%x: tensor<4x16xf32>, %g: tensor<16xf32>) {
  // expected-error @+1 {{'kiln.fused_layer_norm' op with a copy, the result must be f32, not 'tensor<4x16xbf16>'}}
  %y:2 = kiln.fused_layer_norm %x, %g : (tensor<4x16xf32>, tensor<16xf32>) -> (tensor<4x16xbf16>, tensor<4x16xbf16>)
  return
}

// -----

func.func @fused_layer_norm_f32_copy(%x: tensor<4x16xf32>, %g: tensor<16xf32>) {
  // expected-error @+1 {{'kiln.fused_layer_norm' op copy must be bf16 or f16 of shape [4, 16], not 'tensor<4x16xf32>'}}
  %y:3 = kiln.fused_layer_norm %x, %g residual %x : (tensor<4x16xf32>, tensor<16xf32>, tensor<4x16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>)
  return
}

// -----

func.func @fused_layer_norm_too_many(%x: tensor<4x16xf32>, %g: tensor<16xf32>) {
  // expected-error @+1 {{'kiln.fused_layer_norm' op produces 3 values, more than the result and its copy}}
  %y:3 = kiln.fused_layer_norm %x, %g : (tensor<4x16xf32>, tensor<16xf32>) -> (tensor<4x16xf32>, tensor<4x16xbf16>, tensor<4x16xbf16>)
  return
}

// -----

func.func @fused_layer_norm_grad_accumulate(%x: tensor<4x16xf32>, %g: tensor<16xf32>, %a: tensor<4x16xf64>) {
  // expected-error @+1 {{'kiln.fused_layer_norm_grad' op accumulate must be f32, bf16 or f16 of shape [4, 16], not 'tensor<4x16xf64>'}}
  %dx, %dg, %db, %p = kiln.fused_layer_norm_grad %x, %g, %x accumulate %a : (tensor<4x16xf32>, tensor<16xf32>, tensor<4x16xf32>, tensor<4x16xf64>) -> (tensor<4x16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<1x2x16xf32>)
  return
}

// -----

// A 16-bit input only with a residual (the kernels' later passes read the
// f32 sum), and the gradient's input is f32.
func.func @fused_layer_norm_narrow_input(%x: tensor<4x16xbf16>, %g: tensor<16xf32>) {
  // expected-error @+1 {{'kiln.fused_layer_norm' op input must be f32 of shape [4, 16], not 'tensor<4x16xbf16>'}}
  %y = kiln.fused_layer_norm %x, %g : (tensor<4x16xbf16>, tensor<16xf32>) -> tensor<4x16xf32>
  return
}

// -----

func.func @fused_layer_norm_grad_narrow_input(%x: tensor<4x16xbf16>, %g: tensor<16xf32>, %dy: tensor<4x16xf32>) {
  // expected-error @+1 {{'kiln.fused_layer_norm_grad' op input must be f32 of shape [4, 16], not 'tensor<4x16xbf16>'}}
  %dx, %dg, %db, %p = kiln.fused_layer_norm_grad %x, %g, %dy : (tensor<4x16xbf16>, tensor<16xf32>, tensor<4x16xf32>) -> (tensor<4x16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<1x2x16xf32>)
  return
}

// -----

func.func @bitcast_width(%x: tensor<4xf32>) -> tensor<4xi16> {
  // expected-error @+1 {{'kiln.bitcast' op needs element types of one width ('f32' to 'i16')}}
  %y = kiln.bitcast %x : tensor<4xf32> to tensor<4xi16>
  return %y : tensor<4xi16>
}

// -----

func.func @shift_of_floats(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of}}
  %y = kiln.shift_left %x, %x : tensor<4xf32>
  return %y : tensor<4xf32>
}
