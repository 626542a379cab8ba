// Pool: allocation, freeing, pins and host copies. Compaction lives in pool_compaction.cpp,
// statistics and the memory map in pool_statistics.cpp.
#include "pool/pool_segment.hpp"

#include "pool/block_cache.hpp"
#include "pool/worker_team.hpp"

#include <algorithm>
#include <bit>

#include <vramkit/detail/bits.hpp>
#include <vramkit/detail/message.hpp>
#include <vramkit/errors.hpp>
#include <vramkit/units.hpp>

namespace vramkit {
namespace {

using detail::align_up;
using detail::is_power_of_two;

}  // namespace

const char* to_string(BlockState state) {
  switch (state) {
    case BlockState::free: return "free";
    case BlockState::live: return "live";
    case BlockState::pinned: return "pinned";
    case BlockState::arena: return "arena";
  }
  return "unknown";
}

std::uint64_t capacity_of_fraction(double fraction, Device& device) {
  if (!(fraction > 0 && fraction <= 1)) {
    throw invalid_argument(detail::message("pool capacity is 0 and capacity_fraction is ", fraction,
                                           "; give capacity_bytes > 0 or a fraction in (0, 1]"));
  }
  return static_cast<std::uint64_t>(static_cast<double>(device.memory_info().free_bytes) * fraction);
}

Pool::Pool(PoolOptions options, std::shared_ptr<Device> device)
    : options_(options),
      device_(std::move(device)),
      table_(std::make_unique<HandleTable>()),
      cache_(std::make_unique<BlockCache>()) {
  if (!device_) throw invalid_argument("pool needs a device; got none");
  if (!is_power_of_two(options_.granularity) || options_.granularity < 16) {
    throw invalid_argument(detail::message("pool granularity ", options_.granularity,
                                           " must be a power of two of at least 16 bytes"));
  }
  std::uint64_t capacity = options_.capacity_bytes;
  if (capacity == 0) {
    capacity = capacity_of_fraction(options_.capacity_fraction, *device_) & ~(options_.granularity - 1);
    if (capacity == 0) {
      throw invalid_argument(detail::message("capacity_fraction ", options_.capacity_fraction,
                                             " of the device's free memory is 0 bytes"));
    }
  }
  capacity = align_up(capacity, options_.granularity);
  if (options_.max_capacity_bytes != 0 && options_.max_capacity_bytes < capacity) {
    throw invalid_argument(detail::message("max_capacity_bytes ", options_.max_capacity_bytes,
                                           " is below the capacity ", capacity));
  }
  if (options_.guard_bytes >= capacity) {
    throw invalid_argument(detail::message("guard_bytes ", options_.guard_bytes, " must be below the capacity ", capacity));
  }
  if (options_.guard_bytes % options_.granularity != 0) {
    options_.guard_bytes = align_up(options_.guard_bytes, options_.granularity);
  }
  if (options_.compaction_threads > Heap::max_rebuild_parts) {
    throw invalid_argument(detail::message("compaction_threads ", options_.compaction_threads, " is above the limit ",
                                           Heap::max_rebuild_parts));
  }
  first_segment_bytes_ = capacity;
  // The first segment stays for the pool's life, so a grown segment has at most the rest of the
  // growth limit (rounded down to the granularity, as grow() rounds).
  largest_block_ = options_.max_capacity_bytes == 0
                       ? capacity
                       : std::max(capacity, (options_.max_capacity_bytes - capacity) & ~(options_.granularity - 1));
  add_segment(capacity);
}

// Obtains a region and makes it a segment whose base is 2 MiB aligned: the device's large regions
// usually are; otherwise the region is taken again with room to align.
void Pool::add_segment(std::uint64_t bytes) {
  Region region = device_->obtain(bytes);
  if (region.address % segment_alignment != 0) {
    device_->release(region);
    region = device_->obtain(bytes + segment_alignment);
  }
  const std::uint64_t base = align_up(region.address, segment_alignment);
  try {
    segments_.push_back(std::make_unique<Segment>(region, base, bytes, options_.granularity));
  } catch (...) {  // host memory for the bookkeeping ran out: give the region back
    device_->release(region);
    throw;
  }
  reserved_ += bytes;
  peak_reserved_ = std::max(peak_reserved_, reserved_);
}

Pool::~Pool() {
  std::lock_guard lock(mutex_);
  for (const PendingUse& use : pending_uses_) {
    try {
      device_->host_wait(use.token);
    } catch (...) {  // releasing never throws; a failed device is being torn down anyway
    }
    device_->forget(use.token);
  }
  for (auto& segment : segments_) device_->release(segment->region);
  if (compaction_scratch_) device_->release_staging(compaction_scratch_->staging);
}

std::uint64_t Pool::largest_possible_block() const { return largest_block_; }

// The allocation path: inlined into allocate and allocate_pinned (a call would save and restore
// registers twice more on every allocation), with the heap's allocate and free its only calls when
// the first segment has room. What runs when it has not (compaction, growth, the error) is in
// place_after_failure.
[[gnu::always_inline]] inline Handle Pool::allocate_locked(std::uint64_t bytes, std::uint64_t alignment,
                                                           bool pinned, const Lock&) {
  if (bytes == 0) throw invalid_argument("allocation of 0 bytes; an empty DeviceBuffer holds no block");
  if (!is_power_of_two(alignment) || alignment > max_block_alignment) {
    throw invalid_argument(
        detail::message("alignment ", alignment, " is not a power of two up to ", max_block_alignment));
  }
  alignment = std::max(alignment, options_.granularity);
  ++requests_;
  // guard_bytes is below the capacity; if an absurd `bytes` makes the sum wrap, the first test fails.
  const std::uint64_t block_bytes = align_up(bytes + options_.guard_bytes, options_.granularity);
  if (bytes > largest_block_ || block_bytes > largest_block_) {
    ++failures_;
    throw out_of_memory(detail::message("requested ", format_bytes(bytes), " (", bytes,
                                        " bytes); the pool's largest possible block is ", format_bytes(largest_block_)));
  }
  const std::uint32_t slot =
      table_->acquire(bytes, block_bytes, alignment, pinned ? SlotKind::arena : SlotKind::buffer);
  Slot& entry = (*table_)[slot];
  // The cached block if it is of exactly this size; otherwise it goes back to its heap first, so
  // that the heaps decide with all free space in view.
  const auto cached = cache_->take(block_bytes, alignment, [this](const CachedBlock& block) {
    segments_[block.segment]->heap.free(block.block);
  });
  if (cached) {
    entry.segment = cached->segment;
    entry.offset = cached->offset;
    entry.block = cached->block;
    segments_[cached->segment]->heap.set_tag(cached->block, slot);
  } else {
    bool placed = false;
    try {
      placed = try_place(slot, block_bytes, alignment);
    } catch (...) {  // the heap's bookkeeping ran out of host memory: no slot without a block
      table_->release(slot);
      ++failures_;
      throw;
    }
    if (!placed) place_after_failure(slot, bytes, block_bytes, alignment);
  }
  if (options_.guard_bytes != 0) {
    try {
      write_guard(slot);
    } catch (...) {  // a failed fill must not leave a block that no handle names
      segments_[entry.segment]->heap.free(entry.block);
      table_->release(slot);
      ++failures_;
      throw;
    }
  }
  used_ += block_bytes;
  requested_ += bytes;
  peak_used_ = std::max(peak_used_, used_);
  if (pinned) ++pinned_;
  if (alignment > options_.granularity) ++over_aligned_;
  return table_->handle_of(slot);
}

Handle Pool::allocate(std::uint64_t bytes, std::uint64_t alignment) {
  const Lock lock(mutex_);
  return allocate_locked(bytes, alignment, false, lock);
}

Handle Pool::allocate_pinned(std::uint64_t bytes, std::uint64_t alignment) {
  const Lock lock(mutex_);
  return allocate_locked(bytes, alignment, true, lock);
}

inline bool Pool::try_place(std::uint32_t slot, std::uint64_t block_bytes, std::uint64_t alignment) {
  for (std::uint32_t index = 0; index < segments_.size(); ++index) {
    if (auto placed = segments_[index]->heap.allocate(block_bytes, alignment, slot)) {
      Slot& entry = (*table_)[slot];
      entry.segment = index;
      entry.offset = placed->offset;
      entry.block = placed->block;
      return true;
    }
  }
  return false;
}

void Pool::place_after_failure(std::uint32_t slot, std::uint64_t bytes, std::uint64_t block_bytes,
                               std::uint64_t alignment) {
  bool placed = false;
  if (options_.compact_on_failure && reserved_ - used_ >= block_bytes) {
    try {
      CompactionReport report = compact_locked({.goal = CompactGoal::hole,
                                                .hole_bytes = block_bytes,
                                                .hole_alignment = alignment,
                                                .release_empty_segments = false});
      placed = report.goal_met && try_place(slot, block_bytes, alignment);
    } catch (...) {
      table_->release(slot);
      ++failures_;
      throw;
    }
  }
  if (!placed) {
    try {
      placed = grow(block_bytes) && try_place(slot, block_bytes, alignment);
    } catch (...) {
      table_->release(slot);
      ++failures_;
      throw;
    }
  }
  if (!placed) {
    table_->release(slot);
    ++failures_;
    throw_out_of_memory(bytes, alignment);
  }
}

void Pool::drain_cache() const {
  cache_->drain([this](const CachedBlock& block) { segments_[block.segment]->heap.free(block.block); });
}

bool Pool::grow(std::uint64_t block_bytes) {
  if (options_.max_capacity_bytes == 0) return false;
  const std::uint64_t step = options_.segment_bytes != 0 ? options_.segment_bytes : first_segment_bytes_;
  const std::uint64_t room = options_.max_capacity_bytes - reserved_;
  const std::uint64_t needed = block_bytes;  // segment bases are aligned to every alignment we serve
  if (needed > room) return false;
  const std::uint64_t bytes = std::min(room, std::max(step, needed)) & ~(options_.granularity - 1);
  if (bytes < needed) return false;  // the room, rounded down to the granularity, is too small
  try {
    add_segment(bytes);
  } catch (const out_of_memory&) {
    return false;
  }
  return true;
}

void Pool::throw_out_of_memory(std::uint64_t bytes, std::uint64_t alignment) const {
  const PoolStatistics statistics = statistics_locked();
  throw out_of_memory(detail::message(
      "requested ", format_bytes(bytes), " (", bytes, " bytes, alignment ", alignment, "); the pool has ",
      format_bytes(statistics.free_bytes), " free of ", format_bytes(statistics.reserved_bytes), " reserved in ",
      statistics.segments, " segment(s), largest free block ", format_bytes(statistics.largest_free_block),
      ", fragmentation ", statistics.fragmentation(), ", ", statistics.pinned_allocations, " pinned of ",
      statistics.live_allocations, " live buffers, growth limit ",
      format_bytes(std::max(options_.max_capacity_bytes, statistics.reserved_bytes))));
}

// The free path, inlined into free, release and unpin.
inline void Pool::free_locked(std::uint32_t slot, const Lock&) {
  Slot& entry = (*table_)[slot];
  if (entry.pending_uses != 0) finish_pending_uses(slot);  // before the memory can be reused
  // The first block freed since the last allocation is kept for a request of its size.
  if (entry.block_bytes > options_.free_cache_bytes ||
      !cache_->put({entry.block_bytes, entry.offset, entry.block, entry.segment})) {
    segments_[entry.segment]->heap.free(entry.block);
  }
  used_ -= entry.block_bytes;
  requested_ -= entry.bytes;
  if (entry.pins != 0 || entry.kind == SlotKind::arena) --pinned_;
  if (entry.alignment > options_.granularity) --over_aligned_;
  table_->release(slot);
}

void Pool::finish_pending_uses(std::uint32_t slot) {
  auto uses_this_slot = [&](const PendingUse& use) { return use.slot == slot; };
  for (const PendingUse& use : pending_uses_) {  // wait for all first: a failed wait changes nothing
    if (uses_this_slot(use)) device_->host_wait(use.token);
  }
  for (const PendingUse& use : pending_uses_) {
    if (uses_this_slot(use)) device_->forget(use.token);
  }
  std::erase_if(pending_uses_, uses_this_slot);
  lower_pending_uses_sweep();
}

void Pool::lower_pending_uses_sweep() noexcept {
  pending_uses_sweep_at_ = std::max<std::size_t>(64, std::min(pending_uses_sweep_at_, 2 * pending_uses_.size()));
}

void Pool::record_use(std::uint32_t slot, Stream stream) {
  if (pending_uses_.size() >= pending_uses_sweep_at_) {
    std::erase_if(pending_uses_, [this](const PendingUse& use) {
      if (!device_->use_ended(use.token)) return false;
      device_->forget(use.token);
      --(*table_)[use.slot].pending_uses;
      return true;
    });
    pending_uses_sweep_at_ = std::max<std::size_t>(64, 2 * pending_uses_.size());
  }
  pending_uses_.reserve(pending_uses_.size() + 1);  // so that recording is the last thing that can fail
  pending_uses_.push_back({slot, device_->record_use_end(stream)});
  ++(*table_)[slot].pending_uses;
}

void Pool::free(Handle handle) {
  const Lock lock(mutex_);
  const std::uint32_t slot = table_->check(handle);
  const Slot& entry = (*table_)[slot];
  if (entry.pins != 0) {
    throw state_error(detail::message("cannot free buffer {slot ", slot, "}: it is pinned ", entry.pins,
                                      " time(s); release every pin first"));
  }
  if (options_.guard_bytes != 0) check_guard_locked(slot);
  free_locked(slot, lock);
}

bool Pool::release(Handle handle, Stream stream) noexcept {
  try {
    const Lock lock(mutex_);
    if (!table_->valid(handle)) return false;
    const std::uint32_t slot = handle.slot;
    Slot& entry = (*table_)[slot];
    if (stream != nullptr) record_use(slot, stream);
    if (entry.pins != 0 && entry.kind == SlotKind::buffer) {
      entry.free_when_unpinned = true;  // the last unpin frees it
      return true;
    }
    free_locked(slot, lock);
    return true;
  } catch (...) {
    return false;
  }
}

bool Pool::valid(Handle handle) const noexcept {
  std::lock_guard lock(mutex_);
  return table_->valid(handle);
}

bool Pool::owns(Handle handle) const noexcept { return handle.table == table_->id(); }

std::uint64_t Pool::size(Handle handle) const {
  std::lock_guard lock(mutex_);
  return (*table_)[table_->check(handle)].bytes;
}

std::uint64_t Pool::slot_address(std::uint32_t slot) const {
  const Slot& entry = (*table_)[slot];
  return segments_[entry.segment]->base + entry.offset;
}

std::uint64_t Pool::pin(Handle handle) {
  std::lock_guard lock(mutex_);
  const std::uint32_t slot = table_->check(handle);
  Slot& entry = (*table_)[slot];
  if (entry.pins++ == 0 && entry.kind == SlotKind::buffer) ++pinned_;
  return slot_address(slot);
}

void Pool::unpin(Handle handle, Stream stream) {
  const Lock lock(mutex_);
  const std::uint32_t slot = table_->check(handle);
  Slot& entry = (*table_)[slot];
  if (entry.pins == 0) {
    throw state_error(detail::message("unpin of buffer {slot ", slot, "}, which is not pinned"));
  }
  if (stream != nullptr) record_use(slot, stream);
  const bool frees = entry.pins == 1 && entry.kind == SlotKind::buffer && entry.free_when_unpinned;
  // The wait that freeing needs comes first: if it fails, the pin is still held and nothing else
  // changed (the use just recorded stays recorded), so the unpin can be tried again.
  if (frees && entry.pending_uses != 0) finish_pending_uses(slot);
  if (--entry.pins == 0 && entry.kind == SlotKind::buffer) {
    --pinned_;
    if (frees) free_locked(slot, lock);
  }
}

bool Pool::unpin_noexcept(Handle handle, Stream stream) noexcept {
  try {
    unpin(handle, stream);
    return true;
  } catch (...) {
    return false;
  }
}

std::uint64_t Pool::address(Handle handle) const {
  std::lock_guard lock(mutex_);
  return slot_address(table_->check(handle));
}

namespace {
void check_range(std::uint32_t slot, std::uint64_t offset, std::uint64_t bytes, std::uint64_t size) {
  if (offset > size || bytes > size - offset) {
    throw invalid_argument(detail::message("access of ", bytes, " bytes at offset ", offset, " to buffer {slot ",
                                           slot, "} of ", size, " bytes"));
  }
}
}  // namespace

// Copies run outside the lock, with the buffer pinned so that no compaction moves it meanwhile.
void Pool::write(Handle handle, gsl::span<const std::byte> data, std::uint64_t offset, Stream stream) {
  const std::uint64_t destination = pin(handle);
  try {
    check_range(handle.slot, offset, data.size(), size(handle));
    device_->copy_from_host(destination + offset, data.data(), data.size(), stream);
  } catch (...) {
    unpin_noexcept(handle);
    throw;
  }
  unpin(handle);
}

void Pool::read(Handle handle, gsl::span<std::byte> data, std::uint64_t offset, Stream stream) const {
  auto& self = const_cast<Pool&>(*this);  // pinning is bookkeeping, not a change of the buffer
  const std::uint64_t source = self.pin(handle);
  try {
    check_range(handle.slot, offset, data.size(), size(handle));
    device_->copy_to_host(data.data(), source + offset, data.size(), stream);
  } catch (...) {
    self.unpin_noexcept(handle);
    throw;
  }
  self.unpin(handle);
}

void Pool::fill(Handle handle, std::byte value, Stream stream) {
  const std::uint64_t destination = pin(handle);
  try {
    device_->fill(destination, value, size(handle), stream);
  } catch (...) {
    unpin_noexcept(handle);
    throw;
  }
  unpin(handle);
}

}  // namespace vramkit
