// DeviceMonitor: device memory next to pool memory.
//
// Invariant: samples_.size() <= options_.history, and samples_ is in the order sample() took them.
#include <vramkit/detail/message.hpp>
#include <vramkit/device_monitor.hpp>
#include <vramkit/errors.hpp>

namespace vramkit {

DeviceMonitor::DeviceMonitor(const Pool& pool, DeviceMonitorOptions options)
    : pool_(&pool), options_(std::move(options)) {
  if (options_.history == 0) throw invalid_argument("DeviceMonitor: history 0; keep at least 1 sample");
}

DeviceSample DeviceMonitor::sample() {
  DeviceSample sample;
  sample.time = options_.clock ? options_.clock() : std::chrono::steady_clock::now();
  // The pool first, the device second: a segment the pool adds in between is counted as outside
  // memory for this one sample; one it releases in between is covered by the clamp below.
  const PoolStatistics statistics = pool_->statistics();
  const DeviceMemoryInfo info = pool_->device().memory_info();
  sample.device_total_bytes = info.total_bytes;
  sample.device_free_bytes = info.free_bytes;
  sample.pool_reserved_bytes = statistics.reserved_bytes;
  sample.pool_used_bytes = statistics.used_bytes;
  const std::uint64_t device_used =
      info.total_bytes > info.free_bytes ? info.total_bytes - info.free_bytes : 0;
  sample.outside_pool_bytes =
      device_used > statistics.reserved_bytes ? device_used - statistics.reserved_bytes : 0;
  samples_.push_back(sample);
  while (samples_.size() > options_.history) samples_.pop_front();
  return sample;
}

}  // namespace vramkit
