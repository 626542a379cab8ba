#include "handles/handle_table.hpp"

#include <atomic>

#include <vramkit/detail/message.hpp>
#include <vramkit/errors.hpp>

namespace vramkit {
namespace {
std::atomic<std::uint32_t> next_table_id{1};
}

HandleTable::HandleTable() : id_(next_table_id.fetch_add(1)) {}

std::uint32_t HandleTable::acquire() {
  std::uint32_t slot;
  if (free_head_ != no_slot) {
    slot = free_head_;
    free_head_ = slots_[slot].next_free;
  } else {
    if (slots_.size() >= no_slot) throw out_of_memory("handle table is full: 2^32 - 1 live buffers");
    slots_.emplace_back();
    slot = static_cast<std::uint32_t>(slots_.size() - 1);
  }
  Slot& entry = slots_[slot];
  const std::uint32_t generation = entry.generation;
  entry = Slot{};
  entry.generation = generation;
  entry.live = true;
  ++live_;
  return slot;
}

void HandleTable::release(std::uint32_t slot) {
  Slot& entry = slots_[slot];
  entry.live = false;
  entry.pins = 0;
  entry.pending_uses = 0;
  entry.block = no_block;
  if (++entry.generation == 0) entry.generation = 1;
  entry.next_free = free_head_;
  free_head_ = slot;
  --live_;
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
