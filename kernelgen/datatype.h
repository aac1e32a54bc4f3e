// Datatypes and reduction operations of collective calls, as the host side names them
// (kernelgen/device/datatypes.h implements them on the device and in the host shim).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace tuccl {

enum class DataType : uint8_t { Float32, Float16, BFloat16, Float64, Int32, Int64, Uint8 };
enum class ReduceOp : uint8_t { Sum, Prod, Min, Max, Avg };

/// "float32", "float16", "bfloat16", "float64", "int32", "int64", "uint8"; "sum", ... "avg".
std::string_view dataTypeName(DataType type);
std::string_view reduceOpName(ReduceOp op);
/// Accepts the names above and NCCL's ("float", "half", "bf16", "double", "int", "ncclFloat32", ...).
std::optional<DataType> parseDataType(std::string_view name);
std::optional<ReduceOp> parseReduceOp(std::string_view name);

/// The device library's numbering (kernelgen/device/kernel_args.h: dev::DataType, dev::RedOp).
int32_t deviceDataType(DataType type);
int32_t deviceReduceOp(ReduceOp op);

}  // namespace tuccl
