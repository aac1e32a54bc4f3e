// The host build of the point-to-point kernel (kernelgen/device/peer.h), as a library the fake
// CUDA driver runs (fake_cuda_driver.h: an image made by hostCubin names it): the CUDA device's
// tests launch point-to-point batches through it.
#define TUCCL_PEER_HOST_KERNEL 1
#include "kernelgen/device/peer.h"

extern "C" __attribute__((visibility("default"))) void tuccl_host_set_block(unsigned block) {
  tuccl::dev::host::blockIdx.x = block;
}
