// The device library's numbering of the vocabulary's datatypes and reduction operations
// (kernelgen/device/kernel_args.h: dev::DataType, dev::RedOp); the names are in
// support/vocabulary.h.
#pragma once

#include <cstdint>

#include "support/vocabulary.h"

namespace tuccl {

int32_t deviceDataType(DataType type);
int32_t deviceReduceOp(ReduceOp op);

}  // namespace tuccl
