#pragma once
// HandleTable: the indirection that makes buffers movable. Users hold {slot, generation}; the slot
// says where the buffer is now. Compaction rewrites slots, never handles.
//
// Invariants (check_invariants() verifies them; the pool's check calls it):
//  - a live slot has generation != 0 and is on no free list; a free slot is on the free list once;
//  - a slot's generation changes every time it is released, so every handle to the old buffer is
//    stale from then on (generations wrap after 2^32 - 1 reuses of one slot, skipping 0);
//  - pins counts unreleased pins; the compactor never moves a slot with pins != 0;
//  - a free slot has no block, no pins, no pending uses and is not marked free_when_unpinned:
//    release() leaves them so, and acquire() then writes only the fields that describe the request
//    (a live slot with no block is being placed: its offset and segment mean nothing yet).
#include <cstdint>
#include <string>
#include <vector>

#include <vramkit/handle.hpp>
#include <vramkit/heap.hpp>

namespace vramkit {

/// What kind of owner a slot has. Arena slots are pinned for the arena's life.
enum class SlotKind : std::uint8_t { buffer, arena };

struct Slot {
  std::uint64_t offset = 0;       ///< Within the segment.
  std::uint64_t bytes = 0;        ///< As requested.
  std::uint64_t block_bytes = 0;  ///< As placed: rounded up to the granularity (plus any margin).
  std::uint64_t alignment = 0;
  BlockId block = no_block;
  std::uint32_t segment = 0;
  std::uint32_t generation = 1;
  std::uint32_t pins = 0;
  std::uint32_t pending_uses = 0;  ///< Stream uses recorded at unpin and not yet known to be over.
  std::uint32_t next_free = 0xFFFFFFFFu;  ///< The next slot on the free list; none: 0xFFFFFFFF.
  bool live = false;
  bool free_when_unpinned = false;  ///< Released while pinned: freed by the last unpin.
  SlotKind kind = SlotKind::buffer;
};

class HandleTable {
 public:
  HandleTable();

  std::uint32_t id() const { return id_; }

  /// A fresh live slot for a request, not yet placed (block no_block); its handle is
  /// handle_of(slot). O(1) amortised. Inline: the allocation path.
  std::uint32_t acquire(std::uint64_t bytes, std::uint64_t block_bytes, std::uint64_t alignment,
                        SlotKind kind) {
    const std::uint32_t slot = free_head_ != no_slot ? free_head_ : append();
    Slot& entry = slots_[slot];
    free_head_ = entry.next_free;  // append() leaves a new slot's next_free at no_slot
    entry.bytes = bytes;
    entry.block_bytes = block_bytes;
    entry.alignment = alignment;
    entry.kind = kind;
    entry.live = true;
    ++live_;
    return slot;
  }
  /// Releases a live slot and changes its generation. O(1).
  void release(std::uint32_t slot) {
    Slot& entry = slots_[slot];
    entry.live = false;
    entry.free_when_unpinned = false;
    entry.pins = 0;
    entry.pending_uses = 0;
    entry.block = no_block;
    if (++entry.generation == 0) entry.generation = 1;
    entry.next_free = free_head_;
    free_head_ = slot;
    --live_;
  }

  Handle handle_of(std::uint32_t slot) const { return {slot, slots_[slot].generation, id_}; }

  /// The slot of a live handle of this table; throws invalid_handle naming what is wrong. An empty
  /// handle (generation 0) fails the generation test: no slot's generation is 0.
  std::uint32_t check(Handle handle) const {
    if (handle.table == id_ && handle.slot < slots_.size() &&
        slots_[handle.slot].generation == handle.generation && slots_[handle.slot].live) {
      return handle.slot;
    }
    throw_invalid(handle);
  }
  bool valid(Handle handle) const noexcept {
    return handle.table == id_ && handle.slot < slots_.size() && slots_[handle.slot].live &&
           slots_[handle.slot].generation == handle.generation;
  }

  Slot& operator[](std::uint32_t slot) { return slots_[slot]; }
  const Slot& operator[](std::uint32_t slot) const { return slots_[slot]; }
  std::size_t live_count() const { return live_; }
  std::size_t size() const { return slots_.size(); }

  /// Verifies every invariant listed above; throws std::logic_error naming the first broken one. O(n).
  void check_invariants() const;

 private:
  [[noreturn]] void throw_invalid(Handle handle) const;
  /// A new slot at the end of the table, not on the free list (the free list is empty).
  std::uint32_t append();

  static constexpr std::uint32_t no_slot = 0xFFFFFFFFu;
  std::vector<Slot> slots_;
  std::uint32_t free_head_ = no_slot;
  std::size_t live_ = 0;
  std::uint32_t id_;
};

}  // namespace vramkit
