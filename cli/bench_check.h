// Data that checks a benchmark's results: every rank's input is a function of (rank, element,
// check iteration), so a rank regenerates any peer's input and computes the reference of its own
// output alone, with no data exchanged (nccl-tests does the same).
//
// In:  the call (collective, ranks, root, datatype, op, count), a rank, the iteration's seed.
// Out: the rank's input written into its send buffer; the number of wrong elements of its output
//      against kernelgen/collective_reference.h, compared as kernelgen/output_compare.h does.
//
// The values keep reductions exact, so a correct run has no wrong element: small integers in
// [-8, 8] ([0, 16] for uint8) for sum, avg, min and max (n of them sum exactly in half up to 256
// ranks, in bfloat16 up to 32); for prod, values whose product is a power of two or, for integers,
// wraps as the kernels compute it: ±½, ±1, ±2 for floats (±1 beyond 14 ranks, where half's range
// ends), -2..3 without 0 for signed integers, 1..3 for uint8.
//
// The point-to-point patterns (bench_report.h's PeerPattern) move bytes unchanged: a rank's input
// is the same kind of small integers, and each element it receives must equal, exactly, the
// element of the sender's input it came from (SendRecv: element i of rank (r-1+n) % n's input;
// AllToAllv: element i of the block rank q sends it, at q's displacement for it).
#pragma once

#include <cstdint>

#include "cli/bench_report.h"
#include "kernelgen/collective_reference.h"

namespace tuccl::bench {

/// Element `index` of rank `rank`'s input in check iteration `seed`.
double benchInputValue(const CollectiveCall& call, int32_t rank, int64_t index, uint64_t seed);

/// Writes rank `rank`'s inputElements(call) elements at `input`.
void fillBenchInput(const CollectiveCall& call, int32_t rank, uint64_t seed, void* input);

/// How many of rank `rank`'s outputElements(call) elements at `output` differ from the reference
/// beyond the comparison's tolerance; 0 where the output is unspecified (a non-root of Reduce).
int64_t countWrongElements(const CollectiveCall& call, int32_t rank, uint64_t seed, const void* output);

/// The same for any benchmark: `what` is the collective of `call` or a point-to-point pattern,
/// which takes the ranks, datatype, count (nccl-tests' param count) and in place of `call`
/// (call.collective is not read for a pattern).
void fillBenchInput(BenchCollective what, const CollectiveCall& call, int32_t rank, uint64_t seed,
                    void* input);
int64_t countWrongElements(BenchCollective what, const CollectiveCall& call, int32_t rank, uint64_t seed,
                           const void* output);
/// A pattern's elements of one rank's input and output: SendRecv count, AllToAllv n × count.
int64_t peerElements(PeerPattern pattern, const CollectiveCall& call);

}  // namespace tuccl::bench
