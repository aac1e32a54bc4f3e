// The device numbering of datatypes and operations (datatype.h).
#include "kernelgen/datatype.h"

#include "kernelgen/device/kernel_args.h"

namespace tuccl {

// One vocabulary: the kernels number protocols as support/vocabulary.h (and NCCL) do.
static_assert(dev::kProtoLL == static_cast<int32_t>(Protocol::LL));
static_assert(dev::kProtoLL128 == static_cast<int32_t>(Protocol::LL128));
static_assert(dev::kProtoSimple == static_cast<int32_t>(Protocol::Simple));

int32_t deviceDataType(DataType type) {
  switch (type) {
    case DataType::Float32: return dev::kFloat32;
    case DataType::Float16: return dev::kFloat16;
    case DataType::BFloat16: return dev::kBFloat16;
    case DataType::Float64: return dev::kFloat64;
    case DataType::Int32: return dev::kInt32;
    case DataType::Int64: return dev::kInt64;
    case DataType::Uint8: return dev::kUint8;
    case DataType::Int8: return dev::kInt8;
    case DataType::Uint32: return dev::kUint32;
    case DataType::Uint64: return dev::kUint64;
    case DataType::Float8E4M3: return dev::kFloat8E4M3;
    case DataType::Float8E5M2: return dev::kFloat8E5M2;
  }
  return dev::kFloat32;
}

int32_t deviceReduceOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return dev::kSum;
    case ReduceOp::Prod: return dev::kProd;
    case ReduceOp::Min: return dev::kMin;
    case ReduceOp::Max: return dev::kMax;
    case ReduceOp::Avg: return dev::kAvg;
  }
  return dev::kSum;
}

int32_t deviceProtocol(Protocol protocol) { return static_cast<int32_t>(protocol); }

int64_t stagingSlotBytes(Protocol protocol, int64_t sliceBytes) {
  return dev::stagingSlotBytes(deviceProtocol(protocol), sliceBytes);
}

}  // namespace tuccl
