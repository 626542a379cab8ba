#pragma once
// Internal to the pool: a segment is one device region and the heap that sub-allocates it.
#include <vramkit/heap.hpp>
#include <vramkit/pool.hpp>

#include "handles/handle_table.hpp"

namespace vramkit {

struct Pool::Segment {
  Segment(Region region_, std::uint64_t granularity) : region(region_), heap(region_.bytes, granularity) {}
  Region region;
  Heap heap;
};

/// The byte written into guard margins.
inline constexpr std::byte guard_pattern{0xA5};

}  // namespace vramkit
