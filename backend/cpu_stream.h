// CPU streams (tucclStreamCreate): an in-order queue of tasks run by one worker thread, the CPU
// device's counterpart of a CUDA stream. A handle is valid from create to destroy; libtuccl checks
// every handle it is given against the live ones, so a stale or foreign handle is an
// InvalidArgument, never a crash.
#pragma once

#include <functional>
#include <memory>

#include "support/status.h"
#include "tuccl/tuccl.h"

namespace tuccl::backend {

class CpuStream {
 public:
  using Task = std::function<Status()>;

  static Expected<tucclStream_t> create();
  /// The live stream behind `handle`; null for the NULL stream or an unknown handle.
  static std::shared_ptr<CpuStream> find(tucclStream_t handle);
  /// Synchronizes, then ends the worker. InvalidArgument for an unknown handle.
  static Status destroy(tucclStream_t handle);

  ~CpuStream();
  /// Runs `task` after every task enqueued before it; its error is kept for synchronize().
  void enqueue(Task task);
  /// Waits until the queue is empty and idle; returns (and clears) the first error since the last
  /// synchronize.
  Status synchronize();

 private:
  CpuStream();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tuccl::backend
