// Datatypes and reduction operations of the primitives: float, half, bfloat16, double, int32,
// int64, uint8 (NCCL's set minus int8/uint32/uint64/fp8) and sum, prod, min, max, avg.
//
// half and bfloat16 are our own 16-bit storage types with float conversions written in integer
// arithmetic (round to nearest even), so host and device compute bit-identical results and the
// library needs no cuda_fp16.h (NVRTC compiles it without include paths). Arithmetic on them is
// done in float and rounded once per operation, as NCCL's generic path does.
// Integer sum and product wrap around (computed unsigned: no undefined behaviour on the host).
#pragma once

#include "kernel_args.h"
#include "tuccl_device.h"

namespace tuccl::dev {

struct Half {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};

TUCCL_DEVICE_INLINE float toFloat(Half h) {
  const uint32_t sign = static_cast<uint32_t>(h.bits & 0x8000u) << 16;
  uint32_t exponent = (h.bits >> 10) & 0x1fu;
  uint32_t mantissa = h.bits & 0x3ffu;
  if (exponent == 0x1f) return bitsFloat(sign | 0x7f800000u | (mantissa << 13));  // inf, nan
  if (exponent == 0) {
    if (mantissa == 0) return bitsFloat(sign);
    // Subnormal: normalise.
    int shift = 0;
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      ++shift;
    }
    mantissa &= 0x3ffu;
    exponent = static_cast<uint32_t>(1 - shift);
    return bitsFloat(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  }
  return bitsFloat(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

TUCCL_DEVICE_INLINE Half toHalf(float value) {
  const uint32_t bits = floatBits(value);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t absBits = bits & 0x7fffffffu;
  if (absBits >= 0x7f800000u) {  // inf, nan
    return Half{static_cast<uint16_t>(sign | 0x7c00u | (absBits > 0x7f800000u ? 0x200u : 0u))};
  }
  if (absBits >= 0x477ff000u) return Half{static_cast<uint16_t>(sign | 0x7c00u)};  // rounds to inf
  if (absBits < 0x38800000u) {  // below the smallest normal half: subnormal or zero
    if (absBits < 0x33000000u) return Half{sign};  // rounds to zero
    const uint32_t exponent = absBits >> 23;
    const uint32_t mantissa = (absBits & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126u - exponent;  // 14..24
    uint32_t result = mantissa >> shift;
    const uint32_t rest = mantissa & ((1u << shift) - 1u);
    const uint32_t halfway = 1u << (shift - 1u);
    if (rest > halfway || (rest == halfway && (result & 1u))) ++result;
    return Half{static_cast<uint16_t>(sign | result)};
  }
  uint32_t result = ((absBits >> 13) - (112u << 10));
  const uint32_t rest = absBits & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (result & 1u))) ++result;
  return Half{static_cast<uint16_t>(sign | result)};
}

TUCCL_DEVICE_INLINE float toFloat(BFloat16 b) { return bitsFloat(static_cast<uint32_t>(b.bits) << 16); }

TUCCL_DEVICE_INLINE BFloat16 toBFloat16(float value) {
  const uint32_t bits = floatBits(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return BFloat16{static_cast<uint16_t>((bits >> 16) | 0x40u)};  // nan
  const uint32_t rounded = bits + 0x7fffu + ((bits >> 16) & 1u);
  return BFloat16{static_cast<uint16_t>(rounded >> 16)};
}

/// Element-wise reduction operators. Avg reduces as a sum; the kernel's epilogue divides by nRanks.
struct OpSum {
  template <typename T>
  TUCCL_DEVICE_INLINE static T apply(T a, T b) { return a + b; }
};
struct OpProd {
  template <typename T>
  TUCCL_DEVICE_INLINE static T apply(T a, T b) { return a * b; }
};
struct OpMin {
  template <typename T>
  TUCCL_DEVICE_INLINE static T apply(T a, T b) { return b < a ? b : a; }
};
struct OpMax {
  template <typename T>
  TUCCL_DEVICE_INLINE static T apply(T a, T b) { return a < b ? b : a; }
};

/// One element of type T combined with Op: 16-bit floats go through float; signed integer sums
/// and products wrap (computed in the unsigned type).
template <typename Op, typename T>
struct Combine {
  TUCCL_DEVICE_INLINE static T apply(T a, T b) { return Op::apply(a, b); }
};
template <typename Op>
struct Combine<Op, Half> {
  TUCCL_DEVICE_INLINE static Half apply(Half a, Half b) { return toHalf(Op::apply(toFloat(a), toFloat(b))); }
};
template <typename Op>
struct Combine<Op, BFloat16> {
  TUCCL_DEVICE_INLINE static BFloat16 apply(BFloat16 a, BFloat16 b) {
    return toBFloat16(Op::apply(toFloat(a), toFloat(b)));
  }
};
template <typename U, typename S>
struct WrapCombine {
  template <typename Op>
  TUCCL_DEVICE_INLINE static S apply(S a, S b) {
    return static_cast<S>(Op::apply(static_cast<U>(a), static_cast<U>(b)));
  }
};
template <>
struct Combine<OpSum, int32_t> {
  TUCCL_DEVICE_INLINE static int32_t apply(int32_t a, int32_t b) { return WrapCombine<uint32_t, int32_t>::apply<OpSum>(a, b); }
};
template <>
struct Combine<OpProd, int32_t> {
  TUCCL_DEVICE_INLINE static int32_t apply(int32_t a, int32_t b) { return WrapCombine<uint32_t, int32_t>::apply<OpProd>(a, b); }
};
template <>
struct Combine<OpSum, int64_t> {
  TUCCL_DEVICE_INLINE static int64_t apply(int64_t a, int64_t b) { return WrapCombine<uint64_t, int64_t>::apply<OpSum>(a, b); }
};
template <>
struct Combine<OpProd, int64_t> {
  TUCCL_DEVICE_INLINE static int64_t apply(int64_t a, int64_t b) { return WrapCombine<uint64_t, int64_t>::apply<OpProd>(a, b); }
};
template <>
struct Combine<OpSum, uint8_t> {
  TUCCL_DEVICE_INLINE static uint8_t apply(uint8_t a, uint8_t b) { return static_cast<uint8_t>(a + b); }
};
template <>
struct Combine<OpProd, uint8_t> {
  TUCCL_DEVICE_INLINE static uint8_t apply(uint8_t a, uint8_t b) { return static_cast<uint8_t>(a * b); }
};

/// Size in bytes of a datatype (0 for an unknown one).
TUCCL_DEVICE_INLINE int32_t elementSize(int32_t dtype) {
  switch (dtype) {
    case kUint8: return 1;
    case kFloat16:
    case kBFloat16: return 2;
    case kInt32:
    case kFloat32: return 4;
    case kInt64:
    case kFloat64: return 8;
    default: return 0;
  }
}

/// 16 bytes moved by one vector load or store (uint4 on the device: ld/st.global.v4).
#if defined(TUCCL_DEVICE_COMPILE)
typedef uint4 Pack16;
#else
struct alignas(16) Pack16 {
  uint32_t x, y, z, w;
};
#endif

TUCCL_DEVICE_INLINE bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

/// dst[i] = Op(dst[i], src[i]) for i < n, by the threads of the TB; 16-byte vectors when both
/// pointers allow it, scalars for the rest.
template <typename T, typename Op>
TUCCL_HOST_DEVICE void reduceInto(T* dst, const T* src, int64_t n) {
  constexpr int kPer = 16 / static_cast<int>(sizeof(T));
  int64_t done = 0;
  if (aligned16(dst) && aligned16(src)) {
    const int64_t packs = n / kPer;
    for (int64_t p = threadIdx.x; p < packs; p += blockDim.x) {
      union {
        Pack16 pack;
        T elems[kPer];
      } a, b;
      a.pack = reinterpret_cast<const Pack16*>(dst)[p];
      b.pack = reinterpret_cast<const Pack16*>(src)[p];
      for (int e = 0; e < kPer; ++e) a.elems[e] = Combine<Op, T>::apply(a.elems[e], b.elems[e]);
      reinterpret_cast<Pack16*>(dst)[p] = a.pack;
    }
    done = packs * kPer;
  }
  for (int64_t i = done + threadIdx.x; i < n; i += blockDim.x) dst[i] = Combine<Op, T>::apply(dst[i], src[i]);
}

template <typename T>
TUCCL_DEVICE_INLINE void reduceIntoOp(int32_t op, T* dst, const T* src, int64_t n) {
  switch (op) {
    case kProd: reduceInto<T, OpProd>(dst, src, n); break;
    case kMin: reduceInto<T, OpMin>(dst, src, n); break;
    case kMax: reduceInto<T, OpMax>(dst, src, n); break;
    default: reduceInto<T, OpSum>(dst, src, n); break;  // kSum, kAvg
  }
}

template <int32_t D>
struct TypeOf;
template <>
struct TypeOf<kUint8> { typedef uint8_t type; };
template <>
struct TypeOf<kInt32> { typedef int32_t type; };
template <>
struct TypeOf<kInt64> { typedef int64_t type; };
template <>
struct TypeOf<kFloat16> { typedef Half type; };
template <>
struct TypeOf<kBFloat16> { typedef BFloat16 type; };
template <>
struct TypeOf<kFloat32> { typedef float type; };
template <>
struct TypeOf<kFloat64> { typedef double type; };

/// dst op= src over n elements of a runtime datatype and operation (one switch per slice).
/// Compiling with -DTUCCL_ONLY_DTYPE=<DataType> (and -DTUCCL_ONLY_OP=<RedOp>) specialises the
/// kernel to one datatype (and operation), as a runtime that compiles per call configuration
/// would: smaller code, faster NVRTC.
TUCCL_DEVICE_NOINLINE void reduceElements(int32_t dtype, int32_t op, void* dst, const void* src, int64_t n) {
#if defined(TUCCL_ONLY_DTYPE)
  typedef typename TypeOf<TUCCL_ONLY_DTYPE>::type T;
  (void)dtype;
#if defined(TUCCL_ONLY_OP)
  (void)op;
  reduceIntoOp<T>(TUCCL_ONLY_OP, static_cast<T*>(dst), static_cast<const T*>(src), n);
#else
  reduceIntoOp<T>(op, static_cast<T*>(dst), static_cast<const T*>(src), n);
#endif
#else
  switch (dtype) {
    case kUint8: reduceIntoOp(op, static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(src), n); break;
    case kInt32: reduceIntoOp(op, static_cast<int32_t*>(dst), static_cast<const int32_t*>(src), n); break;
    case kInt64: reduceIntoOp(op, static_cast<int64_t*>(dst), static_cast<const int64_t*>(src), n); break;
    case kFloat16: reduceIntoOp(op, static_cast<Half*>(dst), static_cast<const Half*>(src), n); break;
    case kBFloat16: reduceIntoOp(op, static_cast<BFloat16*>(dst), static_cast<const BFloat16*>(src), n); break;
    case kFloat32: reduceIntoOp(op, static_cast<float*>(dst), static_cast<const float*>(src), n); break;
    case kFloat64: reduceIntoOp(op, static_cast<double*>(dst), static_cast<const double*>(src), n); break;
    default: break;
  }
#endif
}

template <typename T>
TUCCL_HOST_DEVICE void divideElements(T* data, int64_t n, int32_t divisor) {
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) data[i] = static_cast<T>(data[i] / static_cast<T>(divisor));
}

/// data[i] /= divisor (the avg epilogue); integers truncate toward zero.
TUCCL_DEVICE_NOINLINE void divideElements(int32_t dtype, void* data, int64_t n, int32_t divisor) {
  switch (dtype) {
    case kUint8: divideElements(static_cast<uint8_t*>(data), n, divisor); break;
    case kInt32: divideElements(static_cast<int32_t*>(data), n, divisor); break;
    case kInt64: divideElements(static_cast<int64_t*>(data), n, divisor); break;
    case kFloat32: divideElements(static_cast<float*>(data), n, divisor); break;
    case kFloat64: divideElements(static_cast<double*>(data), n, divisor); break;
    case kFloat16: {
      Half* h = static_cast<Half*>(data);
      for (int64_t i = threadIdx.x; i < n; i += blockDim.x) h[i] = toHalf(toFloat(h[i]) / static_cast<float>(divisor));
      break;
    }
    case kBFloat16: {
      BFloat16* b = static_cast<BFloat16*>(data);
      for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        b[i] = toBFloat16(toFloat(b[i]) / static_cast<float>(divisor));
      }
      break;
    }
    default: break;
  }
}

}  // namespace tuccl::dev
