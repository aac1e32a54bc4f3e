// The LL and LL128 protocols: how a slice's bytes sit in a staging slot when the data flag
// travels inside the data (NCCL's low-latency protocols; docs/kernels.md, "Protocols").
//
//   LL     8-byte lines, each 4 data bytes + a 4-byte flag, stored and loaded as one 8-byte
//          word (NCCL LL: an 8-byte store is never torn, so a line whose flag is new holds new
//          data). Written two lines per 16-byte store, as NCCL packs them. 50% of the slot is
//          data; no fence and no separate data flag on the receiver's path.
//   LL128  128-byte lines, 120 data bytes + an 8-byte flag in the last 8 bytes (NCCL LL128:
//          a warp stores a line as 8 lanes x 16 bytes in one instruction, and a 128-byte store
//          reaches the peer whole over NVLink). 94% of the slot is data.
//
// The flag of slice k of a ring is derived from k (k + 1; LL keeps its low 32 bits), so the lines
// a slot still holds from slice k - nSlots, or the zeroed staging of a fresh ring, never read as
// slice k. Credits work as in Simple: the sender writes slot k % nSlots once `consumed` reached
// k + 1 - nSlots, so a receiver reads a slot's lines only while the sender leaves them alone.
//
// The host shim keeps the ordering: an LL line is one 8-byte std::atomic_ref store (release) and
// load (acquire); an LL128 line's 120 data bytes are plain stores followed by the flag word's
// release store, read back by an acquire load of the flag before the data — the CPU has no
// 128-byte atomic store, and release/acquire gives exactly what the GPU's whole-line store
// gives: a reader that sees the new flag sees the line's new data.
//
// Every slice carries at least one line (an empty slice is a line without data), so every
// receive has a flag to wait for. The sender still writes the slot's tag (before the lines) and
// raises `posted` (after them): the receiver checks the tag once the lines arrived (order
// mismatches are reported, as in Simple) and the inter-node proxy forwards by `posted`.
#pragma once

#include "datatypes.h"
#include "flags.h"
#include "kernel_args.h"
#include "tuccl_device.h"

namespace tuccl::dev {

/// The protocol a kernel runs: KernelArgs::protocol, or the one a specialised build was
/// compiled for (-DTUCCL_ONLY_PROTOCOL=<ProtocolId>).
TUCCL_DEVICE_INLINE int32_t protocolOf(const KernelArgs& args) {
#if defined(TUCCL_ONLY_PROTOCOL)
  (void)args;
  return TUCCL_ONLY_PROTOCOL;
#else
  return args.protocol;
#endif
}

inline constexpr int64_t kLLPairBytes = 16;  ///< two 8-byte lines (NCCL LL: two per 16-byte store)
inline constexpr int64_t kLLPairData = 8;    ///< their data bytes
inline constexpr int64_t kLL128LineBytes = 128;
inline constexpr int64_t kLL128LineData = 120;  ///< NCCL LL128: 15 of a line's 16 8-byte words carry data
/// Payload bytes a receiver that reduces handles at a time (a multiple of both lines' data and
/// of every element size); the lines of one piece are decoded into a TB-local buffer first.
inline constexpr int64_t kLineBounceBytes = 32 * kLL128LineData;

/// LL line pairs of a slice of `bytes` (at least one).
TUCCL_DEVICE_INLINE int64_t llPairs(int64_t bytes) { return bytes > 0 ? (bytes + kLLPairData - 1) / kLLPairData : 1; }
/// LL128 lines of a slice of `bytes` (at least one).
TUCCL_DEVICE_INLINE int64_t ll128Lines(int64_t bytes) {
  return bytes > 0 ? (bytes + kLL128LineData - 1) / kLL128LineData : 1;
}
/// Bytes of the slot a slice of `bytes` occupies (what the inter-node proxy forwards).
TUCCL_DEVICE_INLINE int64_t stagedBytes(int32_t protocol, int64_t bytes) {
  if (protocol == kProtoLL) return llPairs(bytes) * kLLPairBytes;
  if (protocol == kProtoLL128) return ll128Lines(bytes) * kLL128LineBytes;
  return bytes;
}
/// The flag of slice k of a ring: never 0 for the first 2^32 - 1 slices, and never the flag of
/// slice k - nSlots.
TUCCL_DEVICE_INLINE uint32_t llFlag(uint64_t k) { return static_cast<uint32_t>(k + 1); }
TUCCL_DEVICE_INLINE uint64_t ll128Flag(uint64_t k) { return k + 1; }

// ---- Bytes in and out of words (slices start anywhere: remainders make them unaligned) ------

/// The n (0..8) bytes at p as a little-endian word, zero-padded.
TUCCL_DEVICE_INLINE uint64_t readWord(const char* p, int64_t n) {
#if defined(TUCCL_DEVICE_COMPILE)
  if (n == 8 && (reinterpret_cast<uintptr_t>(p) & 7u) == 0) return *reinterpret_cast<const uint64_t*>(p);
  uint64_t word = 0;
  for (int64_t i = 0; i < n; ++i) word |= static_cast<uint64_t>(static_cast<uint8_t>(p[i])) << (8 * i);
  return word;
#else
  uint64_t word = 0;
  if (n > 0) std::memcpy(&word, p, static_cast<size_t>(n));  // the host is little-endian, as the GPU
  return word;
#endif
}

/// Writes the first n (0..8) bytes of a little-endian word to p.
TUCCL_DEVICE_INLINE void writeWord(char* p, uint64_t word, int64_t n) {
#if defined(TUCCL_DEVICE_COMPILE)
  if (n == 8 && (reinterpret_cast<uintptr_t>(p) & 7u) == 0) {
    *reinterpret_cast<uint64_t*>(p) = word;
    return;
  }
  for (int64_t i = 0; i < n; ++i) p[i] = static_cast<char>((word >> (8 * i)) & 0xffu);
#else
  if (n > 0) std::memcpy(p, &word, static_cast<size_t>(n));
#endif
}

TUCCL_DEVICE_INLINE int64_t clampBytes(int64_t n, int64_t most) { return n < 0 ? 0 : n > most ? most : n; }

// ---- LL: 8-byte lines, stored two per 16-byte store ------------------------------------------

/// Stores a pair of LL lines {lo data, flag, hi data, flag}.
TUCCL_DEVICE_INLINE void storeLLPair(char* at, uint64_t data, uint32_t flag) {
  const uint64_t line0 = (static_cast<uint64_t>(flag) << 32) | (data & 0xffffffffu);
  const uint64_t line1 = (static_cast<uint64_t>(flag) << 32) | (data >> 32);
#if defined(TUCCL_DEVICE_COMPILE)
  asm volatile("st.volatile.global.v2.u64 [%0], {%1, %2};" ::"l"(at), "l"(line0), "l"(line1) : "memory");
#elif defined(TUCCL_CUDA_COMPILER)
  reinterpret_cast<volatile uint64_t*>(at)[0] = line0;
  reinterpret_cast<volatile uint64_t*>(at)[1] = line1;
#else
  std::atomic_ref<uint64_t>(reinterpret_cast<uint64_t*>(at)[0]).store(line0, std::memory_order_release);
  std::atomic_ref<uint64_t>(reinterpret_cast<uint64_t*>(at)[1]).store(line1, std::memory_order_release);
#endif
}

/// Loads a pair of LL lines; true (with their 8 data bytes) when both carry `flag`, else the
/// flag of the first stale line in `seen`.
TUCCL_DEVICE_INLINE bool loadLLPair(const char* at, uint32_t flag, uint64_t& data, uint64_t& seen) {
  uint64_t line0, line1;
#if defined(TUCCL_DEVICE_COMPILE)
  asm volatile("ld.volatile.global.v2.u64 {%0, %1}, [%2];" : "=l"(line0), "=l"(line1) : "l"(at) : "memory");
#elif defined(TUCCL_CUDA_COMPILER)
  line0 = reinterpret_cast<const volatile uint64_t*>(at)[0];
  line1 = reinterpret_cast<const volatile uint64_t*>(at)[1];
#else
  uint64_t* words = reinterpret_cast<uint64_t*>(const_cast<char*>(at));
  line0 = std::atomic_ref<uint64_t>(words[0]).load(std::memory_order_acquire);
  line1 = std::atomic_ref<uint64_t>(words[1]).load(std::memory_order_acquire);
#endif
  const bool fresh0 = (line0 >> 32) == flag;
  const bool fresh1 = (line1 >> 32) == flag;
  seen = fresh0 ? line1 >> 32 : line0 >> 32;
  data = (line0 & 0xffffffffu) | (line1 << 32);
  return fresh0 && fresh1;
}

/// Writes a slice of `bytes` as LL lines into `slot` (every thread of the TB).
TUCCL_DEVICE_INLINE void writeLLSlice(char* slot, const char* src, int64_t bytes, uint64_t k) {
  const uint32_t flag = llFlag(k);
  const int64_t pairs = llPairs(bytes);
  for (int64_t i = threadIdx.x; i < pairs; i += blockDim.x) {
    const int64_t at = i * kLLPairData;
    storeLLPair(slot + i * kLLPairBytes, readWord(src + at, clampBytes(bytes - at, kLLPairData)), flag);
  }
}

/// Waits for the LL lines of payload bytes [begin, begin + n) of a slice of `bytes` and writes
/// their data to out[0, n) (every thread of the TB; an empty slice waits for its one line).
/// False, with the report filled, when a wait gave up.
TUCCL_DEVICE_INLINE bool readLLPiece(const KernelArgs& args, TbReport& report, int32_t ring, const char* slot,
                                     uint64_t k, int64_t bytes, int64_t begin, int64_t n, char* out) {
  const uint32_t flag = llFlag(k);
  const int64_t first = begin / kLLPairData;
  const int64_t end = bytes > 0 ? (begin + n + kLLPairData - 1) / kLLPairData : 1;
  bool ok = true;
  for (int64_t i = first + threadIdx.x; ok && i < end; i += blockDim.x) {
    const char* at = slot + i * kLLPairBytes;
    uint64_t data = 0;
    ok = spinUntil(
        args, report, [&](uint64_t& seen) { return loadLLPair(at, flag, data, seen); }, flag,
        WaitSite{kWaitLine, ring, -1, -1});
    const int64_t offset = i * kLLPairData - begin;
    if (ok) writeWord(out + offset, data, clampBytes(n - offset, kLLPairData));
  }
  return tbAll(ok);
}

// ---- LL128: 128-byte lines, 120 data bytes + an 8-byte flag ----------------------------------

/// A line's flag word (its last 8 bytes).
TUCCL_DEVICE_INLINE uint64_t* ll128FlagWord(const char* line) {
  return reinterpret_cast<uint64_t*>(const_cast<char*>(line + kLL128LineData));
}

#if defined(TUCCL_DEVICE_COMPILE)
/// The 16 bytes of part `part` (0..7) of line `line` of a slice: data, and the flag in part 7's
/// upper half.
TUCCL_DEVICE_INLINE void ll128Part(const char* src, int64_t bytes, int64_t line, int32_t part, uint64_t flag,
                                   uint64_t& lo, uint64_t& hi) {
  const int64_t at = line * kLL128LineData + part * 16;
  lo = readWord(src + at, clampBytes(bytes - at, 8));
  hi = part == 7 ? flag : readWord(src + at + 8, clampBytes(bytes - at - 8, 8));
}
TUCCL_DEVICE_INLINE void store16(char* at, uint64_t lo, uint64_t hi) {
  asm volatile("st.volatile.global.v2.u64 [%0], {%1, %2};" ::"l"(at), "l"(lo), "l"(hi) : "memory");
}
TUCCL_DEVICE_INLINE void load16(const char* at, uint64_t& lo, uint64_t& hi) {
  asm volatile("ld.volatile.global.v2.u64 {%0, %1}, [%2];" : "=l"(lo), "=l"(hi) : "l"(at) : "memory");
}
/// Threads of the TB's whole warps: the ones that move LL128 lines 8 lanes to a line (NCCL's
/// thread counts are multiples of 32; a TB of fewer threads moves whole lines per thread).
TUCCL_DEVICE_INLINE int64_t warpThreads() { return static_cast<int64_t>(blockDim.x & ~31u); }
#endif

/// Writes a slice of `bytes` as LL128 lines into `slot`. Device: 8 consecutive lanes store a
/// line, 16 bytes each, so a warp's store covers 4 whole lines. Host (and a TB smaller than a
/// warp): the data, then the flag with release (after a fence).
TUCCL_DEVICE_INLINE void writeLL128Slice(char* slot, const char* src, int64_t bytes, uint64_t k) {
  const uint64_t flag = ll128Flag(k);
  const int64_t lines = ll128Lines(bytes);
#if defined(TUCCL_DEVICE_COMPILE)
  const int64_t lanes = warpThreads();
  if (lanes > 0) {
    for (int64_t i = threadIdx.x; threadIdx.x < lanes && i < lines * 8; i += lanes) {
      uint64_t lo, hi;
      ll128Part(src, bytes, i / 8, static_cast<int32_t>(i % 8), flag, lo, hi);
      store16(slot + i * 16, lo, hi);
    }
    return;
  }
  for (int64_t line = threadIdx.x; line < lines; line += blockDim.x) {
    for (int32_t part = 0; part < 8; ++part) {
      uint64_t lo, hi;
      ll128Part(src, bytes, line, part, flag, lo, hi);
      if (part == 7) __threadfence_system();
      store16(slot + line * kLL128LineBytes + part * 16, lo, hi);
    }
  }
#else
  for (int64_t line = threadIdx.x; line < lines; line += blockDim.x) {
    char* at = slot + line * kLL128LineBytes;
    const int64_t n = clampBytes(bytes - line * kLL128LineData, kLL128LineData);
    if (n > 0) std::memcpy(at, src + line * kLL128LineData, static_cast<size_t>(n));
#if defined(TUCCL_CUDA_COMPILER)
    *reinterpret_cast<volatile uint64_t*>(ll128FlagWord(at)) = flag;
#else
    std::atomic_ref<uint64_t>(*ll128FlagWord(at)).store(flag, std::memory_order_release);
#endif
  }
#endif
}

/// One thread waits for a whole line's flag, then reads its data (acquire, then the data): the
/// host's form, and the device's in a TB smaller than a warp.
TUCCL_DEVICE_INLINE bool readLL128LineAlone(const KernelArgs& args, TbReport& report, const char* at, uint64_t flag,
                                            char* out, int64_t n, WaitSite site) {
  uint64_t* flagWord = ll128FlagWord(at);
  const bool ok = spinUntil(
      args, report,
      [&](uint64_t& seen) {
#if defined(TUCCL_CUDA_COMPILER)
        seen = *reinterpret_cast<volatile uint64_t*>(flagWord);
#else
        seen = std::atomic_ref<uint64_t>(*flagWord).load(std::memory_order_acquire);
#endif
        return seen == flag;
      },
      flag, site);
  if (!ok || n <= 0) return ok;
#if defined(TUCCL_DEVICE_COMPILE)
  __threadfence_system();
  for (int64_t word = 0; word * 8 < n; ++word) {
    writeWord(out + word * 8, *reinterpret_cast<const volatile uint64_t*>(at + word * 8), clampBytes(n - word * 8, 8));
  }
#else
  std::memcpy(out, at, static_cast<size_t>(n));
#endif
  return true;
}

/// Waits for the LL128 lines of payload bytes [begin, begin + n) (begin a multiple of 120) of a
/// slice of `bytes` and writes their data to out[0, n) (every thread of the TB).
TUCCL_DEVICE_INLINE bool readLL128Piece(const KernelArgs& args, TbReport& report, int32_t ring, const char* slot,
                                        uint64_t k, int64_t bytes, int64_t begin, int64_t n, char* out) {
  const uint64_t flag = ll128Flag(k);
  const int64_t first = begin / kLL128LineData;
  const int64_t end = bytes > 0 ? (begin + n + kLL128LineData - 1) / kLL128LineData : 1;
  const WaitSite site{kWaitLine, ring, -1, -1};
  bool ok = true;
#if defined(TUCCL_DEVICE_COMPILE)
  const int64_t lanes = warpThreads();
  if (lanes > 0 && threadIdx.x < lanes) {
    // Every lane of a whole warp runs the same iterations (the shuffles need the whole warp); a
    // lane loads its 16 bytes of a line and the line is complete when lane 7 of its group of 8
    // saw the flag — the line arrived whole, so the other lanes' loads of it are new too.
    const int64_t parts = (end - first) * 8;
    const int32_t lane = static_cast<int32_t>(threadIdx.x & 31u);
    for (int64_t base = 0; base < parts; base += lanes) {
      const int64_t i = base + threadIdx.x;
      const bool active = ok && i < parts;
      const char* at = slot + (first * 8 + i) * 16;
      uint64_t lo = 0, hi = 0;
      const long long start = waitStart();
      for (uint64_t spins = 0;; ++spins) {
        if (active) load16(at, lo, hi);
        const int mine = (!active || (i % 8) != 7 || hi == flag) ? 1 : 0;
        const bool ready = __shfl_sync(0xffffffffu, mine, (lane & ~7) | 7) != 0;
        if (__all_sync(0xffffffffu, ready)) break;
        const bool expired = (spins & 255u) == 255u && waitExpired(args, start);
        if (__any_sync(0xffffffffu, expired)) {
          if (active && !ready && (i % 8) == 7) giveUp(args, report, flag, hi, site);
          if (active) ok = false;
          break;
        }
      }
      if (active && ok) {
        const int64_t at0 = (first + i / 8) * kLL128LineData + (i % 8) * 16 - begin;
        writeWord(out + at0, lo, clampBytes(n - at0, 8));
        if (i % 8 != 7) writeWord(out + at0 + 8, hi, clampBytes(n - at0 - 8, 8));
      }
    }
  } else if (lanes == 0) {
    for (int64_t line = first + threadIdx.x; ok && line < end; line += blockDim.x) {
      const int64_t offset = line * kLL128LineData - begin;
      ok = readLL128LineAlone(args, report, slot + line * kLL128LineBytes, flag, out + offset,
                              clampBytes(n - offset, kLL128LineData), site);
    }
  }
#else
  for (int64_t line = first + threadIdx.x; ok && line < end; line += blockDim.x) {
    const int64_t offset = line * kLL128LineData - begin;
    ok = readLL128LineAlone(args, report, slot + line * kLL128LineBytes, flag, out + offset,
                            clampBytes(n - offset, kLL128LineData), site);
  }
#endif
  return tbAll(ok);
}

}  // namespace tuccl::dev
