#pragma once
// PoolStatistics: DESIGN.md's metrics, every one read in O(segments) from counters the pool keeps,
// never by walking blocks.
#include <chrono>
#include <cstdint>

namespace vramkit {

struct PoolStatistics {
  std::uint64_t reserved_bytes = 0;      ///< Device memory the pool holds (all segments).
  std::uint64_t used_bytes = 0;          ///< Bytes in live blocks (rounded to the granularity).
  std::uint64_t requested_bytes = 0;     ///< Bytes live buffers asked for.
  std::uint64_t free_bytes = 0;
  std::uint64_t largest_free_block = 0;  ///< Over all segments.
  std::uint64_t free_ranges = 0;
  std::uint64_t live_allocations = 0;
  std::uint64_t pinned_allocations = 0;
  std::uint64_t segments = 0;
  std::uint64_t peak_used_bytes = 0;
  std::uint64_t peak_reserved_bytes = 0;
  std::uint64_t allocation_requests = 0;
  std::uint64_t allocation_failures = 0;
  std::uint64_t compactions = 0;
  std::uint64_t blocks_moved = 0;
  std::uint64_t bytes_moved = 0;
  std::chrono::duration<double> compaction_time{0};
  double sum_of_squared_free = 0;

  /// 1 - largest free block / free bytes; 0 when nothing is free. Near 1: badly fragmented.
  double fragmentation() const;
  /// 1 - sqrt(sum of squared free ranges) / free bytes; 0 when nothing (or one range) is free.
  double fragmentation_quadratic() const;
  /// used / reserved; 0 for an empty pool. Over 0.8: warn.
  double utilization() const;
  /// successful requests / all requests; 1 before the first request. Under 0.9: warn.
  double success_rate() const;
  /// GMLake's utilization: peak used / peak reserved.
  double peak_utilization() const;
};

}  // namespace vramkit
