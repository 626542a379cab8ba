#pragma once
// Power-of-two arithmetic shared by the heap, the pool, the compactor, arenas and images.
#include <cstdint>

namespace vramkit::detail {

constexpr bool is_power_of_two(std::uint64_t value) { return value != 0 && (value & (value - 1)) == 0; }

/// `value` rounded up to a multiple of `alignment`, a power of two.
constexpr std::uint64_t align_up(std::uint64_t value, std::uint64_t alignment) {
  return (value + alignment - 1) & ~(alignment - 1);
}

}  // namespace vramkit::detail
