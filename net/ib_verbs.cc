// libibverbs loaded with dlopen (ib_verbs.h).
#include "net/ib_verbs.h"
#include "support/environment.h"

#include <dlfcn.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

namespace tuccl::net::ib {
namespace {

/// dlvsym at `version`, else the default version (a library built without symbol versions).
template <typename Function>
bool bind(void* library, Function& slot, const char* name, const char* version) {
  void* symbol = dlvsym(library, name, version);
  if (symbol == nullptr) symbol = dlsym(library, name);
  slot = reinterpret_cast<Function>(symbol);
  return symbol != nullptr;
}

struct Loaded {
  VerbsApi api{};
  Status status;
};

Loaded load() {
  Loaded loaded;
  const std::string library = env::text("TUCCL_IBVERBS_LIBRARY").value_or("libibverbs.so.1");
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    loaded.status = makeError(ErrorCode::NotFound, "cannot load " + library + " (rdma-core's libibverbs): " +
                                                       std::string(why != nullptr ? why : "unknown reason"));
    return loaded;
  }
  VerbsApi& api = loaded.api;
  const char* missing = nullptr;
  auto need = [&](auto& slot, const char* name, const char* version) {
    if (!bind(handle, slot, name, version) && missing == nullptr) missing = name;
  };
  need(api.getDeviceList, "ibv_get_device_list", "IBVERBS_1.1");
  need(api.freeDeviceList, "ibv_free_device_list", "IBVERBS_1.1");
  need(api.getDeviceName, "ibv_get_device_name", "IBVERBS_1.1");
  need(api.openDevice, "ibv_open_device", "IBVERBS_1.1");
  need(api.closeDevice, "ibv_close_device", "IBVERBS_1.1");
  need(api.queryDevice, "ibv_query_device", "IBVERBS_1.1");
  need(api.queryPortCompat, "ibv_query_port", "IBVERBS_1.1");
  need(api.queryGid, "ibv_query_gid", "IBVERBS_1.1");
  need(api.allocPd, "ibv_alloc_pd", "IBVERBS_1.1");
  need(api.deallocPd, "ibv_dealloc_pd", "IBVERBS_1.1");
  need(api.regMr, "ibv_reg_mr", "IBVERBS_1.1");
  need(api.deregMr, "ibv_dereg_mr", "IBVERBS_1.1");
  need(api.createCq, "ibv_create_cq", "IBVERBS_1.1");
  need(api.destroyCq, "ibv_destroy_cq", "IBVERBS_1.1");
  need(api.createQp, "ibv_create_qp", "IBVERBS_1.1");
  need(api.modifyQp, "ibv_modify_qp", "IBVERBS_1.1");
  need(api.destroyQp, "ibv_destroy_qp", "IBVERBS_1.1");
  need(api.wcStatusName, "ibv_wc_status_str", "IBVERBS_1.1");
  (void)bind(handle, api.regDmabufMr, "ibv_reg_dmabuf_mr", "IBVERBS_1.12");  // optional
  if (missing != nullptr) {
    loaded.status = makeError(ErrorCode::NotFound, library + " has no " + missing + " (rdma-core too old?)");
    dlclose(handle);
  }
  return loaded;  // on success the library stays loaded for the life of the process
}

}  // namespace

Expected<const VerbsApi*> loadVerbs() {
  static std::once_flag once;
  static Loaded loaded;
  std::call_once(once, [] { loaded = load(); });
  if (!loaded.status) return loaded.status;
  return &loaded.api;
}

int queryPort(const VerbsApi& api, ibv_context* context, uint8_t port, ibv_port_attr* attr) {
  // verbs_get_ctx_op(context, query_port), spelt out (the macro is a GNU statement expression).
  verbs_context* extended = verbs_get_ctx(context);
  if (extended != nullptr && extended->sz >= sizeof(*extended) - offsetof(verbs_context, query_port) &&
      extended->query_port != nullptr)
    return extended->query_port(context, port, attr, sizeof *attr);
  std::memset(attr, 0, sizeof *attr);
  return api.queryPortCompat(context, port, reinterpret_cast<_compat_ibv_port_attr*>(attr));
}

}  // namespace tuccl::net::ib
