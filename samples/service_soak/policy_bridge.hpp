#pragma once
// The one place the soak calls the metrics layer. With lib/metrics in the build, SoakPolicy is
// vramkit::DefragPolicy. Without it, a stand-in applies the same documented rule (compact when
// fragmentation exceeds the threshold, at most once per min_interval, by the injected clock).
#include <optional>

#include <vramkit/pool.hpp>

#if VRAMKIT_SAMPLES_HAVE_METRICS
#include <vramkit/policy.hpp>
using SoakPolicy = vramkit::DefragPolicy;
inline constexpr bool soak_policy_is_stand_in = false;
#else
#include <chrono>
#include <functional>
namespace vramkit {
using PolicyClock = std::function<std::chrono::steady_clock::time_point()>;
struct DefragPolicyOptions {
  double fragmentation_threshold = 0.30;
  std::chrono::steady_clock::duration min_interval = std::chrono::minutes(5);
  std::uint64_t min_free_bytes = 0;
  CompactOptions compaction = {};
  PolicyClock clock = {};
};
}  // namespace vramkit
class SoakPolicy {
 public:
  explicit SoakPolicy(vramkit::DefragPolicyOptions options) : options_(std::move(options)) {}
  bool should_compact(const vramkit::PoolStatistics& statistics) const {
    if (statistics.free_bytes < options_.min_free_bytes) return false;
    if (statistics.fragmentation() <= options_.fragmentation_threshold) return false;
    return !last_ || options_.clock() - *last_ >= options_.min_interval;
  }
  std::optional<vramkit::CompactionReport> maybe_compact(vramkit::Pool& pool) {
    if (!should_compact(pool.statistics())) return std::nullopt;
    last_ = options_.clock();
    return pool.compact(options_.compaction);
  }

 private:
  vramkit::DefragPolicyOptions options_;
  std::optional<std::chrono::steady_clock::time_point> last_;
};
inline constexpr bool soak_policy_is_stand_in = true;
#endif
