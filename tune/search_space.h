// The configuration space the tuner searches (TuCCL §III-C, Eq. 1 and Table IV; issue 8 item 1).
//
// In:  dimensions (categorical or ordinal, with their values) and constraints, as data — the
//      default space (defaultSearchSpace), or JSON restricting/extending a base space
//      (searchSpaceFromJson).
// Out: a SearchSpace that tells which configurations are valid, enumerates them (grid search),
//      samples them uniformly (random search, TPE start-up) and names them.
//
// A Configuration is one value index per dimension, so it is a small ordered value that can be
// compared, hashed into a std::map and written to a trial log without knowing the dimensions.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/vocabulary.h"

namespace tuccl {

enum class DimensionKind : uint8_t {
  Categorical,  ///< unordered labels (protocol, algorithm, scheduler)
  Ordinal,      ///< ordered integers (nChannels, nThreads, chunk bytes)
};

/// One axis of the space.
struct Dimension {
  std::string name;
  DimensionKind kind = DimensionKind::Categorical;
  std::vector<std::string> categories;  ///< Categorical: the labels
  std::vector<int64_t> levels;          ///< Ordinal: strictly ascending values
  /// Ordinal: the search treats distances in log(value) (sizes, powers of two).
  bool logScale = false;

  size_t size() const { return kind == DimensionKind::Categorical ? categories.size() : levels.size(); }
  /// The value at `index` as text ("LL128", "512").
  std::string label(size_t index) const;
  /// Index of the value written as `text`; npos when absent.
  size_t find(std::string_view text) const;
};

/// A hardware rule, as data. Two shapes cover NCCL's and TuCCL's rules:
///   Range: when `whenDimension` == `whenValue` (or always when whenDimension is empty),
///          min <= value(dimension) <= max;
///   Ratio: when ..., value(dimension) >= factor * value(other).
struct Constraint {
  enum class Kind : uint8_t { Range, Ratio };
  std::string name;  ///< reported when a configuration violates it
  Kind kind = Kind::Range;
  std::string whenDimension;  ///< a categorical dimension; empty: unconditional
  std::string whenValue;
  std::string dimension;  ///< an ordinal dimension
  int64_t min = std::numeric_limits<int64_t>::min();
  int64_t max = std::numeric_limits<int64_t>::max();
  std::string other;  ///< Ratio: the ordinal dimension on the right-hand side
  double factor = 1;
};

/// One value index per dimension of a SearchSpace.
struct Configuration {
  std::vector<uint32_t> index;
  friend auto operator<=>(const Configuration&, const Configuration&) = default;
  friend bool operator==(const Configuration&, const Configuration&) = default;
};

class SearchSpace {
 public:
  static constexpr size_t npos = static_cast<size_t>(-1);

  SearchSpace() = default;
  /// Throws std::invalid_argument when a dimension is empty, has duplicate values or unsorted
  /// levels, or a constraint names a dimension that does not exist or has the wrong kind.
  SearchSpace(std::vector<Dimension> dimensions, std::vector<Constraint> constraints);

  const std::vector<Dimension>& dimensions() const { return dimensions_; }
  const std::vector<Constraint>& constraints() const { return constraints_; }
  const Dimension& dimension(size_t d) const { return dimensions_[d]; }
  size_t dimensionCount() const { return dimensions_.size(); }
  /// Index of the dimension called `name`; npos when absent.
  size_t dimensionIndex(std::string_view name) const;

  /// Product of the dimension sizes (valid or not); saturates at UINT64_MAX.
  uint64_t rawSize() const;
  /// True when every index is in range and no constraint is violated.
  bool isValid(const Configuration& config) const;
  /// Names of the constraints `config` violates ("index out of range" for a malformed one).
  std::vector<std::string> violations(const Configuration& config) const;
  /// Every valid configuration in lexicographic index order (the grid).
  std::vector<Configuration> enumerateValid() const;
  /// Number of valid configurations.
  uint64_t validCount() const;
  /// A uniformly random valid configuration (rejection sampling, then the enumerated grid when
  /// valid points are rare). Throws std::runtime_error when the space has none.
  Configuration sampleValid(std::mt19937_64& rng) const;

  /// Text value of dimension `name` in `config`; empty when the space has no such dimension.
  std::string valueOf(const Configuration& config, std::string_view name) const;
  /// Numeric value of ordinal dimension `name`, or `fallback` when absent.
  int64_t levelOf(const Configuration& config, std::string_view name, int64_t fallback = 0) const;
  /// "protocol=LL128 nChannels=8 nThreads=256 chunkBytes=131072 ..."
  std::string describe(const Configuration& config) const;
  /// {"protocol": "LL128", "nChannels": 8, ...}
  nlohmann::json configurationToJson(const Configuration& config) const;
  /// Inverse of configurationToJson; throws std::invalid_argument naming the bad key or value.
  Configuration configurationFromJson(const nlohmann::json& json) const;

 private:
  bool satisfies(const Constraint& constraint, const Configuration& config) const;

  std::vector<Dimension> dimensions_;
  std::vector<Constraint> constraints_;
};

/// Names of the dimensions the default space and the profilers agree on.
inline constexpr std::string_view kDimProtocol = "protocol";
inline constexpr std::string_view kDimChannels = "nChannels";
inline constexpr std::string_view kDimThreads = "nThreads";
inline constexpr std::string_view kDimChunkBytes = "chunkBytes";
inline constexpr std::string_view kDimAlgorithm = "algorithm";
inline constexpr std::string_view kDimScheduler = "scheduler";

/// The protocol of `config`: its "protocol" value parsed with the vocabulary (the space keeps
/// values as text); nullopt when the space has no protocol dimension or the value is not one.
std::optional<Protocol> protocolOf(const SearchSpace& space, const Configuration& config);

/// The hardware rules of the default space: TuCCL §III-C "thread-channel deadlock"
/// (nThreads >= 32 × nChannels) and NCCL's thread limits per protocol
/// (reference/nccl-tuner-abi.md: NCCL_NTHREADS 64..512 for LL and Simple,
/// NCCL_LL128_NTHREADS 160..640 for LL128).
std::vector<Constraint> defaultConstraints();

/// Issue 8 item 1: protocol {LL, LL128, Simple} × nChannels {1,2,4,8,16} × nThreads {32..640 step
/// 32} × chunkBytes {256 B .. 8 MiB, powers of two} × algorithm `algorithms` × scheduler
/// `schedulers` {hpds, rr, algorithm, stage}, with defaultConstraints().
SearchSpace defaultSearchSpace(std::vector<std::string> algorithms = {"ring"},
                               std::vector<std::string> schedulers = {"hpds", "rr", "algorithm", "stage"});

/// Restricts or extends `base` (docs/tuning.md, "Search space JSON"):
///   {"dimensions": [{"name": "protocol", "values": ["LL128", "Simple"]},          // restrict
///                   {"name": "unroll", "kind": "ordinal", "values": [1, 2, 4], "log": true}],  // add
///    "remove": ["scheduler"],
///    "constraints": [{"name": "...", "kind": "range"|"ratio", "when": {"protocol": "LL"},
///                     "dimension": "nThreads", "min": 64, "max": 512, "other": "...", "factor": 32}],
///    "dropConstraints": ["ll128-threads"]}
/// A dimension named in "dimensions" that exists gets the given values (kind and log flag kept
/// unless given); removing a dimension drops the constraints that mention it. Throws
/// std::invalid_argument with a message naming the offending key.
SearchSpace searchSpaceFromJson(const nlohmann::json& json, const SearchSpace& base);
/// The whole space in the same shape (every dimension and constraint listed).
nlohmann::json searchSpaceToJson(const SearchSpace& space);

}  // namespace tuccl
