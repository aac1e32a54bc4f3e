// One vocabulary for protocols: the kernels number them as support/vocabulary.h does, and the
// simulator's protocol efficiency (payload per wire byte) is what the kernels' staging layout
// actually carries (LL: 4 data bytes per 8-byte line; LL128: 120 per 128-byte line).
#include <gtest/gtest.h>

#include "kernelgen/datatype.h"
#include "kernelgen/device/protocols.h"
#include "sim/cost_model.h"

namespace tuccl {
namespace {

TEST(ProtocolVocabulary, TheKernelsNumberProtocolsAsTheVocabulary) {
  EXPECT_EQ(deviceProtocol(Protocol::LL), dev::kProtoLL);
  EXPECT_EQ(deviceProtocol(Protocol::LL128), dev::kProtoLL128);
  EXPECT_EQ(deviceProtocol(Protocol::Simple), dev::kProtoSimple);
  for (int p = 0; p < kProtocols; ++p) {
    const auto protocol = static_cast<Protocol>(p);
    EXPECT_EQ(deviceProtocol(protocol), p) << protocolName(protocol);
  }
}

TEST(ProtocolVocabulary, TheSimulatorsEfficiencyIsTheKernelsLineLayout) {
  const CostModel model = defaultCostModel();
  const int64_t bytes = 64 * 1920;  // whole LL pairs and LL128 lines
  for (int p = 0; p < kProtocols; ++p) {
    const auto protocol = static_cast<Protocol>(p);
    const double carried = static_cast<double>(bytes) / static_cast<double>(dev::stagedBytes(deviceProtocol(protocol), bytes));
    EXPECT_DOUBLE_EQ(carried, model.protocol(protocol).efficiency) << protocolName(protocol);
    EXPECT_DOUBLE_EQ(static_cast<double>(bytes) / static_cast<double>(stagingSlotBytes(protocol, bytes)),
                     model.protocol(protocol).efficiency)
        << protocolName(protocol);
  }
}

}  // namespace
}  // namespace tuccl
