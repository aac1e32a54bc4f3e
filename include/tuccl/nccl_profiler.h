// NCCL's profiler plugin ABI, versions v4 (NCCL 2.27) to v6 (2.29+), defined by us: what TuCCL's
// profiler plugin (plugin/profiler.cc) and its harnesses need.
//
// NCCL installs no profiler header; a plugin carries its own copy. Layouts are the binary contract
// on LP64 (shared/reference/nccl-profiler-abi.md, "Event descriptors"): v5 and v6 share one
// descriptor of 112 bytes (v6 adds copy-engine members at the same offsets, which TuCCL does not
// read), v4's is 104 bytes with a one-byte `type`. Only the members TuCCL uses are named; the rest
// of each union is reserved bytes. Valid C and C++.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "tuccl/nccl_tuner.h"  // ncclResult_t, ncclDebugLogger_t

#ifdef __cplusplus
extern "C" {
#endif

/// Event types: bits of a descriptor's `type` and of the activation mask.
enum {
  tucclNcclProfileGroup = 1,
  tucclNcclProfileColl = 2,
  tucclNcclProfileP2p = 4,
  tucclNcclProfileProxyOp = 8,
  tucclNcclProfileProxyStep = 16,
  tucclNcclProfileProxyCtrl = 32,
  tucclNcclProfileKernelCh = 64,
  tucclNcclProfileNetPlugin = 128,
  tucclNcclProfileGroupApi = 256,
  tucclNcclProfileCollApi = 512,
  tucclNcclProfileP2pApi = 1024,
  tucclNcclProfileKernelLaunch = 2048
};

/// recordEventState's states TuCCL acts on.
enum { tucclNcclProfilerKernelChStop = 22 };

/// A Coll descriptor as v4 gives it (v5 appends the Group handle).
typedef struct {
  uint64_t seqNumber;
  const char* func;  ///< "AllReduce", "AllGather", ...
  const void* sendBuff;
  void* recvBuff;
  size_t count;  ///< elements (AllGather, Broadcast: bytes, datatype "ncclInt8")
  int root;
  const char* datatype;  ///< "ncclFloat32", ...
  uint8_t nChannels;     ///< the KernelCh events to expect
  uint8_t nWarps;
  const char* algo;
  const char* proto;
} tucclNcclProfilerColl_v4_t;

typedef struct {
  tucclNcclProfilerColl_v4_t common;
  void* parentGroup;
} tucclNcclProfilerColl_v5_t;

typedef struct {
  uint8_t channelId;
  uint64_t pTimer;  ///< the GPU's %globaltimer (ns) when the channel began
} tucclNcclProfilerKernelCh_v4_t;

typedef struct {
  uint64_t type;
  void* parentObj;  ///< KernelCh: the Coll's handle
  int rank;
  union {
    tucclNcclProfilerColl_v5_t coll;
    tucclNcclProfilerKernelCh_v4_t kernelCh;
    char reserved[88];
  };
} tucclNcclProfilerEventDescr_v5_t;

typedef struct {
  uint8_t type;  ///< the bytes after it are padding NCCL's v4 adapter does not clear
  void* parentObj;
  int rank;
  union {
    tucclNcclProfilerColl_v4_t coll;
    tucclNcclProfilerKernelCh_v4_t kernelCh;
    char reserved[80];
  };
} tucclNcclProfilerEventDescr_v4_t;

/// recordEventState's arguments (may be NULL).
typedef union {
  struct {
    size_t transSize;
  } proxyStep;
  struct {
    int appendedProxyOps;
  } proxyCtrl;
  struct {
    void* data;
  } netPlugin;
  struct {
    uint64_t pTimer;  ///< at ncclProfilerKernelChStop: the GPU's %globaltimer (ns) at the end
  } kernelCh;
} tucclNcclProfilerEventStateArgs_v4_t;

/// ncclProfiler_v5 and ncclProfiler_v6: the same functions.
typedef struct {
  const char* name;
  ncclResult_t (*init)(void** context, uint64_t commId, int* eActivationMask, const char* commName, int nNodes,
                       int nranks, int rank, ncclDebugLogger_t logfn);
  ncclResult_t (*startEvent)(void* context, void** eHandle, tucclNcclProfilerEventDescr_v5_t* eDescr);
  ncclResult_t (*stopEvent)(void* eHandle);
  ncclResult_t (*recordEventState)(void* eHandle, int eState, tucclNcclProfilerEventStateArgs_v4_t* eStateArgs);
  ncclResult_t (*finalize)(void* context);
} tucclNcclProfiler_v5_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(void** context, int* eActivationMask, const char* commName, uint64_t commHash, int nNodes,
                       int nranks, int rank, ncclDebugLogger_t logfn);
  ncclResult_t (*startEvent)(void* context, void** eHandle, tucclNcclProfilerEventDescr_v4_t* eDescr);
  ncclResult_t (*stopEvent)(void* eHandle);
  ncclResult_t (*recordEventState)(void* eHandle, int eState, tucclNcclProfilerEventStateArgs_v4_t* eStateArgs);
  ncclResult_t (*finalize)(void* context);
} tucclNcclProfiler_v4_t;

#ifdef __cplusplus
}  // extern "C"
static_assert(sizeof(tucclNcclProfilerEventDescr_v5_t) == 112 && offsetof(tucclNcclProfilerEventDescr_v5_t, coll) == 24);
static_assert(sizeof(tucclNcclProfilerEventDescr_v4_t) == 104);
static_assert(offsetof(tucclNcclProfilerColl_v4_t, count) == 32 && offsetof(tucclNcclProfilerColl_v4_t, nChannels) == 56 &&
              offsetof(tucclNcclProfilerColl_v5_t, parentGroup) == 80);
static_assert(sizeof(tucclNcclProfilerEventStateArgs_v4_t) == 8);
#endif
