// Element values of the kernels' datatypes on the host: one element read as a float64 and written
// back, with the device library's own half, bfloat16 and fp8 (kernelgen/device/datatypes.h), so the
// reference and the comparison of a CPU run see exactly what the kernels stored.
//
// In:  a DataType and element bytes, or a float64 value.
// Out: the value, the stored bytes, the type's unit roundoff, integer wrap-around, a printed value.
#pragma once

#include <cstdint>
#include <string>

#include "support/vocabulary.h"

namespace tuccl {

/// Int8, Uint8, Int32, Uint32, Int64, Uint64.
bool isIntegerType(DataType type);
/// Uint8, Uint32, Uint64.
bool isUnsignedType(DataType type);

/// An integer type's element holding `value` (its integer part, wrapped to the type's width as a
/// conversion through the unsigned type does: -1 is uint32's 4294967295), as 64 bits: signed
/// types sign-extended, uint8 / uint32 zero-extended, uint64 its bits (values of 2^63 and above
/// wrap into negative int64s; 2^64 and above, all ones). For the reference and the writes of test
/// inputs.
int64_t integerOf(DataType type, double value);
/// The value of integerOf's 64 bits as a float64 (uint64 reads them unsigned).
double integerValue(DataType type, int64_t bits);

/// Unit roundoff of the type's arithmetic (2^-24 for float32, 2^-4 for fp8 e4m3, ...); 0 for
/// integers.
double unitRoundoff(DataType type);

/// The element at `element` as a float64 (exact for every type but int64 beyond 2^53).
double readElement(DataType type, const void* element);

/// Stores `value` rounded to the type (integers truncate, as a C++ conversion does; int8, uint32
/// and uint64 also wrap to their width, integerOf; fp8 saturates).
void writeElement(DataType type, void* element, double value);

/// An integer result wrapped to the type's width, as the kernels compute it (sum and product are
/// computed unsigned); uint64 reads the bits unsigned.
double wrapInteger(DataType type, int64_t value);

/// The value as a test report prints it: integers exactly, floats with the digits that tell
/// neighbouring values apart (17 for float64, 9 for the others).
std::string formatElement(DataType type, double value);

}  // namespace tuccl
