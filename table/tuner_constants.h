// NCCL's cost-model constants as a table names them (nccl-tuner-abi.md, nccl-api.md "Tuner v7").
//
// In:  a constant's name ("baseLatencies.RING.LL", "hwLatencies.NET.TREE.SIMPLE",
//      "llMaxBws.HOPPER.2", "perChMaxTreeBws.RUBIN.4") and the layout of the struct NCCL hands init.
// Out: the index of that double inside the struct, or the canonical name of an index.
//
// Layouts: ncclTunerConstants_v5_t (tuner v5, v6) has 4 compute-capability rows (VOLTA, AMPERE,
// HOPPER, BLACKWELL) in each bandwidth array, 144 doubles; ncclTunerConstants_v7_t (tuner v7) adds
// RUBIN as row 4, 159 doubles, so every bandwidth array after the first moves. A table may name
// any v7 constant; a RUBIN row is simply not there for a v5/v6 NCCL.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tuccl {

enum class TunerConstantsLayout : uint8_t {
  V5,  ///< ncclTunerConstants_v5_t: tuner v5 and v6
  V7,  ///< ncclTunerConstants_v7_t: tuner v7
};

inline constexpr uint32_t kNumTunerConstantsV5 = 7 * 3 + 3 * 7 * 3 + 5 * 4 * 3;  // 144
inline constexpr uint32_t kNumTunerConstantsV7 = 7 * 3 + 3 * 7 * 3 + 5 * 5 * 3;  // 159

/// Doubles in the layout's struct.
uint32_t tunerConstantCount(TunerConstantsLayout layout);
/// The index (in doubles) of the named constant in `layout`; nullopt for a name that is not a
/// constant of that layout. Names are case-insensitive; the scale "4+" is accepted for "4".
std::optional<uint32_t> tunerConstantOffset(std::string_view name, TunerConstantsLayout layout);
/// The canonical name of the double at `offset` of `layout` ("baseLatencies.RING.LL"); "?" past
/// the end.
std::string tunerConstantName(uint32_t offset, TunerConstantsLayout layout);
/// The canonical spelling of a constant's name (the newest layout's); nullopt when it names none.
std::optional<std::string> canonicalTunerConstantName(std::string_view name);

}  // namespace tuccl
