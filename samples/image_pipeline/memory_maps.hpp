#pragma once
// The one place the sample calls the metrics layer (memory_map_svg). Builds without lib/metrics
// write no SVG and say so.
#include <filesystem>
#include <string>

#include <vramkit/pool.hpp>

/// Writes the pool's memory map as an SVG; returns false when this build has no memory maps.
bool write_memory_map(const vramkit::Pool& pool, const std::filesystem::path& path, const std::string& title);
