// Pool compaction: plan (compactor), execute (device), then rewrite slots and rebuild heaps for the
// moves that completed. A device failure part way leaves every handle resolving to intact data.
#include "pool/pool_segment.hpp"

#include <algorithm>
#include <chrono>

#include <vramkit/compactor/chunk_plan.hpp>
#include <vramkit/detail/message.hpp>
#include <vramkit/errors.hpp>

namespace vramkit {

// Live blocks of every segment in address order, as the planner sees them. O(blocks).
Pool::Layout Pool::live_layout() const {
  Layout layout(segments_.size());
  for (std::size_t index = 0; index < segments_.size(); ++index) {
    auto& blocks = layout[index];
    blocks.reserve(segments_[index]->heap.statistics().allocated_blocks);
    segments_[index]->heap.for_each_block([&](const HeapBlock& block) {
      if (block.free) return;
      const Slot& entry = (*table_)[block.tag];
      blocks.push_back({block.offset, block.bytes, entry.alignment,
                        entry.pins == 0 && entry.kind == SlotKind::buffer, block.tag});
    });
  }
  return layout;
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
  if (options.goal == CompactGoal::hole && (options.hole_alignment & (options.hole_alignment - 1)) != 0) {
    throw invalid_argument(detail::message("hole alignment ", options.hole_alignment, " is not a power of two"));
  }
  const auto started = std::chrono::steady_clock::now();
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
  const auto blocks = live_layout();
  const auto segment_layouts = layouts(blocks);
  const auto planning = std::chrono::steady_clock::now();
  std::vector<compactor::Move> moves;
  if (options.goal == CompactGoal::full) {
    std::uint64_t budget = options.max_bytes_moved;
    for (const auto& layout : segment_layouts) {
      auto segment_moves = compactor::plan_full(layout, budget);
      budget -= compactor::bytes_moved(segment_moves);
      moves.insert(moves.end(), segment_moves.begin(), segment_moves.end());
    }
  } else {
    const std::uint64_t alignment = std::max(options.hole_alignment, options_.granularity);
    auto plan = compactor::plan_hole(segment_layouts, options.hole_bytes, alignment, options.max_bytes_moved);
    report.goal_met = plan.has_value();
    if (plan) moves = std::move(plan->moves);
  }
  report.plan_seconds += std::chrono::steady_clock::now() - planning;
  apply_moves(moves, blocks, report);
  if (options.goal == CompactGoal::full && options.release_empty_segments) release_trailing_segments(report);

  const PoolStatistics after = statistics_locked();
  report.fragmentation_after = after.fragmentation();
  report.largest_free_after = after.largest_free_block;
  report.seconds = std::chrono::steady_clock::now() - started;
  ++compactions_;
  compaction_time_ += report.seconds;
  return report;
}

// Executes moves and applies the completed ones to slots and heaps. Throws device_error after
// applying what completed if the device failed part way.
void Pool::apply_moves(const std::vector<compactor::Move>& moves, const Layout& layout, CompactionReport& report) {
  if (moves.empty()) return;
  std::vector<compactor::CopyRange> ranges;
  ranges.reserve(moves.size());
  for (const auto& move : moves) {
    ranges.push_back({segments_[move.from_segment]->base + move.from_offset,
                      segments_[move.to_segment]->base + move.to_offset, move.bytes});
  }
  auto phase_start = std::chrono::steady_clock::now();
  const compactor::ChunkPlan plan = compactor::make_chunk_plan(ranges);
  auto phase_end = std::chrono::steady_clock::now();
  report.plan_seconds += phase_end - phase_start;
  phase_start = phase_end;
  for (const PendingUse& use : pending_uses_) device_->order_after(use.token);
  const ExecutionResult result = device_->execute(plan, moves.size());
  phase_end = std::chrono::steady_clock::now();
  report.execute_seconds += phase_end - phase_start;
  phase_start = phase_end;
  for (const PendingUse& use : pending_uses_) {  // execute() waited for them: they are over
    device_->forget(use.token);
    (*table_)[use.slot].pending_uses = 0;
  }
  pending_uses_.clear();

  // Rebuild each touched segment's heap from its live blocks at their new places.
  std::vector<std::uint8_t> touched(segments_.size(), 0);
  for (std::size_t index = 0; index < moves.size(); ++index) {
    if (!result.complete && !result.move_completed[index]) continue;
    const auto& move = moves[index];
    Slot& entry = (*table_)[move.tag];
    entry.segment = move.to_segment;
    entry.offset = move.to_offset;
    touched[move.from_segment] = touched[move.to_segment] = 1;
    ++report.blocks_moved;
    report.bytes_moved += move.bytes;
  }
  // The layout lists each segment's blocks in address order before the moves; a block that stayed
  // in its segment keeps its place in that order unless it moved into a gap before a fixed block,
  // so the lists usually need no sort. Blocks that changed segment join their new segment's list.
  std::vector<std::vector<HeapPlacement>> placements(segments_.size());
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
    if ((result.complete || result.move_completed[index]) && move.from_segment != move.to_segment) {
      placements[move.to_segment].push_back({move.to_offset, (*table_)[move.tag].block_bytes, move.tag});
    }
  }
  auto by_offset = [](const HeapPlacement& a, const HeapPlacement& b) { return a.offset < b.offset; };
  for (std::size_t index = 0; index < segments_.size(); ++index) {
    if (!touched[index]) continue;
    auto& list = placements[index];
    if (!std::is_sorted(list.begin(), list.end(), by_offset)) std::sort(list.begin(), list.end(), by_offset);
    const std::vector<BlockId> ids = segments_[index]->heap.rebuild(list);
    for (std::size_t i = 0; i < list.size(); ++i) (*table_)[list[i].tag].block = ids[i];
  }
  blocks_moved_ += report.blocks_moved;
  bytes_moved_ += report.bytes_moved;
  report.update_seconds += std::chrono::steady_clock::now() - phase_start;
  if (!result.complete) {
    throw device_error(detail::message("compaction stopped after ", report.blocks_moved, " of ", moves.size(),
                                       " moves: ", result.error, "; every buffer is intact"));
  }
}

// Empties trailing segments into the others and gives them back to the device. Segment 0 stays.
void Pool::release_trailing_segments(CompactionReport& report) {
  while (segments_.size() > 1) {
    const std::size_t victim = segments_.size() - 1;
    if (segments_[victim]->heap.statistics().allocated_blocks != 0) {
      const auto blocks = live_layout();
      const auto plan = compactor::plan_evacuation(layouts(blocks), victim);
      if (!plan) return;
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
