#include "lang/algorithm_equivalence.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace tuccl {
namespace {

// A chunk's value: the sorted input chunks reduced into it; {kNeverWritten} for a chunk the call
// found holding something other than an input.
using Value = std::vector<int64_t>;
constexpr int64_t kNeverWritten = -1;

struct SlotKey {
  int32_t rank;
  BufferKind buffer;
  int32_t index;
  friend bool operator<(const SlotKey& a, const SlotKey& b) {
    return std::tie(a.rank, a.buffer, a.index) < std::tie(b.rank, b.buffer, b.index);
  }
};

// The symbolic state of an algorithm's storage after its operations.
class SymbolicRun {
 public:
  explicit SymbolicRun(const Algorithm& algorithm) : algorithm_(algorithm) {
    const int32_t inputs = algorithm.chunks(BufferKind::Input);
    for (int32_t rank = 0; rank < algorithm.nRanks; ++rank) {
      for (int32_t index = 0; index < inputs; ++index) {
        state_[storage(rank, BufferKind::Input, index)] = {int64_t{rank} * inputs + index};
      }
    }
    std::vector<const Operation*> ops;
    ops.reserve(algorithm.ops.size());
    for (const Operation& op : algorithm.ops) ops.push_back(&op);
    std::stable_sort(ops.begin(), ops.end(), [](const Operation* a, const Operation* b) { return a->step < b->step; });
    for (size_t begin = 0; begin < ops.size();) {
      size_t end = begin;
      while (end < ops.size() && ops[end]->step == ops[begin]->step) ++end;
      runStep(ops, begin, end);
      begin = end;
    }
  }

  // The value of chunk `index` of `buffer` (the rank's view) after the run.
  Value value(int32_t rank, BufferKind buffer, int32_t index) const {
    auto it = state_.find(storage(rank, buffer, index));
    return it == state_.end() ? Value{kNeverWritten} : it->second;
  }

 private:
  SlotKey storage(int32_t rank, BufferKind buffer, int32_t index) const {
    const StorageSlot slot = inPlaceStorage(algorithm_, rank, buffer, index);
    return {rank, slot.buffer, slot.index};
  }

  // Every operation of one step reads the state before the step.
  void runStep(const std::vector<const Operation*>& ops, size_t begin, size_t end) {
    std::vector<std::pair<SlotKey, Value>> reads;
    for (size_t i = begin; i < end; ++i) {
      const Operation& op = *ops[i];
      for (int32_t k = 0; k < op.count; ++k) {
        reads.emplace_back(storage(op.dstRank, op.dstBuffer, op.dstIndex + k),
                           value(op.srcRank, op.srcBuffer, op.srcIndex + k));
      }
    }
    size_t next = 0;
    for (size_t i = begin; i < end; ++i) {
      const Operation& op = *ops[i];
      for (int32_t k = 0; k < op.count; ++k, ++next) {
        auto& [key, incoming] = reads[next];
        if (op.kind == OpKind::Copy) {
          state_[key] = std::move(incoming);
          continue;
        }
        auto it = state_.find(key);
        Value current = it == state_.end() ? Value{kNeverWritten} : it->second;
        Value merged;
        merged.reserve(current.size() + incoming.size());
        std::merge(current.begin(), current.end(), incoming.begin(), incoming.end(), std::back_inserter(merged));
        state_[key] = std::move(merged);
      }
    }
  }

  const Algorithm& algorithm_;
  std::map<SlotKey, Value> state_;
};

std::string describe(const Value& value, int32_t inputs) {
  if (value.empty()) return "{}";
  std::string out = "{";
  for (size_t i = 0; i < value.size(); ++i) {
    if (i > 0) out += ", ";
    if (value[i] == kNeverWritten) {
      out += "never written";
    } else {
      out += "r" + std::to_string(value[i] / inputs) + ".i" + std::to_string(value[i] % inputs);
    }
    if (i == 7 && value.size() > 9) {
      out += ", ... " + std::to_string(value.size() - 8) + " more";
      break;
    }
  }
  return out + "}";
}

Status differ(const std::string& what, const std::string& expected, const std::string& actual) {
  return makeError(ErrorCode::InvalidInput, what + ": " + expected + " vs " + actual);
}

}  // namespace

Status compareAlgorithmSemantics(const Algorithm& expected, const Algorithm& actual) {
  if (expected.collective != actual.collective) {
    return differ("collective", std::string(collectiveName(expected.collective)),
                  std::string(collectiveName(actual.collective)));
  }
  if (expected.nRanks != actual.nRanks) {
    return differ("ranks", std::to_string(expected.nRanks), std::to_string(actual.nRanks));
  }
  if ((expected.collective == Collective::Broadcast || expected.collective == Collective::Reduce) &&
      expected.root != actual.root) {
    return differ("root", std::to_string(expected.root), std::to_string(actual.root));
  }
  if (expected.inPlace != actual.inPlace) {
    return differ("call layout", expected.inPlace ? "in place" : "out of place",
                  actual.inPlace ? "in place" : "out of place");
  }
  for (BufferKind buffer : {BufferKind::Input, BufferKind::Output}) {
    if (expected.chunks(buffer) != actual.chunks(buffer)) {
      return differ(std::string(bufferName(buffer)) + " chunks", std::to_string(expected.chunks(buffer)),
                    std::to_string(actual.chunks(buffer)));
    }
  }
  const SymbolicRun a(expected);
  const SymbolicRun b(actual);
  const int32_t inputs = std::max(1, expected.chunks(BufferKind::Input));
  for (int32_t rank = 0; rank < expected.nRanks; ++rank) {
    for (BufferKind buffer : {BufferKind::Output, BufferKind::Input}) {
      for (int32_t index = 0; index < expected.chunks(buffer); ++index) {
        const Value x = a.value(rank, buffer, index);
        const Value y = b.value(rank, buffer, index);
        if (x != y) {
          return differ("rank " + std::to_string(rank) + " " + std::string(bufferName(buffer)) + " chunk " +
                            std::to_string(index),
                        describe(x, inputs), describe(y, inputs));
        }
      }
    }
  }
  return Status();
}

}  // namespace tuccl
