//===- Collective.h - The plan's collectives on a Communicator -*- C++ -*-===//
//
// The semantics of `collective` records (docs/plan-format.md) on top of the
// Communicator's byte primitives. Sums are computed by exactly one member
// per element, in group order, and then shared, so every member gets the
// same bits whatever the transport.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_COMM_COLLECTIVE_H
#define LOOM_RUNTIME_COMM_COLLECTIVE_H

#include "loom/runtime/comm/Communicator.h"
#include "loom/runtime/plan/Plan.h"

#include <cstdint>
#include <string>
#include <vector>

namespace loom::runtime {

/// Sums `count` elements of `dtype` over `n` arrays stored one after the
/// other at `arrays`, into `out`: element i is ((a0[i] + a1[i]) + a2[i]) +
/// ..., in array order. f16 and bf16 are summed in f32 and rounded once
/// (to nearest even); f32 in f32; i32 and i64 wrap around.
void sumArrays(DType dtype, const void *arrays, unsigned n, uint64_t count,
               void *out);

/// The scratch bytes runCollective needs for `step`, a collective step of
/// `plan` (0 for the others).
uint64_t collectiveScratchBytes(const Plan &plan, const PlanStep &step);

/// The elements an all-reduce step sums: its pairs' (a gradient bucket's
/// several).
uint64_t allReduceElements(const Plan &plan, const PlanStep &step);

/// Runs the collective step `step` of `plan` as member group.index of
/// `group` (meshGroup of this rank over the step's axes): `buffers` holds
/// the address of each of step.buffers; it reads the IN buffers and writes
/// the OUT buffers (which must not share bytes with them), using `scratch`
/// (collectiveScratchBytes, 64-byte aligned). All-reduce: a reduce-scatter
/// of the flattened tensors, its pairs' one after the other (each member
/// sums 1/n of the elements), then an all-gather of the sums;
/// reduce-scatter: an all-to-all of the blocks then the sum; all-gather,
/// all-to-all and broadcast: the primitive of the same name; all-slice: a
/// local copy.
bool runCollective(const Plan &plan, const PlanStep &step,
                   const CommGroup &group, Communicator &comm,
                   const std::vector<char *> &buffers, char *scratch,
                   std::string &error);

} // namespace loom::runtime

#endif // LOOM_RUNTIME_COMM_COLLECTIVE_H
