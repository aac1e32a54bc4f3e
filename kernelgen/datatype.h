// The device library's numbering of the vocabulary's datatypes, reduction operations and
// protocols (kernelgen/device/kernel_args.h: dev::DataType, dev::RedOp, dev::ProtocolId); the
// names are in support/vocabulary.h.
#pragma once

#include <cstdint>

#include "support/vocabulary.h"

namespace tuccl {

int32_t deviceDataType(DataType type);
int32_t deviceReduceOp(ReduceOp op);
/// The same number: the device's ProtocolId is the vocabulary's Protocol (checked at compile time).
int32_t deviceProtocol(Protocol protocol);

/// Bytes of a staging slot for slices of up to `sliceBytes` in `protocol`
/// (dev::stagingSlotBytes: the host executor, libtuccl's staging and the kernels agree).
int64_t stagingSlotBytes(Protocol protocol, int64_t sliceBytes);

}  // namespace tuccl
