#pragma once
// Handle: what a user holds instead of a raw pointer. {slot, generation, table}: the slot indexes
// the pool's handle table; the generation changes whenever the slot is freed, so a stale handle is
// detected, never resolved to someone else's memory; the table id catches another pool's handle.
// An all-zero handle is empty (what a moved-from buffer holds). 12 bytes, trivially copyable.
#include <cstdint>

namespace vramkit {

struct Handle {
  std::uint32_t slot = 0;
  std::uint32_t generation = 0;  ///< Never 0 for a live buffer.
  std::uint32_t table = 0;       ///< The owning pool's table id; never 0 for a live buffer.

  constexpr bool empty() const noexcept { return generation == 0; }
  constexpr explicit operator bool() const noexcept { return !empty(); }
  friend constexpr bool operator==(const Handle&, const Handle&) = default;
};

}  // namespace vramkit
