#pragma once
// Seeing memory: statistics and the block map as JSON (one documented schema, docs/metrics.md),
// and the block map as an SVG picture (each segment a bar, blocks coloured by state, a legend and
// the headline metrics). One picture before and one after a compaction show its effect.
#include <string>

#include <vramkit/pool.hpp>
#include <vramkit/statistics.hpp>

namespace vramkit {

/// {"reserved_bytes": ..., "fragmentation": ..., ...}: every PoolStatistics field and metric.
std::string statistics_json(const PoolStatistics& statistics);
/// {"statistics": {...}, "segments": [{"segment", "address", "bytes", "blocks": [{"offset", "bytes",
/// "state", "slot"}]}]}
std::string memory_map_json(const Pool& pool);
/// An SVG document; `title` goes above the bars.
std::string memory_map_svg(const Pool& pool, const std::string& title = "vramkit memory map");

}  // namespace vramkit
