#pragma once
// A layout whose hole compaction needs a chunk plan of several phases: a block moves up into the
// place another block vacates (a later ticket), while a third moves down over the first one's
// source. The host fault walk (fault_test.cpp) and the GPU's refused-launch walk (gpu_test.cpp)
// both compact it.
#include <cstdint>
#include <utility>
#include <vector>

#include <vramkit/pool.hpp>

#include "support/patterns.hpp"

namespace vramkit_test {

struct PhasedHoleLayout {
  static constexpr std::uint64_t unit = 2048;
  static constexpr std::uint64_t capacity_bytes = 624 * unit;
  /// The compaction that needs the phases.
  static vramkit::CompactOptions compaction() {
    return {.goal = vramkit::CompactGoal::hole, .hole_bytes = 192 * unit, .hole_alignment = 128 * unit};
  }
};

/// Fills an empty pool of PhasedHoleLayout::capacity_bytes (and no free cache) with the layout:
/// blocks of exactly these sizes, guard margins included, back to back from offset 0; writes a
/// pattern into each block that stays (keys 1, 2, ...) and frees the others. Returns the kept
/// buffers with their keys.
inline std::vector<std::pair<vramkit::Handle, std::uint64_t>> build_phased_hole_layout(vramkit::Pool& pool) {
  constexpr std::uint64_t S = PhasedHoleLayout::unit;
  struct Block {
    std::uint64_t bytes, alignment;
    bool keep;
  };
  const Block blocks[] = {{80 * S, 256, false}, {16 * S, 256, true},      {160 * S, 256, true},
                          {64 * S, 256, true},  {64 * S, 256, true},      {48 * S, 128 * S, true},
                          {80 * S, 256, false}, {64 * S, 128 * S, true}, {48 * S, 256, false}};
  std::vector<vramkit::Handle> handles;
  for (const Block& block : blocks)
    handles.push_back(pool.allocate(block.bytes - pool.options().guard_bytes, block.alignment));
  std::vector<std::pair<vramkit::Handle, std::uint64_t>> kept;
  std::uint64_t key = 1;
  for (std::size_t index = 0; index < handles.size(); ++index) {
    if (!blocks[index].keep) {
      pool.free(handles[index]);
      continue;
    }
    write_pattern(pool, handles[index], key);
    kept.emplace_back(handles[index], key++);
  }
  return kept;
}

}  // namespace vramkit_test
