// NCCL's network (ncclNet) plugin ABI, versions v8 (NCCL 2.20) to v12 (NCCL 2.30), defined by us.
//
// NCCL installs no net headers; a plugin carries its own copy. Field order and types are the
// binary contract (shared/reference/nccl-net-abi.md, x86-64/aarch64 LP64). Valid C and C++; only
// plain data and function-pointer types.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "tuccl/nccl_tuner.h"  // ncclResult_t, ncclDebugLogger_t

#ifdef __cplusplus
extern "C" {
#endif

/// The network subsystem flag of NCCL's logger.
#define TUCCL_NCCL_NET_FLAG 0x10UL

#define TUCCL_NCCL_NET_HANDLE_MAXSIZE 128
#define TUCCL_NCCL_NET_MAX_REQUESTS 32
#define TUCCL_NCCL_PTR_HOST 0x1
#define TUCCL_NCCL_PTR_CUDA 0x2
#define TUCCL_NCCL_PTR_DMABUF 0x4
#define TUCCL_NCCL_NET_OPTIONAL_RECV_COMPLETION 0x1
#define TUCCL_NCCL_MAX_NET_SIZE_BYTES (1ULL << 40)
#define TUCCL_NCCL_MAX_COLLNET_SIZE (1ULL << 29)

typedef enum {
  TUCCL_NCCL_NET_DEVICE_HOST = 0,
  TUCCL_NCCL_NET_DEVICE_UNPACK = 1,
} tucclNcclNetDeviceType;

/// ncclNetDeviceHandle_v7_t .. _v12_t (identical).
typedef struct {
  tucclNcclNetDeviceType netDeviceType;
  int netDeviceVersion;
  void* handle;
  size_t size;
  int needsProxyProgress;
} tucclNcclNetDeviceHandle_t;

/// v10+: `type` Start 0, Stop 1, Update 2, UpdateAndStop 3.
typedef ncclResult_t (*tucclNcclProfilerCallback_t)(void** eHandle, int type, void* pHandle, int64_t pluginId,
                                                    void* extData);

/// ncclNetCommConfig_v10/v11/v12_t.
typedef struct {
  int trafficClass;
} tucclNcclNetCommConfig_t;

typedef struct {
  int ndevs;
  int devs[4];
} tucclNcclNetVDeviceProps_v9_t;  // v9 .. v11

typedef struct {
  int ndevs;
  int devs[8];
} tucclNcclNetVDeviceProps_v12_t;

typedef struct {
  int32_t maxConcurrentPeers;
  int32_t minConcurrentPeers;
  int32_t maxFlowsPerPeer;
  int32_t minFlowsPerPeer;
} tucclNcclNetCommAttr_t;

/// ncclNetAttr_v11_t = ncclNetAttr_v12_t (44 bytes).
typedef struct {
  tucclNcclNetCommAttr_t sendCommAttr;
  tucclNcclNetCommAttr_t recvCommAttr;
  uint32_t op;
  uint32_t algo;
  uint32_t proto;
} tucclNcclNetAttr_t;

// ---- Properties --------------------------------------------------------------------------------

typedef struct {  // 64 bytes
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  tucclNcclNetDeviceType netDeviceType;
  int netDeviceVersion;
} tucclNcclNetProperties_v8_t;

typedef struct {  // 104 bytes (v9 and v10)
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  tucclNcclNetDeviceType netDeviceType;
  int netDeviceVersion;
  tucclNcclNetVDeviceProps_v9_t vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
} tucclNcclNetProperties_v9_t;

typedef struct {  // 112 bytes
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  tucclNcclNetDeviceType netDeviceType;
  int netDeviceVersion;
  tucclNcclNetVDeviceProps_v9_t vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
  int maxMultiRequestSize;
} tucclNcclNetProperties_v11_t;

typedef struct {  // 128 bytes
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  tucclNcclNetDeviceType netDeviceType;
  int netDeviceVersion;
  tucclNcclNetVDeviceProps_v12_t vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
  int maxMultiRequestSize;
  int16_t railId;
  int16_t planeId;
} tucclNcclNetProperties_v12_t;

// ---- Function tables ---------------------------------------------------------------------------

typedef struct {
  const char* name;
  ncclResult_t (*init)(ncclDebugLogger_t logFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, tucclNcclNetProperties_v8_t* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(int dev, void* handle, void** sendComm, tucclNcclNetDeviceHandle_t** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm, tucclNcclNetDeviceHandle_t** recvDevComm);
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* sendComm, void* data, int size, int tag, void* mhandle, void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, int* sizes, int* tags, void** mhandles, void** request);
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
} tucclNcclNet_v8_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(ncclDebugLogger_t logFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, tucclNcclNetProperties_v9_t* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(int dev, void* handle, void** sendComm, tucclNcclNetDeviceHandle_t** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm, tucclNcclNetDeviceHandle_t** recvDevComm);
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                        void** request);
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
  ncclResult_t (*makeVDevice)(int* d, tucclNcclNetVDeviceProps_v9_t* props);
} tucclNcclNet_v9_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(ncclDebugLogger_t logFunction, tucclNcclProfilerCallback_t profFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, tucclNcclNetProperties_v9_t* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(int dev, tucclNcclNetCommConfig_t* config, void* handle, void** sendComm,
                          tucclNcclNetDeviceHandle_t** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm, tucclNcclNetDeviceHandle_t** recvDevComm);
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle,
                        void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                        void** phandles, void** request);
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
  ncclResult_t (*makeVDevice)(int* d, tucclNcclNetVDeviceProps_v9_t* props);
} tucclNcclNet_v10_t;

/// v11 and v12 share the order and signatures; only the properties and vDevice types differ.
#define TUCCL_NCCL_NET_V11_TABLE(PROPS, VPROPS)                                                                  \
  struct {                                                                                                       \
    const char* name;                                                                                            \
    ncclResult_t (*init)(void** ctx, uint64_t commId, tucclNcclNetCommConfig_t* config,                          \
                         ncclDebugLogger_t logFunction, tucclNcclProfilerCallback_t profFunction);               \
    ncclResult_t (*devices)(int* ndev);                                                                          \
    ncclResult_t (*getProperties)(int dev, PROPS* props);                                                        \
    ncclResult_t (*listen)(void* ctx, int dev, void* handle, void** listenComm);                                 \
    ncclResult_t (*connect)(void* ctx, int dev, void* handle, void** sendComm,                                   \
                            tucclNcclNetDeviceHandle_t** sendDevComm);                                           \
    ncclResult_t (*accept)(void* listenComm, void** recvComm, tucclNcclNetDeviceHandle_t** recvDevComm);         \
    ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);                        \
    ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,          \
                                void** mhandle);                                                                 \
    ncclResult_t (*deregMr)(void* comm, void* mhandle);                                                          \
    ncclResult_t (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle,        \
                          void** request);                                                                       \
    ncclResult_t (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles,         \
                          void** phandles, void** request);                                                      \
    ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);     \
    ncclResult_t (*test)(void* request, int* done, int* sizes);                                                  \
    ncclResult_t (*closeSend)(void* sendComm);                                                                   \
    ncclResult_t (*closeRecv)(void* recvComm);                                                                   \
    ncclResult_t (*closeListen)(void* listenComm);                                                               \
    ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);                                 \
    ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);                                         \
    ncclResult_t (*makeVDevice)(int* d, VPROPS* props);                                                          \
    ncclResult_t (*finalize)(void* ctx);                                                                         \
    ncclResult_t (*setNetAttr)(void* ctx, tucclNcclNetAttr_t* netAttr);                                          \
  }

typedef TUCCL_NCCL_NET_V11_TABLE(tucclNcclNetProperties_v11_t, tucclNcclNetVDeviceProps_v9_t) tucclNcclNet_v11_t;
typedef TUCCL_NCCL_NET_V11_TABLE(tucclNcclNetProperties_v12_t, tucclNcclNetVDeviceProps_v12_t) tucclNcclNet_v12_t;

#ifdef __cplusplus
}  // extern "C"
static_assert(sizeof(tucclNcclNetProperties_v8_t) == 64, "ncclNetProperties_v8_t is 64 bytes");
static_assert(sizeof(tucclNcclNetProperties_v9_t) == 104, "ncclNetProperties_v9_t is 104 bytes");
static_assert(sizeof(tucclNcclNetProperties_v11_t) == 112, "ncclNetProperties_v11_t is 112 bytes");
static_assert(sizeof(tucclNcclNetProperties_v12_t) == 128, "ncclNetProperties_v12_t is 128 bytes");
static_assert(offsetof(tucclNcclNetProperties_v12_t, maxP2pBytes) == 104, "v12 maxP2pBytes at 104");
static_assert(offsetof(tucclNcclNetProperties_v11_t, maxP2pBytes) == 88, "v11 maxP2pBytes at 88");
static_assert(sizeof(tucclNcclNetAttr_t) == 44, "ncclNetAttr_t is 44 bytes");
static_assert(sizeof(tucclNcclNet_v12_t) == 22 * sizeof(void*), "v12 has 22 entries");
static_assert(sizeof(tucclNcclNet_v10_t) == 20 * sizeof(void*), "v10 has 20 entries");
static_assert(sizeof(tucclNcclNet_v8_t) == 19 * sizeof(void*), "v8 has 19 entries");
#endif
