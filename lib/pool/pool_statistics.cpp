// Pool statistics, the memory map, guard margins and the invariant check.
#include "pool/pool_segment.hpp"

#include "pool/block_cache.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <vramkit/detail/message.hpp>
#include <vramkit/errors.hpp>

namespace vramkit {

double PoolStatistics::fragmentation() const {
  return free_bytes == 0 ? 0.0 : 1.0 - static_cast<double>(largest_free_block) / static_cast<double>(free_bytes);
}
double PoolStatistics::fragmentation_quadratic() const {
  return free_bytes == 0 ? 0.0 : 1.0 - std::sqrt(sum_of_squared_free) / static_cast<double>(free_bytes);
}
double PoolStatistics::utilization() const {
  return reserved_bytes == 0 ? 0.0 : static_cast<double>(used_bytes) / static_cast<double>(reserved_bytes);
}
double PoolStatistics::success_rate() const {
  return allocation_requests == 0
             ? 1.0
             : static_cast<double>(allocation_requests - allocation_failures) / static_cast<double>(allocation_requests);
}
double PoolStatistics::peak_utilization() const {
  return peak_reserved_bytes == 0 ? 0.0 : static_cast<double>(peak_used_bytes) / static_cast<double>(peak_reserved_bytes);
}

PoolStatistics Pool::statistics_locked() const {
  drain_cache();  // the heaps then see all free space
  PoolStatistics statistics;
  statistics.reserved_bytes = reserved_;
  statistics.used_bytes = used_;
  statistics.requested_bytes = requested_;
  statistics.free_bytes = reserved_ - used_;
  for (const auto& segment : segments_) {
    statistics.largest_free_block = std::max(statistics.largest_free_block, segment->heap.largest_free_block());
    statistics.free_ranges += segment->heap.free_ranges();
    statistics.sum_of_squared_free += segment->heap.statistics().sum_of_squared_free;
  }
  statistics.live_allocations = table_->live_count();
  statistics.pinned_allocations = pinned_;
  statistics.segments = segments_.size();
  statistics.peak_used_bytes = peak_used_;
  statistics.peak_reserved_bytes = peak_reserved_;
  statistics.allocation_requests = requests_;
  statistics.allocation_failures = failures_;
  statistics.compactions = compactions_;
  statistics.blocks_moved = blocks_moved_;
  statistics.bytes_moved = bytes_moved_;
  statistics.compaction_time = compaction_time_;
  return statistics;
}

PoolStatistics Pool::statistics() const {
  std::lock_guard lock(mutex_);
  return statistics_locked();
}

std::vector<BlockInfo> Pool::block_map() const {
  std::lock_guard lock(mutex_);
  drain_cache();
  std::vector<BlockInfo> map;
  for (std::uint32_t index = 0; index < segments_.size(); ++index) {
    segments_[index]->heap.for_each_block([&](const HeapBlock& block) {
      BlockState state = BlockState::free;
      if (!block.free) {
        const Slot& entry = (*table_)[block.tag];
        state = entry.kind == SlotKind::arena ? BlockState::arena
                : entry.pins != 0             ? BlockState::pinned
                                              : BlockState::live;
      }
      map.push_back({index, block.offset, block.bytes, state, block.free ? 0u : block.tag});
    });
  }
  return map;
}

std::vector<SegmentInfo> Pool::segments() const {
  std::lock_guard lock(mutex_);
  std::vector<SegmentInfo> result;
  for (std::uint32_t index = 0; index < segments_.size(); ++index) {
    result.push_back({index, segments_[index]->base, segments_[index]->heap.capacity()});
  }
  return result;
}

void Pool::write_guard(std::uint32_t slot) {
  const Slot& entry = (*table_)[slot];
  device_->fill(slot_address(slot) + entry.bytes, guard_pattern, entry.block_bytes - entry.bytes, nullptr);
}

void Pool::check_guard_locked(std::uint32_t slot) const {
  const Slot& entry = (*table_)[slot];
  const std::uint64_t margin = entry.block_bytes - entry.bytes;
  const std::uint64_t bad = device_->find_mismatch(slot_address(slot) + entry.bytes, guard_pattern, margin);
  if (bad != margin) {
    throw corruption_error(detail::message(
        "guard margin of buffer {slot ", slot, ", generation ", entry.generation, "} (", entry.bytes,
        " bytes at segment ", entry.segment, " offset ", entry.offset, ") is overwritten: first bad byte at buffer offset ",
        entry.bytes + bad, ", ", bad, " bytes past its end"));
  }
}

void Pool::check_guards() const {
  std::lock_guard lock(mutex_);
  if (options_.guard_bytes == 0) return;
  for (std::size_t slot = 0; slot < table_->size(); ++slot) {
    if ((*table_)[slot].live) check_guard_locked(static_cast<std::uint32_t>(slot));
  }
}

void Pool::check_invariants() const {
  std::lock_guard lock(mutex_);
  auto fail = [](const std::string& what) { throw std::logic_error("pool invariant broken: " + what); };
  std::uint64_t used = 0, blocks = 0, pinned = 0, over_aligned = 0, reserved = 0, cached_bytes = 0;
  std::vector<std::vector<BlockId>> cached(segments_.size());  // per segment, sorted
  cache_->for_each([&](const CachedBlock& block) {
    if (block.segment >= segments_.size()) fail(detail::message("cached block in segment ", block.segment));
    cached[block.segment].push_back(block.block);
    cached_bytes += block.bytes;
  });
  if (cached_bytes != cache_->bytes()) fail("cached bytes");
  table_->check_invariants();
  for (auto& ids : cached) std::sort(ids.begin(), ids.end());
  std::size_t cached_found = 0;
  for (std::uint32_t index = 0; index < segments_.size(); ++index) {
    const Heap& heap = segments_[index]->heap;
    heap.check_invariants();
    reserved += heap.capacity();
    heap.for_each_block([&](const HeapBlock& block) {
      if (block.free) return;
      if (std::binary_search(cached[index].begin(), cached[index].end(), block.id)) {
        ++cached_found;  // an allocated block that the cache, not a slot, holds
        return;
      }
      ++blocks;
      if (block.tag >= table_->size()) fail(detail::message("block at ", block.offset, " has no slot"));
      const Slot& entry = (*table_)[block.tag];
      if (!entry.live || entry.segment != index || entry.offset != block.offset || entry.block != block.id ||
          entry.block_bytes != block.bytes) {
        fail(detail::message("slot ", block.tag, " does not describe the block at segment ", index, " offset ",
                             block.offset));
      }
      used += block.bytes;
      if (entry.pins != 0 || entry.kind == SlotKind::arena) ++pinned;
      if (entry.alignment > options_.granularity) ++over_aligned;
    });
  }
  if (cached_found != cache_->count()) {
    fail(detail::message(cache_->count(), " cached blocks but ", cached_found, " found allocated in the heaps"));
  }
  if (blocks != table_->live_count()) fail(detail::message(blocks, " blocks but ", table_->live_count(), " live slots"));
  if (used != used_) fail(detail::message("used bytes ", used, " but counter says ", used_));
  if (pinned != pinned_) fail(detail::message("pinned ", pinned, " but counter says ", pinned_));
  if (over_aligned != over_aligned_)
    fail(detail::message("over-aligned ", over_aligned, " but counter says ", over_aligned_));
  if (reserved != reserved_) fail("reserved bytes");
}

}  // namespace vramkit
