// StatisticsScope and StatisticsStack: counter deltas over a stage.
//
// Invariant: a delta's counters are end - start of counters that never decrease, so they are never
// negative while both snapshots come from the same pool, start first.
#include <vramkit/errors.hpp>
#include <vramkit/statistics_scope.hpp>

namespace vramkit {
namespace {

std::int64_t change(std::uint64_t start, std::uint64_t end) {
  return static_cast<std::int64_t>(end) - static_cast<std::int64_t>(start);
}

}  // namespace

double StatisticsDelta::success_rate() const {
  return allocation_requests == 0 ? 1.0
                                  : static_cast<double>(allocation_requests - allocation_failures) /
                                        static_cast<double>(allocation_requests);
}

StatisticsDelta statistics_delta(const PoolStatistics& start, const PoolStatistics& end) {
  StatisticsDelta delta;
  delta.allocation_requests = end.allocation_requests - start.allocation_requests;
  delta.allocation_failures = end.allocation_failures - start.allocation_failures;
  delta.compactions = end.compactions - start.compactions;
  delta.blocks_moved = end.blocks_moved - start.blocks_moved;
  delta.bytes_moved = end.bytes_moved - start.bytes_moved;
  delta.compaction_time = end.compaction_time - start.compaction_time;
  delta.used_bytes_change = change(start.used_bytes, end.used_bytes);
  delta.reserved_bytes_change = change(start.reserved_bytes, end.reserved_bytes);
  delta.live_allocations_change = change(start.live_allocations, end.live_allocations);
  delta.raised_peak_used_bytes = end.peak_used_bytes > start.peak_used_bytes ? end.peak_used_bytes : 0;
  delta.start = start;
  delta.end = end;
  return delta;
}

StatisticsScope::StatisticsScope(const Pool& pool, std::string name)
    : pool_(&pool), name_(std::move(name)), start_(pool.statistics()) {}

StatisticsDelta StatisticsScope::delta() const {
  return statistics_delta(start_, pool_->statistics());
}

void StatisticsStack::push(std::string name) {
  open_.emplace_back(*pool_, std::move(name));
}

StageRecord StatisticsStack::pop() {
  if (open_.empty()) throw state_error("StatisticsStack::pop: no stage is open");
  std::string path;
  for (const StatisticsScope& scope : open_) path += (path.empty() ? "" : "/") + scope.name();
  StageRecord record{std::move(path), open_.size() - 1, open_.back().delta()};
  records_.push_back(record);  // the last thing that can throw: the stage is still open if it does
  open_.pop_back();
  return record;
}

}  // namespace vramkit
