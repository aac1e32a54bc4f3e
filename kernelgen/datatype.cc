// Datatype and operation names (datatype.h).
#include "kernelgen/datatype.h"

#include <algorithm>
#include <cctype>
#include <string>

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

std::string_view dataTypeName(DataType type) {
  switch (type) {
    case DataType::Float32: return "float32";
    case DataType::Float16: return "float16";
    case DataType::BFloat16: return "bfloat16";
    case DataType::Float64: return "float64";
    case DataType::Int32: return "int32";
    case DataType::Int64: return "int64";
    case DataType::Uint8: return "uint8";
  }
  return "?";
}

std::string_view reduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Prod: return "prod";
    case ReduceOp::Min: return "min";
    case ReduceOp::Max: return "max";
    case ReduceOp::Avg: return "avg";
  }
  return "?";
}

std::optional<DataType> parseDataType(std::string_view name) {
  std::string s(name);
  if (s.rfind("nccl", 0) == 0) s = s.substr(4);
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (s == "float32" || s == "float" || s == "fp32" || s == "f32") return DataType::Float32;
  if (s == "float16" || s == "half" || s == "fp16" || s == "f16") return DataType::Float16;
  if (s == "bfloat16" || s == "bf16") return DataType::BFloat16;
  if (s == "float64" || s == "double" || s == "fp64" || s == "f64") return DataType::Float64;
  if (s == "int32" || s == "int" || s == "i32") return DataType::Int32;
  if (s == "int64" || s == "i64") return DataType::Int64;
  if (s == "uint8" || s == "u8") return DataType::Uint8;
  return std::nullopt;
}

std::optional<ReduceOp> parseReduceOp(std::string_view name) {
  std::string s(name);
  if (s.rfind("nccl", 0) == 0) s = s.substr(4);
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (s == "sum") return ReduceOp::Sum;
  if (s == "prod") return ReduceOp::Prod;
  if (s == "min") return ReduceOp::Min;
  if (s == "max") return ReduceOp::Max;
  if (s == "avg") return ReduceOp::Avg;
  return std::nullopt;
}

}  // namespace tuccl
