// plan_hole: a hole of N bytes moving as few bytes as possible (compaction on allocation failure).
//
// Every window of N bytes that holds no fixed block is a candidate; its movable bytes are a lower
// bound of what emptying it costs. Windows are tried cheapest first, each over the same journaled
// holes (rolled back after the attempt). A window's blocks go into the holes outside it, best fit:
// first the one or two blocks that stick out of it, so that the space they leave outside the window
// is free for the others, then the others largest first. A block that fits no hole gets one from a
// nested plan_hole over the layout as it is at that point, where the window and every block that
// moved in are fixed: a cheap window of its own whose blocks fit directly, or a slide of a run of
// blocks (slide.hpp). A window's plan costs its blocks plus its nested plans; trying stops at the
// first window whose lower bound exceeds the cheapest plan found, starting from the plain slide over
// the whole layout (a window as cheap as the slide wins: its moves do not overlap their sources).
//
// Order of the moves: each move writes only into space that was free before the plan or that an
// earlier move of the list vacated, and every block moves at most once, so the list executes in
// order and as a chunk plan (no cycles). A block never moves up into its own place: that would take
// the chunk plan a phase per step of the move.
//
// Cost: O(n log n) per call for n blocks, plus the windows tried. The search is bounded: nested
// plans try at most nested_windows_tried windows, and one call visits at most
// work_per_block x (n + 16) blocks in attempts and nested layouts, plus one per bytes_per_visit of
// the cheapest plan so far (SearchBudget), after which it returns that plan. Window attempts cost
// O(b log h) for b blocks and h holes; slides O(n x run length).
#include <algorithm>
#include <set>

#include <gsl/assert>

#include "compactor/free_holes.hpp"
#include "compactor/slide.hpp"
#include "vramkit/compactor/plan.hpp"

namespace vramkit::compactor {
namespace {

using detail::align_up;

/// A nested plan tries this many of its cheapest windows, then slides (as plan_hole did alone
/// before nested plans existed).
constexpr std::size_t nested_windows_tried = 8;
/// The bound on blocks visited per call, per block of the layout (SearchBudget).
constexpr std::int64_t work_per_block = 64;
/// ... plus one visit per this many bytes of the cheapest plan so far: visiting a block takes the
/// host tens of nanoseconds, about what moving 16 KiB takes a GPU.
constexpr std::uint64_t bytes_per_visit = 16 * 1024;

std::uint64_t alignment_of(const LiveBlock& block) {
  return std::max<std::uint64_t>(block.alignment, 1);
}
std::uint64_t end_of(const LiveBlock& block) {
  return block.offset + block.bytes;
}

/// A window [offset, offset + bytes) of one segment that holds no fixed block; it overlaps the
/// blocks [first, last) of that segment, whose movable bytes are `cost`.
struct Window {
  std::uint64_t cost = 0;
  std::size_t layout = 0;
  std::uint64_t offset = 0;
  std::size_t first = 0;
  std::size_t last = 0;
};

/// Appends the windows of one segment. Only starts at a block's start or a gap's start (rounded
/// up to the alignment) need checking: sliding any window down to the start of the block or gap
/// it begins in adds no block at its low end and can only drop blocks at its high end.
/// Two pointers over the address-ordered blocks. Cost: O(n).
void collect_windows(const SegmentLayout& layout, std::size_t layout_index, std::uint64_t bytes,
                     std::uint64_t alignment, std::uint64_t max_cost, std::vector<Window>& windows) {
  if (bytes > layout.capacity) return;
  const auto blocks = layout.blocks;
  std::size_t first = 0;  // first block that ends after the window's start
  std::size_t last = 0;   // first block that starts at or after the window's end
  std::uint64_t movable_bytes = 0;
  std::size_t fixed_blocks = 0;
  std::uint64_t previous_start = UINT64_MAX;
  auto consider = [&](std::uint64_t start) {
    if (start == previous_start || start > layout.capacity - bytes) return;
    previous_start = start;
    const std::uint64_t end = start + bytes;
    for (; last < blocks.size() && blocks[last].offset < end; ++last) {
      if (blocks[last].movable)
        movable_bytes += blocks[last].bytes;
      else
        ++fixed_blocks;
    }
    for (; first < last && end_of(blocks[first]) <= start; ++first) {
      if (blocks[first].movable)
        movable_bytes -= blocks[first].bytes;
      else
        --fixed_blocks;
    }
    if (fixed_blocks != 0 || movable_bytes > max_cost) return;
    // Windows that overlap the same blocks cost the same; the lowest stands for them all.
    if (!windows.empty() && windows.back().layout == layout_index && windows.back().first == first &&
        windows.back().last == last)
      return;
    windows.push_back({movable_bytes, layout_index, start, first, last});
  };
  consider(0);
  for (const LiveBlock& block : blocks) {
    consider(align_up(block.offset, alignment));
    consider(align_up(end_of(block), alignment));
  }
}

/// One plan_hole call's bound on work, in blocks visited (window attempts and nested layouts),
/// nested plans included: work_per_block per block of the layout, plus one visit per
/// bytes_per_visit that the cheapest plan found so far moves, so that a search that has only found
/// an expensive plan (a long slide, near a full pool) may look further.
struct SearchBudget {
  std::int64_t used = 0;
  std::int64_t base = 0;
  std::uint64_t best_cost = 0;  ///< Bytes the outermost call's cheapest plan so far moves (0: none).

  void spend(std::size_t blocks) { used += static_cast<std::int64_t>(blocks); }
  bool exhausted() const { return used >= base + static_cast<std::int64_t>(best_cost / bytes_per_visit); }
};

std::optional<HolePlan> plan_within(gsl::span<const SegmentLayout> segments, detail::FreeHoles& holes,
                                    std::uint64_t bytes, std::uint64_t alignment, std::uint64_t max_cost,
                                    int depth, SearchBudget& budget, bool outermost = false);

/// The cheapest plain slide over the segments as they are; nullopt if none costs at most max_cost.
std::optional<HolePlan> cheapest_plain_slide(gsl::span<const SegmentLayout> segments, std::uint64_t bytes,
                                             std::uint64_t alignment, std::uint64_t max_cost) {
  std::optional<detail::SlideRun> best;
  std::size_t best_layout = 0;
  for (std::size_t index = 0; index < segments.size() && !(best && best->cost == 0); ++index) {
    const std::uint64_t limit = best ? best->cost - 1 : max_cost;
    const SegmentLayout& layout = segments[index];
    if (auto run = detail::cheapest_slide(layout.blocks, layout.capacity, bytes, alignment, limit)) {
      best = run;
      best_layout = index;
    }
  }
  if (!best) return std::nullopt;
  const SegmentLayout& home = segments[best_layout];
  HolePlan plan{.segment = home.segment, .offset = best->offset, .moves = {}};
  const auto destinations = detail::slide_destinations(home.blocks, *best);
  for (std::size_t index = best->first; index < best->last; ++index) {
    const LiveBlock& block = home.blocks[index];
    const std::uint64_t destination = destinations[index - best->first];
    if (destination == block.offset) continue;
    plan.moves.push_back(Move{.tag = block.tag,
                              .from_segment = home.segment,
                              .from_offset = block.offset,
                              .to_segment = home.segment,
                              .to_offset = destination,
                              .bytes = block.bytes});
  }
  Ensures(bytes_moved(plan.moves) == best->cost);
  return plan;
}

/// Builds the plan of one window over the shared holes, which it changes (the caller rolls them
/// back). Invariant between steps: `holes_` is the free space of the layout as the moves so far
/// leave it, minus the window and minus the blocks sticking out of it that have not moved yet.
class WindowAttempt {
 public:
  WindowAttempt(gsl::span<const SegmentLayout> segments, detail::FreeHoles& holes, const Window& window,
                std::uint64_t bytes, std::uint64_t max_cost, int depth, SearchBudget& budget)
      : segments_(segments),
        holes_(holes),
        window_(window),
        home_(segments[window.layout]),
        window_end_(window.offset + bytes),
        max_cost_(max_cost),
        depth_(depth),
        budget_(budget),
        total_(window.cost),
        moved_in_(segments.size()) {}

  /// The moves, or nullopt when the window cannot be emptied within max_cost.
  std::optional<std::vector<Move>> run() {
    holes_.cut(home_.segment, window_.offset, window_end_);
    const auto blocks = home_.blocks;
    const LiveBlock* left = blocks[window_.first].offset < window_.offset ? &blocks[window_.first] : nullptr;
    const LiveBlock* right =
        end_of(blocks[window_.last - 1]) > window_end_ ? &blocks[window_.last - 1] : nullptr;
    if (right == left) right = nullptr;
    std::vector<const LiveBlock*> order;
    order.reserve(window_.last - window_.first);
    for (std::size_t index = window_.first; index < window_.last; ++index)
      if (&blocks[index] != left && &blocks[index] != right) order.push_back(&blocks[index]);
    std::sort(order.begin(), order.end(), [](const LiveBlock* a, const LiveBlock* b) {
      return a->bytes != b->bytes ? a->bytes > b->bytes : a->offset < b->offset;
    });
    // The lower block sticking out may slide down into its own place (memmove going down); the
    // upper one may not move up into its own, so its part outside the window is freed after it moved.
    if (left != nullptr) {
      if (!place(*left, window_.offset)) return std::nullopt;
      left_moved_ = true;
      if (end_of(*left) > window_end_) {  // one block sticking out at both ends
        right_moved_ = true;
        holes_.release(home_.segment, window_end_, end_of(*left));
      }
    }
    if (right != nullptr) {
      if (!place(*right)) return std::nullopt;
      right_moved_ = true;
      holes_.release(home_.segment, window_end_, end_of(*right));
    }
    for (const LiveBlock* block : order)
      if (!place(*block)) return std::nullopt;
    Ensures(bytes_moved(moves_) == total_);
    return std::move(moves_);
  }

  /// The bytes the plan moves so far.
  std::uint64_t total() const { return total_; }

 private:
  /// Moves one block of the window into a hole, opening one if none fits. For the lower block
  /// sticking out of the window, `own_end` is the window's start: the part of its place below the
  /// window is free for it, and after it moved. A nested plan runs with that part taken (the plan's
  /// moves come first, so they must not fill it).
  bool place(const LiveBlock& block, std::uint64_t own_end = 0) {
    const bool own = own_end > block.offset;
    if (own) holes_.release(home_.segment, block.offset, own_end);
    auto placement = holes_.take(block.bytes, alignment_of(block));
    if (!placement) {
      if (own) holes_.cut(home_.segment, block.offset, own_end);
      if (!open_hole(block.bytes, alignment_of(block))) return false;
      placement = holes_.take(block.bytes, alignment_of(block));
      Ensures(placement.has_value());
      if (own) holes_.release(home_.segment, block.offset, own_end);
    }
    moves_.push_back(Move{.tag = block.tag,
                          .from_segment = home_.segment,
                          .from_offset = block.offset,
                          .to_segment = placement->segment,
                          .to_offset = placement->offset,
                          .bytes = block.bytes});
    moved_in_[layout_of(placement->segment)].push_back(
        {placement->offset, block.bytes, block.alignment, false, block.tag});
    return true;
  }

  /// A nested plan over the layout as it is now, within the remaining budget, applied to the
  /// holes and the moves.
  bool open_hole(std::uint64_t bytes, std::uint64_t alignment) {
    if (depth_ == 0 || total_ >= max_cost_ || budget_.exhausted()) return false;
    const Snapshot snapshot = take_snapshot();
    for (const SegmentLayout& layout : snapshot.layouts) budget_.spend(layout.blocks.size());
    // The snapshot's free space is what holes_ holds now, and the nested call leaves it so.
    const auto plan =
        plan_within(snapshot.layouts, holes_, bytes, alignment, max_cost_ - total_, depth_ - 1, budget_);
    if (!plan) return false;
    for (const Move& nested : plan->moves) {
      const Origin& origin = snapshot.origins[nested.tag];
      const LiveBlock& block = segments_[origin.layout].blocks[origin.index];
      const std::uint32_t segment = segments_[origin.layout].segment;
      Expects(nested.from_segment == segment && nested.from_offset == block.offset);
      holes_.release(segment, block.offset, end_of(block));
      holes_.cut(nested.to_segment, nested.to_offset, nested.to_offset + block.bytes);
      moves_.push_back(Move{.tag = block.tag,
                            .from_segment = segment,
                            .from_offset = block.offset,
                            .to_segment = nested.to_segment,
                            .to_offset = nested.to_offset,
                            .bytes = block.bytes});
      moved_away_.insert({origin.layout, origin.index});
      moved_in_[layout_of(nested.to_segment)].push_back(
          {nested.to_offset, block.bytes, block.alignment, false, block.tag});
    }
    total_ += bytes_moved(plan->moves);
    return true;
  }

  /// Where a movable block of a snapshot comes from: its layout and index there.
  struct Origin {
    std::size_t layout = 0;
    std::size_t index = 0;
  };
  /// The segments as they are now: blocks that have not moved (movable as before), blocks that
  /// moved in (fixed: nothing moves twice) and, in the window's segment, the window and the blocks
  /// sticking out of it that have not moved yet (one fixed block). A movable block's tag is its
  /// index in `origins`.
  struct Snapshot {
    std::vector<std::vector<LiveBlock>> blocks;
    std::vector<SegmentLayout> layouts;
    std::vector<Origin> origins;
  };
  /// O(n + k log k) for n blocks, k of them moved in.
  Snapshot take_snapshot() const {
    Snapshot snapshot;
    snapshot.blocks.resize(segments_.size());
    snapshot.layouts.resize(segments_.size());
    for (std::size_t index = 0; index < segments_.size(); ++index) {
      const SegmentLayout& layout = segments_[index];
      std::vector<LiveBlock> fixed = moved_in_[index];
      const bool home = index == window_.layout;
      if (home) {
        const auto blocks = home_.blocks;
        const std::uint64_t begin =
            left_moved_ ? window_.offset : std::min(window_.offset, blocks[window_.first].offset);
        const std::uint64_t end =
            right_moved_ ? window_end_ : std::max(window_end_, end_of(blocks[window_.last - 1]));
        fixed.push_back({begin, end - begin, 1, false, 0});
      }
      for (LiveBlock& block : fixed) block.tag = UINT32_MAX;  // never moved, never looked up
      std::sort(fixed.begin(), fixed.end(),
                [](const LiveBlock& a, const LiveBlock& b) { return a.offset < b.offset; });
      auto& blocks = snapshot.blocks[index];
      blocks.reserve(layout.blocks.size() + fixed.size());
      auto next_fixed = fixed.begin();
      for (std::size_t block = 0; block < layout.blocks.size(); ++block) {
        if (home && block >= window_.first && block < window_.last) continue;
        if (!moved_away_.empty() && moved_away_.count({index, block}) != 0) continue;
        for (; next_fixed != fixed.end() && next_fixed->offset < layout.blocks[block].offset; ++next_fixed)
          blocks.push_back(*next_fixed);
        LiveBlock copy = layout.blocks[block];
        copy.tag = static_cast<std::uint32_t>(snapshot.origins.size());
        snapshot.origins.push_back({index, block});
        blocks.push_back(copy);
      }
      blocks.insert(blocks.end(), next_fixed, fixed.end());
      snapshot.layouts[index] = {layout.segment, layout.capacity, layout.granularity, blocks};
    }
    return snapshot;
  }

  std::size_t layout_of(std::uint32_t segment) const {
    for (std::size_t index = 0; index < segments_.size(); ++index)
      if (segments_[index].segment == segment) return index;
    Expects(false);
    return 0;
  }

  gsl::span<const SegmentLayout> segments_;
  detail::FreeHoles& holes_;
  const Window& window_;
  const SegmentLayout& home_;
  std::uint64_t window_end_;
  std::uint64_t max_cost_;
  int depth_;
  SearchBudget& budget_;
  std::uint64_t total_;
  bool left_moved_ = false;
  bool right_moved_ = false;
  std::vector<Move> moves_;
  std::vector<std::vector<LiveBlock>> moved_in_;              // per layout: blocks placed there
  std::set<std::pair<std::size_t, std::size_t>> moved_away_;  // (layout, index) moved by nested plans
};

// `holes` are the free space of `segments`; they are the same when the call returns. depth 0: a
// window's blocks must fit the holes as they are (no nested plans), and only the cheapest
// nested_windows_tried windows are tried. The outermost call starts from the plain slide, which
// bounds the windows worth trying and sets the budget; nested calls try it last, within the bound
// the windows left (most nested calls find a window, and the slide is the costlier search).
std::optional<HolePlan> plan_within(gsl::span<const SegmentLayout> segments, detail::FreeHoles& holes,
                                    std::uint64_t bytes, std::uint64_t alignment, std::uint64_t max_cost,
                                    int depth, SearchBudget& budget, bool outermost) {
  std::vector<Window> windows;
  for (std::size_t index = 0; index < segments.size(); ++index)
    collect_windows(segments[index], index, bytes, alignment, max_cost, windows);
  // A heap, cheapest on top: most calls need only the first few.
  auto costlier = [](const Window& a, const Window& b) {
    return std::tuple(a.cost, a.last - a.first, a.layout, a.offset) >
           std::tuple(b.cost, b.last - b.first, b.layout, b.offset);
  };
  std::make_heap(windows.begin(), windows.end(), costlier);
  if (!windows.empty() && windows.front().cost == 0)
    return HolePlan{
        .segment = segments[windows.front().layout].segment, .offset = windows.front().offset, .moves = {}};

  std::optional<HolePlan> best;
  std::uint64_t limit = max_cost;  // what a better plan may cost
  if (outermost) {
    best = cheapest_plain_slide(segments, bytes, alignment, max_cost);
    if (best) limit = budget.best_cost = bytes_moved(best->moves);  // a window as cheap wins
  }
  std::size_t tries_left = depth == 0 ? nested_windows_tried : windows.size();
  for (auto end = windows.end(); end != windows.begin() && tries_left != 0 && !budget.exhausted();
       --end, --tries_left) {
    std::pop_heap(windows.begin(), end, costlier);
    const Window& window = *(end - 1);
    if (window.cost > limit) break;
    budget.spend(window.last - window.first);
    const std::size_t mark = holes.mark();
    WindowAttempt attempt(segments, holes, window, bytes, limit, depth, budget);
    if (auto moves = attempt.run()) {
      best = HolePlan{
          .segment = segments[window.layout].segment, .offset = window.offset, .moves = std::move(*moves)};
      limit = attempt.total() - 1;  // > 0: a window of cost 0 returned above
      if (outermost) budget.best_cost = attempt.total();
    }
    holes.rollback(mark);
  }
  if (outermost) return best;
  if (auto slide = cheapest_plain_slide(segments, bytes, alignment, limit)) return slide;
  return best;
}

}  // namespace

// Nested plans go one level deep: deeper ones did worse on the traces measured (docs/replay.md),
// spending the budget on few windows.
std::optional<HolePlan> plan_hole(gsl::span<const SegmentLayout> segments, std::uint64_t bytes,
                                  std::uint64_t alignment, std::uint64_t max_bytes_moved) {
  Expects(alignment != 0 && (alignment & (alignment - 1)) == 0);
  if (bytes == 0) bytes = 1;  // an empty request still needs an aligned place to point at
  std::uint64_t blocks = 0;
  std::uint64_t free_bytes = 0;
  for (const SegmentLayout& layout : segments) {
    blocks += layout.blocks.size();
    free_bytes += layout.capacity;
    for (const LiveBlock& block : layout.blocks) free_bytes -= block.bytes;
  }
  if (free_bytes < bytes) return std::nullopt;  // no plan can help
  SearchBudget budget{.base = work_per_block * static_cast<std::int64_t>(blocks + 16)};
  detail::FreeHoles holes;
  for (const SegmentLayout& layout : segments) holes.add_gaps(layout);
  return plan_within(segments, holes, bytes, alignment, max_bytes_moved, 1, budget, true);
}

}  // namespace vramkit::compactor
