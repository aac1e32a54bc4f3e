// Element values of the kernels' datatypes on the host: one element read as a float64 and written
// back, with the device library's own half and bfloat16 (kernelgen/device/datatypes.h), so the
// reference and the comparison of a CPU run see exactly what the kernels stored.
//
// In:  a DataType and element bytes, or a float64 value.
// Out: the value, the stored bytes, the type's unit roundoff, integer wrap-around, a printed value.
#pragma once

#include <cstdint>
#include <string>

#include "support/vocabulary.h"

namespace tuccl {

/// Int32, Int64, Uint8.
bool isIntegerType(DataType type);

/// Unit roundoff of the type's arithmetic (2^-24 for float32, ...); 0 for integers.
double unitRoundoff(DataType type);

/// The element at `element` as a float64 (exact for every type but int64 beyond 2^53).
double readElement(DataType type, const void* element);

/// Stores `value` rounded to the type (integers truncate, as a C++ conversion does).
void writeElement(DataType type, void* element, double value);

/// An integer result wrapped to the type's width, as the kernels compute it (sum and product are
/// computed unsigned).
double wrapInteger(DataType type, int64_t value);

/// The value as a test report prints it: integers exactly, floats with the digits that tell
/// neighbouring values apart (17 for float64, 9 for the others).
std::string formatElement(DataType type, double value);

}  // namespace tuccl
