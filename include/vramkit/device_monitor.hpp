#pragma once
// DeviceMonitor: the device's view of memory next to the pool's. Each sample reads
// pool.device().memory_info() (cudaMemGetInfo on CUDA; the simulated capacity on the host device)
// and pool.statistics(), and derives the memory held outside the pool: by other pools, other
// libraries, the CUDA context, other processes. A pool that cannot grow although the device looks
// roomy, or a device that fills while the pool is quiet, shows up there.
//
// The two reads are not atomic with each other (other threads and processes keep allocating), so
// outside_pool_bytes is an estimate, clamped at 0. The monitor keeps the last `history` samples,
// oldest first. Cost of sample(): one device query (a driver call on CUDA, microseconds) plus one
// statistics read. Not thread-safe: one monitor belongs to one polling loop.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>

#include <vramkit/pool.hpp>

namespace vramkit {

struct DeviceSample {
  std::chrono::steady_clock::time_point time;
  std::uint64_t device_total_bytes = 0;
  std::uint64_t device_free_bytes = 0;
  std::uint64_t pool_reserved_bytes = 0;
  std::uint64_t pool_used_bytes = 0;
  /// max(0, device total - device free - pool reserved).
  std::uint64_t outside_pool_bytes = 0;
};

struct DeviceMonitorOptions {
  std::size_t history = 64;  ///< Samples kept (>= 1); the oldest goes first.
  std::function<std::chrono::steady_clock::time_point()> clock = {};  ///< Empty: steady_clock::now.
};

class DeviceMonitor {
 public:
  /// The pool must outlive the monitor. Throws invalid_argument for a history of 0.
  explicit DeviceMonitor(const Pool& pool, DeviceMonitorOptions options = {});

  /// Takes a sample, keeps it (dropping the oldest beyond `history`) and returns it.
  DeviceSample sample();
  /// The kept samples, oldest first.
  const std::deque<DeviceSample>& samples() const { return samples_; }
  const DeviceMonitorOptions& options() const { return options_; }

 private:
  const Pool* pool_;
  DeviceMonitorOptions options_;
  std::deque<DeviceSample> samples_;
};

}  // namespace vramkit
