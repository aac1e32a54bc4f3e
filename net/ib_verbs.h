// libibverbs, loaded at run time: the plugin must load on a host without rdma-core (its only
// NEEDED library is libc), so nothing here links against libibverbs. The functions the verbs
// transport calls are looked up once with dlvsym at the versions NCCL's ibvsymbols.cc uses
// (IBVERBS_1.1, ibv_reg_dmabuf_mr IBVERBS_1.12); the data path (ibv_post_send, ibv_post_recv,
// ibv_poll_cq) is inline in verbs.h and goes through the provider's context ops, so it needs no
// symbol.
//
// Member names differ from the ibv_ names on purpose: verbs.h defines several of those
// (ibv_reg_mr, ibv_query_port) as function-like macros.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>

#include "support/status.h"

namespace tuccl::net::ib {

struct VerbsApi {
  ibv_device** (*getDeviceList)(int* count);
  void (*freeDeviceList)(ibv_device** list);
  const char* (*getDeviceName)(ibv_device* device);
  ibv_context* (*openDevice)(ibv_device* device);
  int (*closeDevice)(ibv_context* context);
  int (*queryDevice)(ibv_context* context, ibv_device_attr* attr);
  /// The exported ibv_query_port, which fills the pre-1.1 ("compat") layout only; call queryPort().
  int (*queryPortCompat)(ibv_context* context, uint8_t port, _compat_ibv_port_attr* attr);
  int (*queryGid)(ibv_context* context, uint8_t port, int index, ibv_gid* gid);
  ibv_pd* (*allocPd)(ibv_context* context);
  int (*deallocPd)(ibv_pd* pd);
  ibv_mr* (*regMr)(ibv_pd* pd, void* address, size_t length, int access);
  /// NULL when the library predates dma-buf registration (rdma-core < 34).
  ibv_mr* (*regDmabufMr)(ibv_pd* pd, uint64_t offset, size_t length, uint64_t iova, int fd, int access);
  int (*deregMr)(ibv_mr* mr);
  ibv_cq* (*createCq)(ibv_context* context, int cqe, void* cqContext, ibv_comp_channel* channel, int vector);
  int (*destroyCq)(ibv_cq* cq);
  ibv_qp* (*createQp)(ibv_pd* pd, ibv_qp_init_attr* attr);
  int (*modifyQp)(ibv_qp* qp, ibv_qp_attr* attr, int mask);
  int (*destroyQp)(ibv_qp* qp);
  const char* (*wcStatusName)(ibv_wc_status status);
};

/// The library (TUCCL_IBVERBS_LIBRARY, else libibverbs.so.1) and its functions, loaded once per
/// process and kept for its life. NotFound naming the library or the missing symbol otherwise.
Expected<const VerbsApi*> loadVerbs();

/// ibv_query_port as verbs.h's inline wrapper does it: the provider's extended query when the
/// context has one (the full ibv_port_attr, link_layer included), else the exported function.
int queryPort(const VerbsApi& api, ibv_context* context, uint8_t port, ibv_port_attr* attr);

}  // namespace tuccl::net::ib
