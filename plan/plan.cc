// Names of the primitive kinds (plan.h).
#include "plan/plan.h"

#include <array>

namespace tuccl {
namespace {

constexpr std::array<std::string_view, 5> kPrimitiveNames = {"send", "recv", "recvReduceCopy", "copy", "reduce"};

}  // namespace

std::string_view primitiveName(PrimitiveKind kind) {
  const auto index = static_cast<size_t>(kind);
  return index < kPrimitiveNames.size() ? kPrimitiveNames[index] : std::string_view("?");
}

std::optional<PrimitiveKind> parsePrimitiveKind(std::string_view name) {
  for (size_t i = 0; i < kPrimitiveNames.size(); ++i) {
    if (kPrimitiveNames[i] == name) return static_cast<PrimitiveKind>(i);
  }
  return std::nullopt;
}

bool isReceive(PrimitiveKind kind) { return kind == PrimitiveKind::Recv || kind == PrimitiveKind::RecvReduceCopy; }

bool isLocal(PrimitiveKind kind) { return kind == PrimitiveKind::Copy || kind == PrimitiveKind::Reduce; }

}  // namespace tuccl
