// statistics_json and memory_map_json: the schema docs/metrics.md documents, through nlohmann::json.
//
// Invariant: every PoolStatistics field appears under its own name (compaction_time as
// compaction_time_seconds) and every derived metric under its member function's name, so a reader
// can recompute the metrics from the fields. Cost: O(segments) for statistics_json; O(blocks) for
// memory_map_json, which reads statistics and block map under two separate locks (a concurrent
// change may show in one and not the other).
#include <vramkit/memory_map.hpp>

#include <nlohmann/json.hpp>

namespace vramkit {
namespace {

nlohmann::json statistics_object(const PoolStatistics& statistics) {
  return {
      {"reserved_bytes", statistics.reserved_bytes},
      {"used_bytes", statistics.used_bytes},
      {"requested_bytes", statistics.requested_bytes},
      {"free_bytes", statistics.free_bytes},
      {"largest_free_block", statistics.largest_free_block},
      {"free_ranges", statistics.free_ranges},
      {"live_allocations", statistics.live_allocations},
      {"pinned_allocations", statistics.pinned_allocations},
      {"segments", statistics.segments},
      {"peak_used_bytes", statistics.peak_used_bytes},
      {"peak_reserved_bytes", statistics.peak_reserved_bytes},
      {"allocation_requests", statistics.allocation_requests},
      {"allocation_failures", statistics.allocation_failures},
      {"compactions", statistics.compactions},
      {"blocks_moved", statistics.blocks_moved},
      {"bytes_moved", statistics.bytes_moved},
      {"compaction_time_seconds", statistics.compaction_time.count()},
      {"sum_of_squared_free", statistics.sum_of_squared_free},
      {"fragmentation", statistics.fragmentation()},
      {"fragmentation_quadratic", statistics.fragmentation_quadratic()},
      {"utilization", statistics.utilization()},
      {"success_rate", statistics.success_rate()},
      {"peak_utilization", statistics.peak_utilization()},
  };
}

}  // namespace

std::string statistics_json(const PoolStatistics& statistics) {
  return statistics_object(statistics).dump(2);
}

std::string memory_map_json(const Pool& pool) {
  nlohmann::json segments = nlohmann::json::array();
  for (const SegmentInfo& segment : pool.segments()) {
    segments.push_back({{"segment", segment.segment},
                        {"address", segment.address},
                        {"bytes", segment.bytes},
                        {"blocks", nlohmann::json::array()}});
  }
  for (const BlockInfo& block : pool.block_map()) {
    if (block.segment >= segments.size()) continue;  // a segment added between the two reads
    nlohmann::json entry = {
        {"offset", block.offset}, {"bytes", block.bytes}, {"state", to_string(block.state)}};
    if (block.state != BlockState::free) entry["slot"] = block.slot;
    segments[block.segment]["blocks"].push_back(std::move(entry));
  }
  const nlohmann::json document = {{"statistics", statistics_object(pool.statistics())},
                                   {"segments", std::move(segments)}};
  return document.dump(2);
}

}  // namespace vramkit
