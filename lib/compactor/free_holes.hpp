#pragma once
// Best-fit placement of blocks into the free holes of several segments, shared by plan_hole and
// plan_evacuation. Internal to the compactor.
#include <cstdint>
#include <optional>
#include <set>
#include <tuple>

#include "vramkit/compactor/plan.hpp"

namespace vramkit::compactor::detail {

/// Rounds up to a power of two; 0 and 1 mean "any offset".
constexpr std::uint64_t align_up(std::uint64_t value, std::uint64_t alignment) {
  return alignment <= 1 ? value : (value + alignment - 1) & ~(alignment - 1);
}

/// Where a block was placed.
struct Placement {
  std::uint32_t segment = 0;
  std::uint64_t offset = 0;
};

/// Free holes of several segments, ordered by (size, segment, begin) for best fit.
/// Invariant: holes are non-empty, pairwise disjoint and lie in free space of their segment; a
/// hole's leftover parts after a placement are holes again, so later blocks can use them.
/// Cost: O(log h) per insertion and per placement, plus the holes of sizes in
/// [bytes, bytes + alignment - 1) that a placement skips because they cannot be aligned.
class FreeHoles {
 public:
  void add(std::uint32_t segment, std::uint64_t begin, std::uint64_t end) {
    if (begin < end) holes_.insert({end - begin, segment, begin});
  }

  /// Adds the free gaps of `layout` (between its blocks and after the last), minus the window
  /// [excluded_begin, excluded_end) which the caller is emptying.
  void add_gaps(const SegmentLayout& layout, std::uint64_t excluded_begin = 0,
                std::uint64_t excluded_end = 0) {
    std::uint64_t cursor = 0;
    auto add_outside_window = [&](std::uint64_t begin, std::uint64_t end) {
      if (excluded_begin >= excluded_end || end <= excluded_begin || begin >= excluded_end) {
        add(layout.segment, begin, end);
        return;
      }
      add(layout.segment, begin, excluded_begin);
      add(layout.segment, excluded_end, end);
    };
    for (const LiveBlock& block : layout.blocks) {
      if (cursor < block.offset) add_outside_window(cursor, block.offset);
      cursor = block.offset + block.bytes;
    }
    if (cursor < layout.capacity) add_outside_window(cursor, layout.capacity);
  }

  /// Best fit: the smallest hole that holds `bytes` at an offset aligned to `alignment`.
  std::optional<Placement> take(std::uint64_t bytes, std::uint64_t alignment) {
    for (auto hole = holes_.lower_bound({bytes, 0, 0}); hole != holes_.end(); ++hole) {
      const auto [size, segment, begin] = *hole;
      const std::uint64_t end = begin + size;
      const std::uint64_t offset = align_up(begin, alignment);
      if (offset + bytes > end) continue;
      holes_.erase(hole);
      add(segment, begin, offset);
      add(segment, offset + bytes, end);
      return Placement{segment, offset};
    }
    return std::nullopt;
  }

  std::size_t size() const { return holes_.size(); }

 private:
  std::set<std::tuple<std::uint64_t, std::uint32_t, std::uint64_t>> holes_;  // size, segment, begin
};

}  // namespace vramkit::compactor::detail
