#pragma once
// StatisticsScope: what one pipeline stage did to a pool. It snapshots pool.statistics() when it is
// made; delta() reads them again and subtracts.
//
//   StatisticsScope scope(pool, "blur");
//   run_blur(pool);
//   log(scope.delta().bytes_moved);
//
// What is a delta and what is a snapshot:
//  - deltas (end - start of the pool's monotonic counters): allocation_requests,
//    allocation_failures, compactions, blocks_moved, bytes_moved, compaction_time;
//  - signed level changes (end - start of levels that go up and down): used_bytes_change,
//    reserved_bytes_change, live_allocations_change;
//  - snapshots: `start` and `end`, the whole PoolStatistics at either edge (fragmentation,
//    utilization... are properties of a moment, not of an interval, so read them there).
// The peak used within the scope is not derivable from counters: the pool keeps only its lifetime
// peak. raised_peak_used_bytes reports that lifetime peak when the scope raised it (then it is the
// scope's peak too), and 0 when it did not.
//
// The counters are pool-wide: work other threads do on the same pool while a scope is open counts
// in its delta. Nested scopes need nothing special (each keeps its own snapshot); StatisticsStack
// names them as a path ("frame/blur"). Cost: one statistics read (O(segments)) at each edge.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <vramkit/pool.hpp>
#include <vramkit/statistics.hpp>

namespace vramkit {

struct StatisticsDelta {
  std::uint64_t allocation_requests = 0;
  std::uint64_t allocation_failures = 0;
  std::uint64_t compactions = 0;
  std::uint64_t blocks_moved = 0;
  std::uint64_t bytes_moved = 0;
  std::chrono::duration<double> compaction_time{0};
  std::int64_t used_bytes_change = 0;
  std::int64_t reserved_bytes_change = 0;
  std::int64_t live_allocations_change = 0;
  std::uint64_t raised_peak_used_bytes = 0;  ///< The new lifetime peak if the scope raised it, else 0.
  PoolStatistics start;                      ///< Snapshot when the scope opened.
  PoolStatistics end;                        ///< Snapshot when delta() was called.

  /// Successful / all requests within the scope; 1 when the scope made none.
  double success_rate() const;
};

/// The difference between two snapshots of one pool, `start` taken first.
StatisticsDelta statistics_delta(const PoolStatistics& start, const PoolStatistics& end);

class StatisticsScope {
 public:
  /// The pool must outlive the scope.
  StatisticsScope(const Pool& pool, std::string name);

  /// The change since the scope opened; may be called any number of times.
  StatisticsDelta delta() const;
  const std::string& name() const { return name_; }
  const PoolStatistics& start() const { return start_; }

 private:
  const Pool* pool_;
  std::string name_;
  PoolStatistics start_;
};

/// One closed stage of a StatisticsStack.
struct StageRecord {
  std::string path;       ///< The names of the open scopes joined by '/': "frame/blur".
  std::size_t depth = 0;  ///< 0 for an outermost stage.
  StatisticsDelta delta;
};

/// push/pop nesting of StatisticsScopes, keeping every closed stage in the order it closed
/// (inner before outer). Not thread-safe.
class StatisticsStack {
 public:
  /// The pool must outlive the stack.
  explicit StatisticsStack(const Pool& pool) : pool_(&pool) {}

  void push(std::string name);
  /// Closes the innermost open stage, records it and returns a copy of its record (a reference into
  /// records() would dangle at the next pop). Throws state_error when no stage is open; on any
  /// throw nothing changes.
  StageRecord pop();

  std::size_t depth() const { return open_.size(); }
  const std::vector<StageRecord>& records() const { return records_; }

 private:
  const Pool* pool_;
  std::vector<StatisticsScope> open_;
  std::vector<StageRecord> records_;
};

}  // namespace vramkit
