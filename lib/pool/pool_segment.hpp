#pragma once
// Internal to the pool: a segment is one device region and the heap that sub-allocates it.
#include <vramkit/heap.hpp>
#include <vramkit/pool.hpp>

#include "handles/handle_table.hpp"
#include "pool/compaction_scratch.hpp"

namespace vramkit {

/// Offsets aligned to this (or less) within a segment are aligned as device addresses: a segment's
/// base is a multiple of it. It is also the largest alignment the pool serves.
inline constexpr std::uint64_t segment_alignment = 2ull << 20;

/// Invariant: base is a multiple of segment_alignment, and [base, base + heap.capacity()) lies
/// inside region.
struct Pool::Segment {
  Segment(Region region_, std::uint64_t base_, std::uint64_t bytes, std::uint64_t granularity)
      : region(region_), base(base_), heap(bytes, granularity) {}
  Region region;      ///< What the device gave (released as is).
  std::uint64_t base; ///< Where offset 0 is.
  Heap heap;
};

/// The byte written into guard margins.
inline constexpr std::byte guard_pattern{0xA5};

}  // namespace vramkit
