#include "tune/search_space.h"

#include <algorithm>
#include <charconv>
#include <set>
#include <stdexcept>

namespace tuccl {
namespace {

[[noreturn]] void fail(const std::string& message) { throw std::invalid_argument("search space: " + message); }

std::string kindName(DimensionKind kind) { return kind == DimensionKind::Categorical ? "categorical" : "ordinal"; }

void checkDimension(const Dimension& dim) {
  if (dim.name.empty()) fail("a dimension has no name");
  if (dim.size() == 0) fail("dimension '" + dim.name + "' has no values");
  if (dim.kind == DimensionKind::Categorical) {
    std::set<std::string> seen;
    for (const std::string& c : dim.categories)
      if (!seen.insert(c).second) fail("dimension '" + dim.name + "' lists '" + c + "' twice");
  } else {
    for (size_t i = 1; i < dim.levels.size(); ++i)
      if (dim.levels[i] <= dim.levels[i - 1])
        fail("levels of ordinal dimension '" + dim.name + "' must be strictly ascending");
    if (dim.logScale && dim.levels.front() <= 0)
      fail("log-scaled dimension '" + dim.name + "' needs positive levels");
  }
}

}  // namespace

std::string Dimension::label(size_t index) const {
  return kind == DimensionKind::Categorical ? categories.at(index) : std::to_string(levels.at(index));
}

size_t Dimension::find(std::string_view text) const {
  if (kind == DimensionKind::Categorical) {
    for (size_t i = 0; i < categories.size(); ++i)
      if (categories[i] == text) return i;
    return SearchSpace::npos;
  }
  int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return SearchSpace::npos;
  auto it = std::lower_bound(levels.begin(), levels.end(), value);
  return it != levels.end() && *it == value ? static_cast<size_t>(it - levels.begin()) : SearchSpace::npos;
}

SearchSpace::SearchSpace(std::vector<Dimension> dimensions, std::vector<Constraint> constraints)
    : dimensions_(std::move(dimensions)), constraints_(std::move(constraints)) {
  std::set<std::string> names;
  for (const Dimension& dim : dimensions_) {
    checkDimension(dim);
    if (!names.insert(dim.name).second) fail("dimension '" + dim.name + "' defined twice");
  }
  auto requireKind = [&](const Constraint& c, const std::string& name, DimensionKind kind) {
    size_t d = dimensionIndex(name);
    if (d == npos) fail("constraint '" + c.name + "' names unknown dimension '" + name + "'");
    if (dimensions_[d].kind != kind)
      fail("constraint '" + c.name + "' needs " + kindName(kind) + " dimension '" + name + "'");
  };
  for (const Constraint& c : constraints_) {
    if (c.name.empty()) fail("a constraint has no name");
    if (!c.whenDimension.empty()) requireKind(c, c.whenDimension, DimensionKind::Categorical);
    requireKind(c, c.dimension, DimensionKind::Ordinal);
    if (c.kind == Constraint::Kind::Ratio) requireKind(c, c.other, DimensionKind::Ordinal);
    if (c.kind == Constraint::Kind::Range && c.min > c.max) fail("constraint '" + c.name + "' has min > max");
  }
}

size_t SearchSpace::dimensionIndex(std::string_view name) const {
  for (size_t d = 0; d < dimensions_.size(); ++d)
    if (dimensions_[d].name == name) return d;
  return npos;
}

uint64_t SearchSpace::rawSize() const {
  uint64_t total = 1;
  for (const Dimension& dim : dimensions_) {
    if (total > UINT64_MAX / dim.size()) return UINT64_MAX;
    total *= dim.size();
  }
  return total;
}

bool SearchSpace::satisfies(const Constraint& c, const Configuration& config) const {
  if (!c.whenDimension.empty()) {
    size_t w = dimensionIndex(c.whenDimension);
    if (dimensions_[w].categories[config.index[w]] != c.whenValue) return true;
  }
  size_t d = dimensionIndex(c.dimension);
  const int64_t value = dimensions_[d].levels[config.index[d]];
  if (c.kind == Constraint::Kind::Range) return value >= c.min && value <= c.max;
  size_t o = dimensionIndex(c.other);
  return static_cast<double>(value) >= c.factor * static_cast<double>(dimensions_[o].levels[config.index[o]]);
}

std::vector<std::string> SearchSpace::violations(const Configuration& config) const {
  if (config.index.size() != dimensions_.size()) return {"index out of range"};
  for (size_t d = 0; d < dimensions_.size(); ++d)
    if (config.index[d] >= dimensions_[d].size()) return {"index out of range"};
  std::vector<std::string> names;
  for (const Constraint& c : constraints_)
    if (!satisfies(c, config)) names.push_back(c.name);
  return names;
}

bool SearchSpace::isValid(const Configuration& config) const {
  if (config.index.size() != dimensions_.size()) return false;
  for (size_t d = 0; d < dimensions_.size(); ++d)
    if (config.index[d] >= dimensions_[d].size()) return false;
  return std::all_of(constraints_.begin(), constraints_.end(),
                     [&](const Constraint& c) { return satisfies(c, config); });
}

namespace {

/// Visits every configuration in lexicographic order; stops when `visit` returns false.
template <typename Visit>
void forEachConfiguration(const SearchSpace& space, Visit&& visit) {
  const size_t n = space.dimensionCount();
  if (n == 0) return;
  Configuration config{std::vector<uint32_t>(n, 0)};
  while (true) {
    if (!visit(config)) return;
    size_t d = n;
    while (d > 0) {
      --d;
      if (++config.index[d] < space.dimension(d).size()) break;
      config.index[d] = 0;
      if (d == 0) return;
    }
  }
}

}  // namespace

std::vector<Configuration> SearchSpace::enumerateValid() const {
  std::vector<Configuration> out;
  forEachConfiguration(*this, [&](const Configuration& c) {
    if (isValid(c)) out.push_back(c);
    return true;
  });
  return out;
}

uint64_t SearchSpace::validCount() const {
  uint64_t count = 0;
  forEachConfiguration(*this, [&](const Configuration& c) {
    count += isValid(c) ? 1 : 0;
    return true;
  });
  return count;
}

Configuration SearchSpace::sampleValid(std::mt19937_64& rng) const {
  if (dimensions_.empty()) throw std::runtime_error("search space has no dimensions");
  Configuration config{std::vector<uint32_t>(dimensions_.size(), 0)};
  constexpr int kAttempts = 1000;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    for (size_t d = 0; d < dimensions_.size(); ++d)
      config.index[d] = static_cast<uint32_t>(
          std::uniform_int_distribution<size_t>(0, dimensions_[d].size() - 1)(rng));
    if (isValid(config)) return config;
  }
  // Valid points are rare: draw from the grid itself.
  std::vector<Configuration> all = enumerateValid();
  if (all.empty()) throw std::runtime_error("search space has no valid configuration (check the constraints)");
  return all[std::uniform_int_distribution<size_t>(0, all.size() - 1)(rng)];
}

std::string SearchSpace::valueOf(const Configuration& config, std::string_view name) const {
  size_t d = dimensionIndex(name);
  return d == npos ? std::string() : dimensions_[d].label(config.index.at(d));
}

std::optional<Protocol> protocolOf(const SearchSpace& space, const Configuration& config) {
  return parseProtocol(space.valueOf(config, kDimProtocol));
}

int64_t SearchSpace::levelOf(const Configuration& config, std::string_view name, int64_t fallback) const {
  size_t d = dimensionIndex(name);
  if (d == npos || dimensions_[d].kind != DimensionKind::Ordinal) return fallback;
  return dimensions_[d].levels.at(config.index.at(d));
}

std::string SearchSpace::describe(const Configuration& config) const {
  std::string out;
  for (size_t d = 0; d < dimensions_.size() && d < config.index.size(); ++d) {
    if (!out.empty()) out += ' ';
    out += dimensions_[d].name + "=" +
           (config.index[d] < dimensions_[d].size() ? dimensions_[d].label(config.index[d]) : "?");
  }
  return out;
}

nlohmann::json SearchSpace::configurationToJson(const Configuration& config) const {
  nlohmann::json out = nlohmann::json::object();
  for (size_t d = 0; d < dimensions_.size(); ++d) {
    const Dimension& dim = dimensions_[d];
    if (dim.kind == DimensionKind::Categorical)
      out[dim.name] = dim.categories.at(config.index.at(d));
    else
      out[dim.name] = dim.levels.at(config.index.at(d));
  }
  return out;
}

Configuration SearchSpace::configurationFromJson(const nlohmann::json& json) const {
  if (!json.is_object()) fail("a configuration must be a JSON object");
  Configuration config{std::vector<uint32_t>(dimensions_.size(), 0)};
  for (size_t d = 0; d < dimensions_.size(); ++d) {
    const Dimension& dim = dimensions_[d];
    auto it = json.find(dim.name);
    if (it == json.end()) fail("configuration lacks dimension '" + dim.name + "'");
    std::string text = it->is_string() ? it->get<std::string>() : it->dump();
    size_t i = dim.find(text);
    if (i == npos) fail("configuration value " + it->dump() + " is not in dimension '" + dim.name + "'");
    config.index[d] = static_cast<uint32_t>(i);
  }
  for (auto it = json.begin(); it != json.end(); ++it)
    if (dimensionIndex(it.key()) == npos) fail("configuration names unknown dimension '" + it.key() + "'");
  return config;
}

std::vector<Constraint> defaultConstraints() {
  std::vector<Constraint> out;
  // TuCCL §III-C (3): N_t < 32 N_c stalls the warp schedulers.
  Constraint deadlock;
  deadlock.name = "threads-per-channel";
  deadlock.kind = Constraint::Kind::Ratio;
  deadlock.dimension = std::string(kDimThreads);
  deadlock.other = std::string(kDimChannels);
  deadlock.factor = 32;
  out.push_back(deadlock);
  // NCCL: NCCL_NTHREADS is a multiple of 32 in 64..512 for LL and Simple;
  // NCCL_LL128_NTHREADS 160..640 (reference/nccl-tuner-abi.md).
  auto range = [&](const char* name, const char* protocol, int64_t lo, int64_t hi) {
    Constraint c;
    c.name = name;
    c.kind = Constraint::Kind::Range;
    c.whenDimension = std::string(kDimProtocol);
    c.whenValue = protocol;
    c.dimension = std::string(kDimThreads);
    c.min = lo;
    c.max = hi;
    out.push_back(c);
  };
  range("ll-threads", "LL", 64, 512);
  range("ll128-threads", "LL128", 160, 640);
  range("simple-threads", "Simple", 64, 512);
  return out;
}

SearchSpace defaultSearchSpace(std::vector<std::string> algorithms, std::vector<std::string> schedulers) {
  std::vector<Dimension> dims;
  dims.push_back({std::string(kDimProtocol), DimensionKind::Categorical, {"LL", "LL128", "Simple"}, {}, false});
  dims.push_back({std::string(kDimChannels), DimensionKind::Ordinal, {}, {1, 2, 4, 8, 16}, true});
  Dimension threads{std::string(kDimThreads), DimensionKind::Ordinal, {}, {}, false};
  for (int64_t t = 32; t <= 640; t += 32) threads.levels.push_back(t);
  dims.push_back(threads);
  Dimension chunk{std::string(kDimChunkBytes), DimensionKind::Ordinal, {}, {}, true};
  for (int64_t b = 256; b <= (8 << 20); b *= 2) chunk.levels.push_back(b);
  dims.push_back(chunk);
  if (!algorithms.empty())
    dims.push_back({std::string(kDimAlgorithm), DimensionKind::Categorical, std::move(algorithms), {}, false});
  if (!schedulers.empty())
    dims.push_back({std::string(kDimScheduler), DimensionKind::Categorical, std::move(schedulers), {}, false});
  return SearchSpace(std::move(dims), defaultConstraints());
}

namespace {

Constraint constraintFromJson(const nlohmann::json& j) {
  if (!j.is_object()) fail("each entry of \"constraints\" must be an object");
  static const std::set<std::string> known = {"name", "kind", "when", "dimension", "min", "max", "other", "factor"};
  for (auto it = j.begin(); it != j.end(); ++it)
    if (!known.count(it.key())) fail("unknown constraint key '" + it.key() + "'");
  Constraint c;
  c.name = j.value("name", "");
  std::string kind = j.value("kind", "range");
  if (kind == "range")
    c.kind = Constraint::Kind::Range;
  else if (kind == "ratio")
    c.kind = Constraint::Kind::Ratio;
  else
    fail("constraint '" + c.name + "': kind must be \"range\" or \"ratio\"");
  if (auto it = j.find("when"); it != j.end()) {
    if (!it->is_object() || it->size() != 1 || !it->begin()->is_string())
      fail("constraint '" + c.name + "': \"when\" must be {\"dimension\": \"value\"}");
    c.whenDimension = it->begin().key();
    c.whenValue = it->begin()->get<std::string>();
  }
  c.dimension = j.value("dimension", "");
  if (j.contains("min")) c.min = j.at("min").get<int64_t>();
  if (j.contains("max")) c.max = j.at("max").get<int64_t>();
  c.other = j.value("other", "");
  c.factor = j.value("factor", 1.0);
  return c;
}

nlohmann::json constraintToJson(const Constraint& c) {
  nlohmann::json j = {{"name", c.name}, {"kind", c.kind == Constraint::Kind::Range ? "range" : "ratio"}};
  if (!c.whenDimension.empty()) j["when"] = {{c.whenDimension, c.whenValue}};
  j["dimension"] = c.dimension;
  if (c.kind == Constraint::Kind::Range) {
    if (c.min != std::numeric_limits<int64_t>::min()) j["min"] = c.min;
    if (c.max != std::numeric_limits<int64_t>::max()) j["max"] = c.max;
  } else {
    j["other"] = c.other;
    j["factor"] = c.factor;
  }
  return j;
}

void setValues(Dimension& dim, const nlohmann::json& values) {
  if (!values.is_array() || values.empty()) fail("dimension '" + dim.name + "': \"values\" must be a non-empty array");
  dim.categories.clear();
  dim.levels.clear();
  for (const nlohmann::json& v : values) {
    if (dim.kind == DimensionKind::Categorical) {
      if (!v.is_string()) fail("categorical dimension '" + dim.name + "' takes strings, not " + v.dump());
      dim.categories.push_back(v.get<std::string>());
    } else {
      if (!v.is_number_integer()) fail("ordinal dimension '" + dim.name + "' takes integers, not " + v.dump());
      dim.levels.push_back(v.get<int64_t>());
    }
  }
  if (dim.kind == DimensionKind::Ordinal) std::sort(dim.levels.begin(), dim.levels.end());
}

}  // namespace

SearchSpace searchSpaceFromJson(const nlohmann::json& json, const SearchSpace& base) {
  if (!json.is_object()) fail("the document must be a JSON object");
  for (auto it = json.begin(); it != json.end(); ++it)
    if (it.key() != "dimensions" && it.key() != "remove" && it.key() != "constraints" &&
        it.key() != "dropConstraints")
      fail("unknown key '" + it.key() + "' (expected dimensions, remove, constraints, dropConstraints)");
  std::vector<Dimension> dims = base.dimensions();
  std::vector<Constraint> constraints = base.constraints();

  if (auto it = json.find("remove"); it != json.end()) {
    for (const nlohmann::json& name : *it) {
      if (!name.is_string()) fail("\"remove\" lists dimension names");
      std::string n = name.get<std::string>();
      auto d = std::find_if(dims.begin(), dims.end(), [&](const Dimension& x) { return x.name == n; });
      if (d == dims.end()) fail("cannot remove unknown dimension '" + n + "'");
      dims.erase(d);
      std::erase_if(constraints, [&](const Constraint& c) {
        return c.dimension == n || c.other == n || c.whenDimension == n;
      });
    }
  }
  if (auto it = json.find("dimensions"); it != json.end()) {
    if (!it->is_array()) fail("\"dimensions\" must be an array");
    for (const nlohmann::json& j : *it) {
      if (!j.is_object() || !j.contains("name") || !j.at("name").is_string())
        fail("each dimension needs a \"name\"");
      for (auto k = j.begin(); k != j.end(); ++k)
        if (k.key() != "name" && k.key() != "kind" && k.key() != "values" && k.key() != "log")
          fail("unknown dimension key '" + k.key() + "'");
      std::string name = j.at("name").get<std::string>();
      auto d = std::find_if(dims.begin(), dims.end(), [&](const Dimension& x) { return x.name == name; });
      Dimension fresh{name, DimensionKind::Categorical, {}, {}, false};
      Dimension& dim = d != dims.end() ? *d : fresh;
      if (j.contains("kind")) {
        std::string kind = j.at("kind").get<std::string>();
        if (kind != "categorical" && kind != "ordinal") fail("dimension '" + name + "': unknown kind '" + kind + "'");
        dim.kind = kind == "ordinal" ? DimensionKind::Ordinal : DimensionKind::Categorical;
      } else if (d == dims.end()) {
        fail("new dimension '" + name + "' needs a \"kind\"");
      }
      if (j.contains("log")) dim.logScale = j.at("log").get<bool>();
      if (!j.contains("values")) fail("dimension '" + name + "' needs \"values\"");
      setValues(dim, j.at("values"));
      if (d == dims.end()) dims.push_back(std::move(fresh));
    }
  }
  if (auto it = json.find("dropConstraints"); it != json.end()) {
    for (const nlohmann::json& name : *it) {
      std::string n = name.get<std::string>();
      if (std::erase_if(constraints, [&](const Constraint& c) { return c.name == n; }) == 0)
        fail("cannot drop unknown constraint '" + n + "'");
    }
  }
  if (auto it = json.find("constraints"); it != json.end()) {
    if (!it->is_array()) fail("\"constraints\" must be an array");
    for (const nlohmann::json& j : *it) constraints.push_back(constraintFromJson(j));
  }
  return SearchSpace(std::move(dims), std::move(constraints));
}

nlohmann::json searchSpaceToJson(const SearchSpace& space) {
  nlohmann::json dims = nlohmann::json::array();
  for (const Dimension& dim : space.dimensions()) {
    nlohmann::json j = {{"name", dim.name}, {"kind", kindName(dim.kind)}};
    if (dim.kind == DimensionKind::Categorical)
      j["values"] = dim.categories;
    else {
      j["values"] = dim.levels;
      j["log"] = dim.logScale;
    }
    dims.push_back(std::move(j));
  }
  nlohmann::json constraints = nlohmann::json::array();
  for (const Constraint& c : space.constraints()) constraints.push_back(constraintToJson(c));
  return {{"dimensions", dims}, {"constraints", constraints}};
}

}  // namespace tuccl
