// The device numbering of datatypes and operations (datatype.h).
#include "kernelgen/datatype.h"

#include "kernelgen/device/kernel_args.h"

namespace tuccl {

int32_t deviceDataType(DataType type) {
  switch (type) {
    case DataType::Float32: return dev::kFloat32;
    case DataType::Float16: return dev::kFloat16;
    case DataType::BFloat16: return dev::kBFloat16;
    case DataType::Float64: return dev::kFloat64;
    case DataType::Int32: return dev::kInt32;
    case DataType::Int64: return dev::kInt64;
    case DataType::Uint8: return dev::kUint8;
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

}  // namespace tuccl
