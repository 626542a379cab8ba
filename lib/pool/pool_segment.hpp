#pragma once
// Internal to the pool: a segment is one device region and the heap that sub-allocates it.
#include <vramkit/heap.hpp>
#include <vramkit/pool.hpp>

#include "handles/handle_table.hpp"
#include "pool/compaction_scratch.hpp"

namespace vramkit {

/// Offsets aligned to this (or less) within a segment are aligned as device addresses: a segment's
/// base is a multiple of it, the largest alignment the pool serves.
inline constexpr std::uint64_t segment_alignment = max_block_alignment;

/// capacity_fraction of the device's free memory now, in bytes (not rounded), for a pool or a
/// ConcurrentPool whose capacity_bytes is 0. Throws invalid_argument for a fraction outside (0, 1].
std::uint64_t capacity_of_fraction(double fraction, Device& device);

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
