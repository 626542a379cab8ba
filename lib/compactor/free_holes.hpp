#pragma once
// Best-fit placement of blocks into the free holes of several segments, shared by plan_hole and
// plan_evacuation. Internal to the compactor.
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

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

/// Free holes of several segments, indexed by (size, segment, begin) for best fit and by
/// (segment, begin) for neighbours, with a journal so that a caller can try a plan and undo it.
/// Invariant: holes are non-empty, pairwise disjoint and lie in free space of their segment; both
/// indexes hold the same holes; a hole's leftover parts after a placement are holes again, so later
/// blocks can use them. Holes added with add() may touch; release() merges with its neighbours.
/// Cost: O(log h) per change (add, release, each hole take or cut removes), plus, for take, the
/// holes of sizes in [bytes, bytes + alignment - 1) that cannot be aligned. rollback undoes changes
/// in O(log h) each.
class FreeHoles {
 public:
  void add(std::uint32_t segment, std::uint64_t begin, std::uint64_t end) {
    if (begin < end) insert({end - begin, segment, begin});
  }

  /// Adds the free gaps of `layout` (between its blocks and after the last).
  void add_gaps(const SegmentLayout& layout) {
    std::uint64_t cursor = 0;
    for (const LiveBlock& block : layout.blocks) {
      add(layout.segment, cursor, block.offset);
      cursor = block.offset + block.bytes;
    }
    add(layout.segment, cursor, layout.capacity);
  }

  /// Frees [begin, end) (which must not overlap a hole) and merges it with the holes that touch it.
  void release(std::uint32_t segment, std::uint64_t begin, std::uint64_t end) {
    if (begin >= end) return;
    auto after = by_address_.lower_bound({segment, begin});
    if (after != by_address_.end() && after->first.first == segment && after->first.second == end) {
      const Hole next{after->second - end, segment, end};
      erase(next);
      end += std::get<0>(next);
    }
    after = by_address_.lower_bound({segment, begin});
    if (after != by_address_.begin()) {
      const auto before = std::prev(after);
      if (before->first.first == segment && before->second == begin) {
        const Hole previous{begin - before->first.second, segment, before->first.second};
        erase(previous);
        begin = std::get<2>(previous);
      }
    }
    insert({end - begin, segment, begin});
  }

  /// Removes [begin, end) of `segment` from the holes; the parts of cut holes outside it stay.
  void cut(std::uint32_t segment, std::uint64_t begin, std::uint64_t end) {
    auto hole = by_address_.lower_bound({segment, begin});
    if (hole != by_address_.begin()) {
      const auto before = std::prev(hole);
      if (before->first.first == segment && before->second > begin) hole = before;
    }
    std::vector<Hole> overlapping;
    for (; hole != by_address_.end() && hole->first.first == segment && hole->first.second < end; ++hole)
      overlapping.push_back({hole->second - hole->first.second, segment, hole->first.second});
    for (const Hole& cut_hole : overlapping) {
      const auto [size, hole_segment, hole_begin] = cut_hole;
      erase(cut_hole);
      add(hole_segment, hole_begin, std::min(begin, hole_begin + size));
      add(hole_segment, std::max(end, hole_begin), hole_begin + size);
    }
  }

  /// Best fit: the smallest hole that holds `bytes` at an offset aligned to `alignment`.
  std::optional<Placement> take(std::uint64_t bytes, std::uint64_t alignment) {
    for (auto hole = by_size_.lower_bound({bytes, 0, 0}); hole != by_size_.end(); ++hole) {
      const auto [size, segment, begin] = *hole;
      const std::uint64_t end = begin + size;
      const std::uint64_t offset = align_up(begin, alignment);
      if (offset + bytes > end) continue;
      erase(*hole);
      add(segment, begin, offset);
      add(segment, offset + bytes, end);
      return Placement{segment, offset};
    }
    return std::nullopt;
  }

  std::size_t size() const { return by_size_.size(); }

  /// The holes as (segment, begin, end) in address order. O(h); for tests.
  std::vector<std::tuple<std::uint32_t, std::uint64_t, std::uint64_t>> in_address_order() const {
    std::vector<std::tuple<std::uint32_t, std::uint64_t, std::uint64_t>> holes;
    holes.reserve(by_address_.size());
    for (const auto& [key, end] : by_address_) holes.emplace_back(key.first, key.second, end);
    return holes;
  }

  /// A point to roll back to: changes after it can be undone.
  std::size_t mark() const { return journal_.size(); }
  /// Undoes every change since `point`, newest first.
  void rollback(std::size_t point) {
    while (journal_.size() > point) {
      const auto [inserted, hole] = journal_.back();
      journal_.pop_back();
      if (inserted)
        unindex(hole);
      else
        index(hole);
    }
  }

 private:
  using Hole = std::tuple<std::uint64_t, std::uint32_t, std::uint64_t>;  // size, segment, begin

  // By value: callers pass elements of the indexes, which these calls free.
  void insert(Hole hole) {
    index(hole);
    journal_.push_back({true, hole});
  }
  void erase(Hole hole) {
    unindex(hole);
    journal_.push_back({false, hole});
  }
  void index(const Hole& hole) {
    const auto [size, segment, begin] = hole;
    by_size_.insert(hole);
    by_address_.emplace(std::pair{segment, begin}, begin + size);
  }
  void unindex(Hole hole) {
    by_size_.erase(hole);
    by_address_.erase({std::get<1>(hole), std::get<2>(hole)});
  }

  std::set<Hole> by_size_;
  std::map<std::pair<std::uint32_t, std::uint64_t>, std::uint64_t> by_address_;  // (segment, begin) -> end
  std::vector<std::pair<bool, Hole>> journal_;                                   // (inserted?, hole)
};

}  // namespace vramkit::compactor::detail
