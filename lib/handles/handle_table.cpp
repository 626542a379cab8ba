#include "handles/handle_table.hpp"

#include <atomic>

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
