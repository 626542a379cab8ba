#pragma once
// DefragPolicy: when to compact. Compact when fragmentation exceeds a threshold, but no more often
// than a minimum interval (the seed's rule: 30%, at most every 5 minutes). The pool itself always
// tries a minimal compaction before an allocation fails (PoolOptions::compact_on_failure). The clock
// is injectable so tests and simulations need not wait. maybe_compact() costs one statistics read
// (O(segments)) and a clock read when nothing needs doing.
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>

#include <vramkit/compaction.hpp>
#include <vramkit/pool.hpp>

namespace vramkit {

using PolicyClock = std::function<std::chrono::steady_clock::time_point()>;

struct DefragPolicyOptions {
  double fragmentation_threshold = 0.30;                     ///< In [0, 1].
  std::chrono::steady_clock::duration min_interval = std::chrono::minutes(5);  ///< >= 0.
  std::uint64_t min_free_bytes = 0;     ///< Below this much free memory, fragmentation does not matter.
  CompactOptions compaction = {};       ///< What a policy-driven compaction does (full, budget...).
  PolicyClock clock = {};               ///< Empty: std::chrono::steady_clock::now.
};

class DefragPolicy {
 public:
  /// Throws invalid_argument for a threshold outside [0, 1] or a negative interval.
  explicit DefragPolicy(DefragPolicyOptions options = {});

  /// Whether the pool should be compacted now (threshold passed and the interval has elapsed since
  /// the last compaction this policy ran).
  bool should_compact(const PoolStatistics& statistics) const;
  /// Compacts if should_compact(); returns the report of the compaction it ran.
  std::optional<CompactionReport> maybe_compact(Pool& pool);

  const DefragPolicyOptions& options() const { return options_; }

 private:
  std::chrono::steady_clock::time_point now() const;
  DefragPolicyOptions options_;
  std::optional<std::chrono::steady_clock::time_point> last_compaction_;
};

}  // namespace vramkit
