#pragma once
// Compaction planning: pure host code. Given the live blocks of each segment in address order and
// which of them may move, produce moves for one of four goals: full compaction, a hole of N bytes
// moving as few bytes as possible, a byte budget, or emptying trailing segments.
#include <cstdint>
#include <optional>
#include <vector>

#include <gsl/span>

namespace vramkit::compactor {

/// One live (allocated) block as the planner sees it. Trivial, like Move, so that a pool's buffers
/// of them are sized without a pass of zeroes before threads fill them: LiveBlock{} is all zeroes
/// (movable false), a declaration without an initializer leaves the fields indeterminate, and an
/// initializer should name every field.
struct LiveBlock {
  std::uint64_t offset;
  std::uint64_t bytes;      ///< Multiple of the segment's granularity.
  std::uint64_t alignment;  ///< A new offset must be a multiple of this (power of two).
  bool movable;             ///< False for pinned blocks and arenas: fixed obstacles.
  std::uint32_t tag;        ///< The owner's id (the pool's slot index), copied into moves.
};

/// One segment: a contiguous range [0, capacity) of a device region. Invariant: blocks sorted by
/// offset, disjoint, inside [0, capacity).
struct SegmentLayout {
  std::uint32_t segment = 0;
  std::uint64_t capacity = 0;
  std::uint64_t granularity = 256;
  gsl::span<const LiveBlock> blocks;
};

/// Moving one block. Offsets are within their segments. Trivial: Move{} is all zeroes.
struct Move {
  std::uint32_t tag;
  std::uint32_t from_segment;
  std::uint64_t from_offset;
  std::uint32_t to_segment;
  std::uint64_t to_offset;
  std::uint64_t bytes;
};

/// Full compaction of one segment: movable blocks slide down in address order; pinned blocks stay
/// and the gap before each is filled with later blocks that fit. A prefix of the result is itself a
/// valid plan, which is how max_bytes_moved (incremental compaction) is honoured: moves are taken in
/// order until the next would pass the budget. Cost: O(n x pinned blocks).
std::vector<Move> plan_full(const SegmentLayout& segment, std::uint64_t max_bytes_moved = UINT64_MAX);
/// The same moves, appended to `moves` (a pool reusing its storage, one segment after another).
void plan_full(const SegmentLayout& segment, std::uint64_t max_bytes_moved, std::vector<Move>& moves);

/// plan_full in parts: one segment's blocks are given in address order over as many add() calls as
/// wanted, and the moves are those one plan_full call makes. A pool walks and plans the rest of a
/// segment while the device moves the part planned first: the moves of a prefix of the blocks are
/// executable before the rest (they write only below their blocks, into space that was free or
/// that blocks of the prefix left).
class FullPlanner {
 public:
  FullPlanner(std::uint32_t segment, std::uint64_t max_bytes_moved) : segment_(segment), max_bytes_(max_bytes_moved) {}
  /// Appends the moves of `blocks`, which follow the blocks of earlier calls. Once the budget has
  /// stopped the plan, later blocks stay where they are.
  void add(gsl::span<const LiveBlock> blocks, std::vector<Move>& moves);
  std::uint64_t bytes_moved() const { return bytes_moved_; }

 private:
  struct Gap {
    std::uint64_t begin = 0;
    std::uint64_t end = 0;
  };
  std::uint32_t segment_;
  std::uint64_t max_bytes_;
  std::uint64_t cursor_ = 0;  ///< Everything below is placed (or a gap listed in gaps_).
  std::uint64_t bytes_moved_ = 0;
  bool stopped_ = false;
  std::vector<Gap> gaps_;  ///< Free space before fixed blocks, in address order.
};

/// A hole of at least `bytes` at an offset aligned to `alignment`, in any segment, made by moving
/// as few bytes as the search finds: a window with no fixed block whose blocks move into holes
/// elsewhere (best fit; a block that fits no hole gets one from a nested, cheaper plan of the same
/// kind), tried cheapest window first, or a run of consecutive movable blocks slid down (as
/// plan_full) to gather the free space next to it. Never costs less than the cheapest window's
/// movable bytes; equals it whenever that window's blocks fit the holes outside it. The moves
/// execute in list order (each writes only into space free before the plan or vacated by an
/// earlier move) and as one chunk plan; no block moves up into its own place. nullopt when no plan
/// within max_bytes_moved exists, or the search (bounded, see hole_plan.cpp) finds none.
/// Cost: O(n log n) for n blocks, plus the search: it visits at most 64 (n + 16) blocks in window
/// attempts and nested layouts, plus one per 16 KiB the cheapest plan so far moves (hole_plan.cpp),
/// and O(n x run length) per slide considered.
struct HolePlan {
  std::uint32_t segment = 0;
  std::uint64_t offset = 0;  ///< Where the hole will be.
  std::vector<Move> moves;
};
std::optional<HolePlan> plan_hole(gsl::span<const SegmentLayout> segments, std::uint64_t bytes,
                                  std::uint64_t alignment, std::uint64_t max_bytes_moved = UINT64_MAX);

/// Moves every block out of `segments[victim]` into free space of the other segments (best fit,
/// largest first). nullopt if any block is fixed or the rest does not fit. Cost: O(n log n).
std::optional<std::vector<Move>> plan_evacuation(gsl::span<const SegmentLayout> segments, std::size_t victim);

std::uint64_t bytes_moved(gsl::span<const Move> moves);

}  // namespace vramkit::compactor
