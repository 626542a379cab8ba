#include "handles/handle_table.hpp"

#include <atomic>
#include <stdexcept>

#include <vramkit/detail/message.hpp>
#include <vramkit/errors.hpp>

namespace vramkit {
namespace {
std::atomic<std::uint32_t> next_table_id{1};
}

HandleTable::HandleTable() : id_(next_table_id.fetch_add(1)) {}

std::uint32_t HandleTable::append() {
  if (slots_.size() >= no_slot) throw out_of_memory("handle table is full: 2^32 - 1 live buffers");
  slots_.emplace_back();
  return static_cast<std::uint32_t>(slots_.size() - 1);
}

void HandleTable::check_invariants() const {
  auto fail = [](const std::string& what) {
    throw std::logic_error("handle table invariant broken: " + what);
  };
  std::vector<bool> listed(slots_.size(), false);
  std::size_t free_slots = 0;
  for (std::uint32_t slot = free_head_; slot != no_slot; slot = slots_[slot].next_free) {
    if (slot >= slots_.size()) fail(detail::message("free list names slot ", slot, " of ", slots_.size()));
    if (listed[slot]) fail(detail::message("slot ", slot, " is on the free list twice"));
    listed[slot] = true;
    ++free_slots;
    const Slot& entry = slots_[slot];
    if (entry.live) fail(detail::message("live slot ", slot, " is on the free list"));
    // acquire() writes only the request's fields: the rest must be as a fresh slot has them.
    if (entry.block != no_block || entry.pins != 0 || entry.pending_uses != 0 || entry.free_when_unpinned) {
      fail(detail::message("free slot ", slot, " keeps a block, pins, pending uses or free_when_unpinned"));
    }
  }
  for (std::size_t slot = 0; slot < slots_.size(); ++slot) {
    if (slots_[slot].generation == 0) fail(detail::message("slot ", slot, " has generation 0"));
    if (!listed[slot] && !slots_[slot].live) {
      fail(detail::message("slot ", slot, " is neither live nor free"));
    }
  }
  if (slots_.size() - free_slots != live_) {
    fail(detail::message(slots_.size() - free_slots, " live slots but live_count() says ", live_));
  }
}

void HandleTable::throw_invalid(Handle handle) const {
  if (handle.empty()) throw invalid_handle("empty handle (a moved-from or default-constructed buffer)");
  if (handle.table != id_) {
    throw invalid_handle(detail::message("handle {slot ", handle.slot, ", generation ", handle.generation,
                                         "} belongs to pool table ", handle.table, ", not to this pool (table ",
                                         id_, ")"));
  }
  if (handle.slot >= slots_.size()) {
    throw invalid_handle(detail::message("handle slot ", handle.slot, " is outside the table (", slots_.size(),
                                         " slots)"));
  }
  throw invalid_handle(detail::message("stale handle {slot ", handle.slot, ", generation ", handle.generation,
                                       "}: that buffer was freed (slot generation is now ",
                                       slots_[handle.slot].generation, ")"));
}

}  // namespace vramkit
