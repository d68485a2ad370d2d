// RUN: loom-opt %s --split-input-file --verify-diagnostics -o /dev/null

// The loom dialect's discardable attributes, checked where hand-written or
// hand-edited IR puts them (the compiler never writes these forms).

// expected-error @+1 {{'func.func' op 'loom.index_bound' must be a positive integer}}
func.func @index_bound_zero(%x: tensor<4xi32> {loom.input = "x", loom.index_bound = 0 : i64}) {
  return
}

// -----

// expected-error @+1 {{'func.func' op argument 0 has an index bound but is not an input}}
func.func @index_bound_not_input(%x: tensor<4xi32> {loom.index_bound = 4 : i64}) {
  return
}

// -----

// expected-error @+1 {{'func.func' op 'loom.in_place' must be the index of one of its arguments}}
func.func @in_place_past_arguments(%x: tensor<4xf32>) -> (tensor<4xf32> {loom.in_place = 3 : i64}) {
  return %x : tensor<4xf32>
}

// -----

// expected-error @+1 {{'func.func' op 'loom.kernel' marks a func.func (unit)}}
func.func @kernel_not_unit() attributes {loom.kernel = 1 : i64} {
  return
}

// -----

// expected-error @+1 {{'builtin.module' op 'loom.kernel' marks a func.func (unit)}}
module attributes {loom.kernel} {
}

// -----

// expected-error @+1 {{'func.func' op 'loom.recompute' must name a layer instance}}
func.func @recompute_not_name() attributes {loom.recompute = 1 : i64} {
  return
}

// -----

// expected-error @+1 {{'func.func' op 'loom.stage' must be a stage number}}
func.func @stage_negative() attributes {loom.stage = -1 : i64} {
  return
}

// -----

// expected-error @+1 {{'func.func' op 'loom.backward' marks a backward op (unit)}}
func.func @backward_not_unit() attributes {loom.backward = 1 : i64} {
  return
}

// -----

// expected-error @+1 {{'func.func' op 'loom.phase' must be "forward", "backward" or "update"}}
func.func @phase_unknown() attributes {loom.phase = "sideways"} {
  return
}

// -----

// expected-error @+1 {{'func.func' op 'loom.stages' must be an array of stages}}
func.func @stages_not_array() attributes {loom.stages = 3 : i64} {
  return
}

// -----

// expected-error @+1 {{'builtin.module' op 'loom.stages_count' belongs on a pipelined model}}
module attributes {loom.stages_count = 2 : i64} {
}

// -----

// expected-error @+1 {{'builtin.module' op 'loom.schedule' belongs on a pipelined model}}
module attributes {loom.schedule = "gpipe"} {
}

// -----

// expected-error @+1 {{'func.func' op 'loom.gradient_of' must name a param}}
func.func @gradient_of_not_name() attributes {loom.gradient_of = 1 : i64} {
  return
}

// -----

// expected-error @+1 {{'func.func' op 'loom.moe_block' must be a string, on a loom.moe_route}}
func.func @moe_block_on_function() attributes {loom.moe_block = "x"} {
  return
}
