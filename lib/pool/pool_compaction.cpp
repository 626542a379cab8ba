// Pool compaction: plan (compactor), execute (device), then rebuild heaps and rewrite slots for the
// moves that completed. A device failure part way leaves every handle resolving to intact data.
#include "pool/pool_segment.hpp"
#include "pool/worker_team.hpp"

#include <algorithm>
#include <chrono>
#include <exception>
#include <optional>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <utility>

#ifdef __linux__
#include <sched.h>
#endif

#include <vramkit/compactor/chunk_plan.hpp>
#include <vramkit/detail/bits.hpp>
#include <vramkit/detail/message.hpp>
#include <vramkit/errors.hpp>

namespace vramkit {
namespace {

/// Below this mean size of a live block, a full compaction plans everything first (compact_full).
constexpr std::uint64_t parts_min_mean_bytes = 64 * 1024;

/// The CPUs the calling thread may run on (its affinity mask, as taskset or a container's cpuset
/// sets it; threads it starts inherit it), else the hardware's.
unsigned usable_cpus() {
#ifdef __linux__
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return static_cast<unsigned>(CPU_COUNT(&set));
#endif
  return std::thread::hardware_concurrency();
}

/// A failed result with no entries says that no move completed.
bool completed(const ExecutionResult& result, std::size_t move) {
  return result.complete || (move < result.move_completed.size() && result.move_completed[move]);
}

}  // namespace

// Live blocks of every segment in address order, as the planner sees them. O(blocks).
void Pool::live_layout(Layout& layout) const {
  clear_layout(layout);
  for (std::size_t index = 0; index < segments_.size(); ++index) {
    BlockId next = segments_[index]->heap.first();
    walk_live_blocks(index, next, SIZE_MAX, layout[index]);
  }
}

// One empty list a segment, each with room for the segment's live blocks; returns their number.
std::size_t Pool::clear_layout(Layout& layout) const {
  layout.resize(segments_.size());
  std::size_t live_blocks = 0;
  for (std::size_t index = 0; index < segments_.size(); ++index) {
    layout[index].clear();
    layout[index].reserve(segments_[index]->heap.allocated_blocks());
    live_blocks += segments_[index]->heap.allocated_blocks();
  }
  return live_blocks;
}

// Appends up to `limit` live blocks of a segment, from block `next` on in address order; leaves
// `next` at the block after the last one visited. Returns whether the segment's end was reached.
// When no live slot is pinned, an arena's or aligned above the granularity, every block is movable
// at the granularity, and no slot is read: after a batch's host work has evicted the caches, the
// slots' cache lines were half the walk's time (docs/benchmarks.md, run 41).
bool Pool::walk_live_blocks(std::size_t segment, BlockId& next, std::size_t limit,
                            LiveBlocks& blocks) const {
  const Heap& heap = segments_[segment]->heap;
  const bool read_slots = pinned_ != 0 || over_aligned_ != 0;  // loop-invariant: the compiler unswitches it
  for (; next != no_block && limit != 0; next = heap.next(next)) {
    const HeapBlock block = heap.block(next);
    if (block.free) continue;
    if (read_slots) {
      const Slot& entry = (*table_)[block.tag];
      blocks.push_back({block.offset, block.bytes, entry.alignment, entry.pins == 0 && entry.kind == SlotKind::buffer,
                        block.tag});
    } else {
      blocks.push_back({block.offset, block.bytes, options_.granularity, true, block.tag});
    }
    --limit;
  }
  return next == no_block;
}

std::vector<compactor::SegmentLayout> Pool::layouts(const Layout& blocks) const {
  std::vector<compactor::SegmentLayout> result(segments_.size());
  for (std::size_t index = 0; index < segments_.size(); ++index) {
    result[index] = {static_cast<std::uint32_t>(index), segments_[index]->heap.capacity(), options_.granularity,
                     blocks[index]};
  }
  return result;
}

CompactionReport Pool::compact(const CompactOptions& options) {
  std::lock_guard lock(mutex_);
  return compact_locked(options);
}

CompactionReport Pool::compact_locked(const CompactOptions& options) {
  if (options.goal == CompactGoal::hole && options.hole_bytes == 0) {
    throw invalid_argument("compaction goal 'hole' needs hole_bytes > 0");
  }
  if (options.goal == CompactGoal::hole && options.hole_alignment != 0 && !detail::is_power_of_two(options.hole_alignment)) {
    throw invalid_argument(detail::message("hole alignment ", options.hole_alignment, " is not a power of two"));
  }
  const auto started = std::chrono::steady_clock::now();
  // A full compaction's walk and update run on the team, whose threads sleep between compactions
  // and take tens of microseconds to wake: they wake now, while this thread takes the statistics
  // and sets out the walk.
  if (options.goal == CompactGoal::full && team_) team_->wake();
  drain_cache();  // cached blocks are free space to merge
  CompactionReport report;
  {
    const PoolStatistics before = statistics_locked();
    report.fragmentation_before = before.fragmentation();
    report.largest_free_before = before.largest_free_block;
  }
  if (options_.guard_bytes != 0) {  // never move a block whose margin shows corruption
    for (std::size_t slot = 0; slot < table_->size(); ++slot) {
      const Slot& entry = (*table_)[slot];
      // A slot being placed (compaction on allocation failure) has no block, hence no margin yet.
      if (entry.live && entry.block != no_block) check_guard_locked(static_cast<std::uint32_t>(slot));
    }
  }
  if (!compaction_scratch_) compaction_scratch_ = std::make_unique<CompactionScratch>();
  CompactionScratch& scratch = *compaction_scratch_;
  scratch.moves.clear();
  scratch.placed_ahead = scratch.slots_ahead = scratch.nodes_ahead = scratch.slide_staged = false;
  if (options.goal == CompactGoal::full) {
    compact_full(options.max_bytes_moved, report);
    if (options.release_empty_segments) release_trailing_segments(options.max_bytes_moved, report);
  } else {
    live_layout(scratch.layout);
    const auto planning = std::chrono::steady_clock::now();
    const std::uint64_t alignment = std::max(options.hole_alignment, options_.granularity);
    auto plan = compactor::plan_hole(layouts(scratch.layout), options.hole_bytes, alignment, options.max_bytes_moved);
    report.goal_met = plan.has_value();
    if (plan) scratch.moves = std::move(plan->moves);
    report.plan_seconds += std::chrono::steady_clock::now() - planning;
    apply_moves(scratch.moves, scratch.layout, report);
  }

  const PoolStatistics after = statistics_locked();
  report.fragmentation_after = after.fragmentation();
  report.largest_free_after = after.largest_free_block;
  report.seconds = std::chrono::steady_clock::now() - started;
  ++compactions_;
  compaction_time_ += report.seconds;
  return report;
}

// A full compaction walks the heaps and plans in parts (Device::execute_moves_in_parts): the
// device moves each part while the host walks and plans the next, each part twice as large as
// all before it (parts of 1, 2, 6 and 18 27ths of the blocks; a remainder smaller than the first
// part joins the last). The first part is ready after a 27th of the planning, and the update that
// follows (about as long as the planning) fits in the last part's move. The GPU stays busy while
// the host plans a part in the time the GPU moves the one before it, a third as many blocks: on
// the H200 the host walks, plans and stages about 45 ns a block against about 95 ns to move one,
// so the second and third parts arrive 10..50 us late (docs/benchmarks.md, run 23); smaller steps
// measured no better, each part costing the GPU a launch and a wave that ends partly idle. With
// smaller blocks the host is the bottleneck whatever the order, so the automatic choice plans
// first below a mean of 64 KiB a live block (which the GPU moves in about 30 ns). The moves are those of
// compactor::plan_full on each segment in turn. With nothing pinned, an arena's or aligned above
// the granularity, and no byte budget, the team writes the plan while the device runs what is
// written, whatever the mean (write_slide), unless compaction_parts is `never` or no segment has
// parallel_update_min_blocks live blocks; planned first, a segment's walk and plan are shared by
// the team (plan_slide), and so is the device's staging of the moves (HostThreads).
void Pool::compact_full(std::uint64_t max_bytes_moved, CompactionReport& report) {
  CompactionScratch& scratch = *compaction_scratch_;
  Layout& layout = scratch.layout;
  const std::size_t live_blocks = clear_layout(layout);
  scratch.moves.reserve(live_blocks);  // at most one move a block: no part reallocates it
  std::size_t segment = 0;
  BlockId next = segments_[0]->heap.first();
  std::optional<compactor::FullPlanner> planner;
  std::uint64_t budget = max_bytes_moved;
  const bool in_parts = options_.compaction_parts == CompactionParts::always ||
                        (options_.compaction_parts == CompactionParts::automatic && live_blocks != 0 &&
                         used_ / live_blocks >= parts_min_mean_bytes);
  std::size_t largest = 0;
  for (const auto& each : segments_) largest = std::max<std::size_t>(largest, each->heap.allocated_blocks());
  // Every block may move at the granularity: the team writes the plan while the device runs it
  // (write_slide), or shares the walk and plan of a large segment before (plan_slide). The moves
  // are plan_full's, segment after segment.
  const bool slides = pinned_ == 0 && over_aligned_ == 0;
  if (slides) start_team(largest);
  const bool written = slides && writes_slide(budget, largest);
  if (written || (slides && !in_parts)) {
    const auto start = std::chrono::steady_clock::now();
    scratch.slide_moves.clear();
    scratch.slide_moves.reserve(live_blocks);
    scratch.placements.resize(segments_.size());  // the update's room (reserve_update), taken now
    scratch.moved.assign(segments_.size(), {});
    for (std::size_t index = 0; index < segments_.size(); ++index) {
      scratch.placements[index].clear();
      scratch.placements[index].reserve(segments_[index]->heap.allocated_blocks());
    }
    scratch.placed_ahead = budget == UINT64_MAX;
    if (written) {
      reserve_update({});  // before the team walks the heaps
      write_slide(report);
      return;
    }
    for (std::size_t index = 0; index < segments_.size(); ++index) plan_slide(index, budget, report);
    report.plan_seconds += std::chrono::steady_clock::now() - start;
    // Even with nothing to move: the device then waits for the uses of released pins, which ends them.
    run_moves(scratch.slide_moves, nullptr, nullptr, nullptr, true, layout, report);
    return;
  }
  const std::size_t first_part = std::max<std::size_t>(32, live_blocks / 27);
  std::size_t part_blocks = in_parts ? first_part : SIZE_MAX;
  std::size_t planned_blocks = 0;
  std::exception_ptr planning_failed;
  // Never throws (Device::execute_moves_in_parts): if planning fails (host memory), the moves so
  // far are a prefix of the plan and run as such; the walk of the segment at hand is finished so
  // that update_heaps sees all its blocks (the layout has room for them: no allocation), and the
  // error is raised once the moves that ran are applied.
  const Device::PlanMore plan_more = [&](std::vector<compactor::Move>& moves) noexcept {
    const auto start = std::chrono::steady_clock::now();
    std::size_t walked = 0;
    try {
      while (segment < segments_.size() && walked < part_blocks) {
        if (!planner) planner.emplace(static_cast<std::uint32_t>(segment), budget);
        LiveBlocks& blocks = layout[segment];
        const std::size_t first = blocks.size();
        const bool segment_done = walk_live_blocks(segment, next, part_blocks - walked, blocks);
        walked += blocks.size() - first;
        planner->add(gsl::span<const compactor::LiveBlock>(blocks).subspan(first), moves);
        if (segment_done) {
          budget -= planner->bytes_moved();
          planner.reset();
          if (++segment < segments_.size()) next = segments_[segment]->heap.first();
        }
      }
    } catch (...) {
      planning_failed = std::current_exception();
      if (segment < segments_.size()) walk_live_blocks(segment, next, SIZE_MAX, layout[segment]);
      segment = segments_.size();
    }
    planned_blocks += walked;
    if (part_blocks != SIZE_MAX) {
      part_blocks = 2 * planned_blocks;
      if (live_blocks - std::min(live_blocks, planned_blocks + part_blocks) < first_part) part_blocks = SIZE_MAX;
    }
    report.plan_seconds += std::chrono::steady_clock::now() - start;
    return segment < segments_.size();
  };
  apply_moves(scratch.moves, plan_more, layout, report);
  if (planning_failed) std::rethrow_exception(planning_failed);
}

// Executes moves and applies the completed ones to slots and heaps. Throws device_error after
// applying what completed if the device failed part way.
//
// The heaps and slots are updated while the device moves the bytes (Device::execute_moves calls
// back once the moves are queued), as if every move will complete: nobody can look at them before
// this returns, as the pool's lock is held. If not every move completes, or that update fails, the
// moved slots are put back and update_heaps runs again with the result, rebuilding every heap a
// move names: the completed moves are applied, the rest undone. The update's host memory is taken
// before anything moves (reserve_update), so it can fail only on a broken invariant.
void Pool::apply_moves(gsl::span<const compactor::Move> moves, const Layout& layout, CompactionReport& report) {
  if (!moves.empty()) run_moves(moves, nullptr, nullptr, nullptr, false, layout, report);
}

void Pool::apply_moves(std::vector<compactor::Move>& moves, const Device::PlanMore& plan_more, const Layout& layout,
                       CompactionReport& report) {
  run_moves({}, &moves, &plan_more, nullptr, true, layout, report);
}

// `whole`, or the moves that plan_more appends to `growing` while the device runs them.
// `in_segments`: no move leaves its segment (a full compaction's), which spares reserve_update a
// pass over the moves.
void Pool::run_moves(gsl::span<const compactor::Move> whole, std::vector<compactor::Move>* growing,
                     const Device::PlanMore* plan_more, const Device::MovesWritten* written, bool in_segments,
                     const Layout& layout, CompactionReport& report) {
  std::size_t written_moves = whole.size();  // of `whole`, when the team writes it (`written`)
  const auto all = [&] {
    return growing != nullptr ? gsl::span<const compactor::Move>(*growing) : whole.first(written_moves);
  };
  CompactionScratch& scratch = *compaction_scratch_;
  // A plan that the team writes took its room before the team started (write_slide): a heap's
  // room for its rebuild may move its nodes, which the team walks.
  if (written == nullptr) reserve_update(in_segments ? gsl::span<const compactor::Move>{} : all());

  // Slots written with the plan (write_slide) count as an update started.
  bool updated_ahead = false, update_started = written != nullptr && scratch.slots_ahead;
  bool written_final = false;
  CompactionReport ahead;  // counts of the update made ahead of the result
  std::chrono::duration<double> update_time{0};
  const auto update_ahead = [&]() noexcept {
    const auto start = std::chrono::steady_clock::now();
    update_started = true;
    try {
      update_heaps(all(), ExecutionResult{}, layout, ahead);
      updated_ahead = true;
    } catch (...) {  // a broken invariant (its memory is reserved): done again below, after the result
    }
    update_time += std::chrono::steady_clock::now() - start;
  };
  const HostThreads lent_threads{team_ ? team_->size() : 1, [this](unsigned parts, const std::function<void(unsigned)>& task) {
                                    run_parts(parts, [&task](unsigned part) noexcept { task(part); });
                                  }};
  const auto phase_start = std::chrono::steady_clock::now();
  ExecutionResult result;
  try {
    // In here: once the team writes slots (write_slide), whatever fails is undone below.
    scratch.segment_bases.clear();
    for (const auto& segment : segments_) scratch.segment_bases.push_back(segment->base);
    for (const PendingUse& use : pending_uses_) device_->order_after(use.token);
    // The device splits the moves into chunks (on the host, or for a slide on the GPU) and runs them.
    if (plan_more != nullptr) {
      result = device_->execute_moves_in_parts(*growing, scratch.segment_bases, scratch.chunks, *plan_more,
                                               update_ahead);
    } else if (written != nullptr) {
      const Device::MovesWritten counted = [&](bool& final, const Device::QueuedAhead& ahead) noexcept {
        written_moves = (*written)(final, ahead);
        written_final = final;
        return written_moves;
      };
      result = device_->execute_moves_as_written(whole, scratch.segment_bases, scratch.chunks, counted, update_ahead,
                                                 &lent_threads, scratch.slide_staged ? scratch.staging : nullptr);
    } else {
      result = device_->execute_moves(whole, scratch.segment_bases, scratch.chunks, update_ahead,
                                      team_ ? &lent_threads : nullptr);
    }
  } catch (...) {
    // No move is known to have completed (a CUDA error here is sticky): keep every buffer where it was.
    // A plan still being written is let finish first: all() is then every move whose slot it wrote.
    if (written != nullptr && !written_final) {
      for (bool final = false; !final;) written_moves = (*written)(final, Device::nothing_ahead());  // the rest at once
    }
    if (update_started) {
      reset_moved_slots(all());
      ExecutionResult none_completed;  // no entries: allocates nothing
      none_completed.complete = false;
      CompactionReport uncounted;
      update_heaps(all(), none_completed, layout, uncounted);
    }
    throw;
  }
  report.execute_seconds += std::chrono::steady_clock::now() - phase_start;  // the update ahead included
  for (const PendingUse& use : pending_uses_) {  // execute_moves waited for them: they are over
    device_->forget(use.token);
    (*table_)[use.slot].pending_uses = 0;
  }
  pending_uses_.clear();
  lower_pending_uses_sweep();

  const auto redo_start = std::chrono::steady_clock::now();
  if (result.complete && updated_ahead) {
    report.blocks_moved += ahead.blocks_moved;
    report.bytes_moved += ahead.bytes_moved;
    report.update_threads = std::max(report.update_threads, ahead.update_threads);
  } else {
    if (update_started) reset_moved_slots(all());
    try {
      update_heaps(all(), result, layout, report);
    } catch (...) {
      // Failed part way (a broken invariant: its memory is reserved): every completed move still
      // gets its slot, so every handle reaches its bytes, though a heap may no longer match its slots.
      const auto moves = all();
      for (std::size_t index = 0; index < moves.size(); ++index) {
        if (!completed(result, index)) continue;
        Slot& entry = (*table_)[moves[index].tag];
        entry.segment = moves[index].to_segment;
        entry.offset = moves[index].to_offset;
      }
      throw;
    }
  }
  blocks_moved_ += report.blocks_moved;
  bytes_moved_ += report.bytes_moved;
  report.update_seconds += update_time + (std::chrono::steady_clock::now() - redo_start);  // ahead + after
  if (!result.complete) {
    throw device_error(detail::message("compaction stopped after ", report.blocks_moved, " of ", all().size(),
                                       " moves: ", result.error, "; every buffer is intact"));
  }
}

// Takes, before anything moves, all the host memory that update_heaps will use, for this
// compaction and both its updates (ahead of the device's result and after it): once bytes have
// moved, host memory running out could no longer be answered by keeping every block where it was.
// Each segment's blocks after the moves are at most its live blocks now plus the moves into it
// from other segments (`moves` is the whole plan, or empty for a full compaction, whose moves stay
// in their segments). Throws std::bad_alloc with nothing moved.
void Pool::reserve_update(gsl::span<const compactor::Move> moves) {
  CompactionScratch& scratch = *compaction_scratch_;
  const std::size_t count = segments_.size();
  scratch.placements.resize(count);
  scratch.arrivals.assign(count, 0);
  // A plan given whole names the segments it touches; a plan made in parts may touch any.
  scratch.touched.assign(count, moves.empty() ? 1 : 0);
  for (const compactor::Move& move : moves) {
    scratch.touched[move.from_segment] = scratch.touched[move.to_segment] = 1;
    if (move.from_segment != move.to_segment) ++scratch.arrivals[move.to_segment];
  }
  std::size_t largest = 0;
  for (std::size_t index = 0; index < count; ++index) {
    if (!scratch.touched[index]) continue;
    const std::size_t blocks = segments_[index]->heap.allocated_blocks() + scratch.arrivals[index];
    scratch.placements[index].reserve(blocks);
    segments_[index]->heap.reserve_rebuild(blocks);
    largest = std::max(largest, blocks);
  }
  scratch.ids.reserve(largest);
  start_team(largest);
}

bool Pool::start_team(std::size_t blocks) {
  if (!team_ && blocks >= PoolOptions::parallel_update_min_blocks) {
    const unsigned threads =
        options_.compaction_threads != 0 ? options_.compaction_threads : std::clamp(usable_cpus(), 1u, 8u);
    try {
      if (threads > 1) team_ = std::make_unique<WorkerTeam>(threads);
    } catch (const std::exception&) {  // no threads to be had (std::system_error) or no memory: alone
    }
  }
  return team_ != nullptr;
}

// At least parallel_update_min_blocks / 4 blocks a part: below that, waking the team costs more
// than the part.
unsigned Pool::update_parts(std::size_t blocks) const {
  if (!team_ || blocks < PoolOptions::parallel_update_min_blocks) return 1;
  return static_cast<unsigned>(std::min<std::size_t>(team_->size(), blocks / (PoolOptions::parallel_update_min_blocks / 4)));
}

template <class Task>
void Pool::run_parts(unsigned parts, Task&& task) {
  if (parts == 1) {
    task(0u);
    return;
  }
  team_->run([&](unsigned part) noexcept {
    if (part < parts) task(part);
  });
}

// Each segment's live blocks at their places after the completed moves, for every segment that a
// move names (touched, completed or not), the fast way: a full compaction (and plan_hole's slide)
// lists its moves segment by segment, each in the layout's address order, and keeps blocks in
// their segments; then one merge of the layout with the moves gives every block's place without
// reading a slot. A large segment's merge is split into parts (update_parts), each finding its
// first move by binary search and checking that it meets exactly the moves up to the next part's.
// Returns false, having counted nothing, when the moves are listed otherwise (a hole or
// evacuation plan); `placements` and `touched` are then to be cleared. Cost: O(blocks + moves).
bool Pool::merge_placements(gsl::span<const compactor::Move> moves, const ExecutionResult& result,
                            const Layout& layout, CompactionReport& report) {
  CompactionScratch& scratch = *compaction_scratch_;
  const compactor::Move* const all = moves.data();
  // The moves of segments [0, s): a binary search, which on moves listed otherwise gives some
  // split that the parts' checks then refuse.
  auto segment_begin = [&](std::size_t segment) {
    return static_cast<std::size_t>(
        std::partition_point(moves.begin(), moves.end(),
                             [segment](const compactor::Move& move) { return move.from_segment < segment; }) -
        moves.begin());
  };
  if (segment_begin(layout.size()) != moves.size()) return false;
  std::uint64_t blocks_moved = 0, bytes_moved = 0;
  std::size_t segment_moves = 0;  // segment_begin(segment)
  for (std::size_t segment = 0; segment < layout.size(); ++segment) {
    const std::size_t moves_begin = segment_moves;
    const std::size_t moves_end = segment_moves = segment_begin(segment + 1);
    if (moves_end < moves_begin) return false;
    if (moves_end == moves_begin) continue;
    scratch.touched[segment] = 1;
    const LiveBlocks& blocks = layout[segment];
    auto& list = scratch.placements[segment];
    list.resize(blocks.size());  // within the room reserve_update took, and writes nothing
    const unsigned parts = update_parts(blocks.size());
    std::array<std::size_t, Heap::max_rebuild_parts + 1> first_block{}, first_move{};
    for (unsigned part = 0; part <= parts; ++part) first_block[part] = blocks.size() * part / parts;
    first_move[0] = moves_begin;
    first_move[parts] = moves_end;
    for (unsigned part = 1; part < parts; ++part) {
      const std::uint64_t offset = blocks[first_block[part]].offset;
      first_move[part] = static_cast<std::size_t>(
          std::partition_point(all + moves_begin, all + moves_end,
                               [offset](const compactor::Move& move) { return move.from_offset < offset; }) -
          all);
    }
    std::array<std::uint64_t, Heap::max_rebuild_parts> part_blocks{}, part_bytes{};
    std::array<std::uint8_t, Heap::max_rebuild_parts> failed{};
    run_parts(parts, [&](unsigned part) noexcept {
      std::size_t next = first_move[part];
      const std::size_t end = first_move[part + 1];
      std::uint64_t moved = 0, bytes = 0;
      for (std::size_t index = first_block[part]; index < first_block[part + 1]; ++index) {
        const compactor::LiveBlock& block = blocks[index];
        std::uint64_t offset = block.offset;
        if (next < end && all[next].from_offset <= block.offset) {
          const compactor::Move& move = all[next];
          // A move left behind means another order (a hole plan lists its moves largest first): give
          // up at once rather than after the whole part.
          if (move.from_offset != block.offset || move.tag != block.tag || move.from_segment != segment ||
              move.to_segment != segment) {
            failed[part] = 1;
            return;
          }
          if (completed(result, next)) {
            offset = move.to_offset;
            ++moved;
            bytes += move.bytes;
          }
          ++next;
        }
        list[index] = {offset, block.bytes, block.tag};
      }
      if (next != end) failed[part] = 1;
      part_blocks[part] = moved;
      part_bytes[part] = bytes;
    });
    for (unsigned part = 0; part < parts; ++part) {
      if (failed[part]) return false;
      blocks_moved += part_blocks[part];
      bytes_moved += part_bytes[part];
    }
  }
  report.blocks_moved += blocks_moved;
  report.bytes_moved += bytes_moved;
  return true;
}

// Rebuilds a touched segment's heap from its placements (sorted first if a block moved into a gap
// before a fixed one, unless `sorted` says they are: the heap's rebuild refuses them otherwise),
// then writes each of its slots once: place and block id. Both split into the same parts, so that
// each thread writes the slots of the blocks whose ids it made. The slots of placements
// [slots_from, end) were written ahead (write_slide), each with its index as the block id, which a
// rebuild without gaps gives: checked at both ends (ids ascend), else std::logic_error. `packed`:
// the heap's nodes were written ahead too (write_slide, Heap::write_packed), packed from offset 0
// in the placements' order: the heap adopts them, each block's id its index.
void Pool::rebuild_heap(std::size_t segment, bool sorted, std::size_t slots_from, bool packed,
                        CompactionReport& report) {
  CompactionScratch& scratch = *compaction_scratch_;
  auto& list = scratch.placements[segment];
  auto by_offset = [](const HeapPlacement& a, const HeapPlacement& b) { return a.offset < b.offset; };
  if (!sorted && !std::is_sorted(list.begin(), list.end(), by_offset)) std::sort(list.begin(), list.end(), by_offset);
  std::vector<BlockId>& ids = scratch.ids;
  Heap& heap = segments_[segment]->heap;
  unsigned parts = update_parts(list.size());
  if (packed) {
    heap.adopt_packed(list.size(), list.empty() ? 0 : list.back().offset + list.back().bytes);
    parts = update_parts(slots_from);  // what is left: the slots of the blocks that stay
  } else if (parts == 1) {
    heap.rebuild(list, ids);
  } else {
    heap.rebuild_in_parts(list, ids, parts, [&](auto&& task) { run_parts(parts, task); });
  }
  if (!packed && slots_from < list.size() && (ids[slots_from] != slots_from || ids.back() != list.size() - 1))
    throw std::logic_error("heap rebuild: the blocks whose slots were written ahead got other ids");
  report.update_threads = std::max(report.update_threads, parts);
  const std::size_t split = packed ? slots_from : list.size();  // the rebuild's parts, or the slots'
  run_parts(parts, [&](unsigned part) noexcept {
    const std::size_t end = std::min(slots_from, split * (part + 1) / parts);
    for (std::size_t index = split * part / parts; index < end; ++index) {
      Slot& entry = (*table_)[list[index].tag];
      entry.segment = static_cast<std::uint32_t>(segment);
      entry.offset = list[index].offset;
      entry.block = packed ? static_cast<BlockId>(index) : ids[index];
    }
  });
}

// Puts every moved slot back at its source, before update_heaps undoes an update made ahead of
// the device's result (apply_moves). Cannot fail: if the update then fails (a broken invariant),
// every handle still reaches its bytes, though a heap may no longer match its slots.
void Pool::reset_moved_slots(gsl::span<const compactor::Move> moves) {
  for (const compactor::Move& move : moves) {
    Slot& entry = (*table_)[move.tag];
    entry.segment = move.from_segment;
    entry.offset = move.from_offset;
  }
}

// Rebuilds each heap that a move names from its live blocks at their places after the completed
// moves (its nodes end up in address order, which keeps the next compaction's walks reading memory
// in order), then writes every slot of those heaps once: place and block id. Counts the completed
// moves. A heap is rebuilt even if none of its moves completed: it may hold an update made ahead
// (apply_moves), which this undoes; the slots of moves that did not complete must then hold their
// sources again (reset_moved_slots). When every move completed and plan_slide placed the blocks
// already (placed_ahead), the merge is skipped.
void Pool::update_heaps(gsl::span<const compactor::Move> moves, const ExecutionResult& result,
                        const Layout& layout, CompactionReport& report) {
  CompactionScratch& scratch = *compaction_scratch_;
  auto& placements = scratch.placements;
  std::vector<std::uint8_t>& touched = scratch.touched;
  auto clear = [&] {
    placements.resize(segments_.size());
    for (auto& list : placements) list.clear();
    touched.assign(segments_.size(), 0);
  };
  if (scratch.placed_ahead && result.complete) {  // the plan placed every block as the moves leave it, in order
    scratch.placed_ahead = false;
    const bool slots_ahead = std::exchange(scratch.slots_ahead, false);
    const bool nodes_ahead = std::exchange(scratch.nodes_ahead, false);
    touched.assign(segments_.size(), 0);
    for (std::size_t index = 0; index < segments_.size(); ++index) {
      if (scratch.moved[index].blocks == 0) continue;
      touched[index] = 1;
      report.blocks_moved += scratch.moved[index].blocks;
      report.bytes_moved += scratch.moved[index].bytes;
    }
    for (std::size_t index = 0; index < segments_.size(); ++index) {
      const std::size_t blocks = scratch.placements[index].size();
      if (touched[index])
        rebuild_heap(index, true, slots_ahead ? blocks - scratch.moved[index].blocks : blocks, slots_ahead && nodes_ahead,
                     report);
    }
    return;
  }
  scratch.placed_ahead = scratch.slots_ahead = scratch.nodes_ahead = false;
  if (std::exchange(scratch.layout_unwritten, false)) {
    Expects(&layout == &scratch.layout);
    layout_from_slide(moves);  // before clear(): it reads the places of the blocks that stay
  }
  clear();
  if (!merge_placements(moves, result, layout, report)) {
    clear();
    // The general way: slots first, then each segment's blocks from the layout (a block that
    // moved into a gap before a fixed block leaves the list unsorted), then arrivals.
    for (std::size_t index = 0; index < moves.size(); ++index) {
      const auto& move = moves[index];
      touched[move.from_segment] = touched[move.to_segment] = 1;
      if (!completed(result, index)) continue;
      Slot& entry = (*table_)[move.tag];
      entry.segment = move.to_segment;
      entry.offset = move.to_offset;
      ++report.blocks_moved;
      report.bytes_moved += move.bytes;
    }
    for (std::size_t index = 0; index < segments_.size(); ++index) {
      if (!touched[index]) continue;
      placements[index].reserve(layout[index].size());
      for (const compactor::LiveBlock& block : layout[index]) {
        const Slot& entry = (*table_)[block.tag];
        if (entry.segment == index) placements[index].push_back({entry.offset, entry.block_bytes, block.tag});
      }
    }
    for (std::size_t index = 0; index < moves.size(); ++index) {
      const auto& move = moves[index];
      if (completed(result, index) && move.from_segment != move.to_segment)
        placements[move.to_segment].push_back({move.to_offset, (*table_)[move.tag].block_bytes, move.tag});
    }
  }
  for (std::size_t index = 0; index < segments_.size(); ++index) {
    if (touched[index]) rebuild_heap(index, false, placements[index].size(), false, report);
  }
}

// Empties trailing segments into the others and gives them back to the device, as long as what
// the call moves in all stays within max_bytes_moved. Segment 0 stays.
void Pool::release_trailing_segments(std::uint64_t max_bytes_moved, CompactionReport& report) {
  while (segments_.size() > 1) {
    const std::size_t victim = segments_.size() - 1;
    if (segments_[victim]->heap.statistics().allocated_blocks != 0) {
      Layout& blocks = compaction_scratch_->layout;
      live_layout(blocks);
      auto plan = compactor::plan_evacuation(layouts(blocks), victim);
      if (!plan) return;
      if (report.bytes_moved > max_bytes_moved ||
          compactor::bytes_moved(*plan) > max_bytes_moved - report.bytes_moved)
        return;
      apply_moves(*plan, blocks, report);
      if (segments_[victim]->heap.statistics().allocated_blocks != 0) return;
    }
    const Region region = segments_[victim]->region;
    const std::uint64_t bytes = segments_[victim]->heap.capacity();
    segments_.pop_back();
    device_->release(region);
    reserved_ -= bytes;
    ++report.segments_released;
    report.bytes_released += bytes;
  }
}

}  // namespace vramkit
