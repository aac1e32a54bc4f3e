// The sketch × algorithm dimension of the search (TuCCL §III-B/C): which algorithm programs a
// communication sketch admits on a topology.
//
// In:  a Topology, a collective, the directory of the example programs.
// Out: AlgorithmCandidates — a program at the topology's shape, the sketches that admit it, and
//      whether it is NCCL's ring.
//
// What the sketch means here. For the generators and the synthesiser (synth/) the sketch is an
// input: they build the algorithm on the sketch's logical topology, so each sketch variant may give
// a different algorithm. For the fixed example programs (examples/algorithms/*.resccl) a sketch
// decides which are admissible: a program is admitted by a sketch when every inter-node rank pair it sends on is an
// edge of that sketch (topo/sketch.h). Full mesh admits everything; pruned (NIC groups) admits
// programs whose inter-node peers share a NIC group — HM's same-local-index rings; relay admits
// only the one sender→receiver pair per NIC group. One program is *derived* from a sketch:
// "ring-rail", the rank-order ring program relabelled along a Hamiltonian cycle whose inter-node
// hops are edges of the sparsest sketch that has one (relay, else pruned) — a rail-aligned ring.
// A program's simulated time does not depend on which admitting sketch it was drawn from, so each
// program is listed once, labelled with the sparsest sketch that admits it.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "lang/algorithm.h"
#include "sim/cost_model.h"
#include "sim/network.h"
#include "support/status.h"
#include "synth/sketch_synthesis.h"
#include "topo/sketch.h"
#include "topo/topology.h"

namespace tuccl {

struct AlgorithmCandidate {
  std::string name;     ///< "ring", "ring-rail", "hm@pruned", "synth@relay": the value of the "algorithm" dimension
  std::string program;  ///< where it comes from: the example ("ring_allreduce"), "generator hm", "synthesis (MILP)"
  Algorithm algorithm;
  /// Admitting sketch variants, sparsest first ("relay", "pruned", "full-mesh").
  std::vector<std::string> sketches;
  bool ncclRing = false;  ///< the ring in rank order: what NCCL's RING runs
  int32_t interNodeConnections = 0;

  const std::string& sketch() const { return sketches.front(); }
};

/// The ordered inter-node (src, dst) rank pairs the algorithm sends on, sorted and unique.
std::vector<std::pair<int32_t, int32_t>> interNodePairs(const Algorithm& algorithm, const Topology& topology);
/// Whether every inter-node pair of `algorithm` is an edge of `sketch`.
bool sketchAdmits(const Sketch& sketch, const Algorithm& algorithm, const Topology& topology);

/// A rank order visiting every node's ranks contiguously whose node-to-node hops (including the
/// wrap-around) are edges of `sketch`; nullopt when there is none. Ranks of one node: the entry
/// rank, the others ascending, the exit rank.
std::optional<std::vector<int32_t>> sketchRingOrder(const Topology& topology, const Sketch& sketch);

/// `algorithm` with rank p renamed order[p]; AllGather's output chunk blocks follow their ranks
/// (block p becomes block order[p]) so the collective's conventions still hold. The result is
/// proved by the semantic checker; std::logic_error when it fails.
Algorithm relabelRanks(const Algorithm& algorithm, const std::vector<int32_t>& order);

/// Which candidates algorithmCandidates makes.
struct CandidateOptions {
  bool programs = true;    ///< the example programs (AllReduce, AllGather) and the rail ring
  bool generated = true;   ///< every synth/ generator under every sketch variant
  bool synthesised = true; ///< the sketch-guided synthesiser under every sketch variant
  double synthesisSeconds = 10;  ///< the time limit of each synthesis (the heuristic answers after it)
  /// What the synthesiser models of the engine (synthesisCharges); zeros: alpha-beta alone.
  LinkCharges charges;
  /// Judges the synthesiser's MILP routing against its heuristic one (simulatedJudge); empty: the
  /// modelled time decides.
  std::function<std::optional<double>(const Algorithm&)> judge;
  /// Candidate names to make (empty: all). A generator runs only when its name, or a name
  /// "<generator>@<sketch>", is listed; the synthesiser only for "synth" or "synth@<sketch>".
  std::vector<std::string> only;
};

/// What the engine charges a plan's transfers under `cost` (sim/cost_model.h): the TB rate of the
/// default plan configuration (Simple, 512 threads), through a NIC, and Eq. 1's constants.
LinkCharges synthesisCharges(const CostModel& cost);

/// The geometric mean over `sizes` of the algorithm's simulated time (µs), planned as tuccl-sim
/// plans it by default (HPDS, the default request); nullopt when it does not plan or simulate.
std::function<std::optional<double>(const Algorithm&)> simulatedJudge(const Network& network, const CostModel& cost,
                                                                      std::vector<int64_t> sizes);

/// The candidates for `collective` on `topology` (nRanks = its GPUs, GPUPerNode = the largest
/// node):
///   programs     allreduce: ring, ring-rail, hm; allgather: ring, ring-rail, hm, direct (the
///                example programs at the topology's shape);
///   generated    "<generator>@<sketch>": each synth/ generator (ring, hm, direct, trees, ...)
///                under the relay, pruned and full-mesh sketches, sparsest first; an algorithm
///                equal to one already listed is left out, so a generator the sketch does not
///                reshape appears once, under the sparsest sketch;
///   synthesised  "synth@<sketch>": the sketch-guided synthesiser under each sketch.
/// What does not fit the shape or the sketch is left out and named in `notes`. Throws
/// std::runtime_error when nothing fits (and nothing was left out by `only`).
std::vector<AlgorithmCandidate> algorithmCandidates(const Topology& topology, Collective collective,
                                                    const std::string& examplesDir,
                                                    std::vector<std::string>* notes = nullptr,
                                                    const CandidateOptions& options = {});

/// The programs of a directory as candidates for `collective`: every `.resccl` file (at the
/// topology's shape: nRanks its GPUs, GPUPerNode its largest node) and every `.xml` file (MSCCL
/// algorithm XML, for as many GPUs as the topology has), in name order, each named by its file
/// name (its value of the "algorithm" dimension; program: its path). Files of other collectives
/// are skipped; files that do not load, prove or fit are left out and named in `notes`. A name
/// already in `taken` is an InvalidArgument error naming both.
Expected<std::vector<AlgorithmCandidate>> directoryCandidates(const Topology& topology, Collective collective,
                                                              const std::string& directory,
                                                              const std::vector<std::string>& taken,
                                                              std::vector<std::string>* notes = nullptr);

}  // namespace tuccl
