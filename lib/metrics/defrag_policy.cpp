// DefragPolicy: the seed's rule (compact above a fragmentation threshold, at most once per interval).
//
// Invariant: last_compaction_ is set only by maybe_compact(), to the clock reading taken just before
// the compaction it ran, so the interval is measured between compaction starts. The first decision
// is never held back by the interval: a policy that has not compacted yet may compact at once.
#include <vramkit/detail/message.hpp>
#include <vramkit/errors.hpp>
#include <vramkit/policy.hpp>

#include <cmath>

namespace vramkit {

DefragPolicy::DefragPolicy(DefragPolicyOptions options) : options_(std::move(options)) {
  const double threshold = options_.fragmentation_threshold;
  if (std::isnan(threshold) || threshold < 0.0 || threshold > 1.0) {
    throw invalid_argument(
        detail::message("DefragPolicy: fragmentation_threshold ", threshold, " is outside [0, 1]"));
  }
  if (options_.min_interval < std::chrono::steady_clock::duration::zero()) {
    throw invalid_argument(detail::message("DefragPolicy: min_interval ",
                                           std::chrono::duration<double>(options_.min_interval).count(),
                                           " s is negative"));
  }
}

std::chrono::steady_clock::time_point DefragPolicy::now() const {
  return options_.clock ? options_.clock() : std::chrono::steady_clock::now();
}

bool DefragPolicy::should_compact(const PoolStatistics& statistics) const {
  if (statistics.free_bytes == 0 || statistics.free_bytes < options_.min_free_bytes) return false;
  if (!(statistics.fragmentation() > options_.fragmentation_threshold)) return false;
  // Read the clock last: a caller polling a healthy pool pays no clock call.
  return !last_compaction_ || now() - *last_compaction_ >= options_.min_interval;
}

std::optional<CompactionReport> DefragPolicy::maybe_compact(Pool& pool) {
  if (!should_compact(pool.statistics())) return std::nullopt;
  last_compaction_ = now();
  return pool.compact(options_.compaction);
}

}  // namespace vramkit
