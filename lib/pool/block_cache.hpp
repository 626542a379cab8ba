#pragma once
// Internal to the pool: blocks freed since the last allocation that missed, kept allocated in
// their heap for a request of exactly the same size. A pipeline that frees a batch's buffers and
// asks for the same sizes again then skips the heap's merge and split, and gets the same places.
//
// The first request the cache cannot serve empties it (drain) before going to the heaps, so every
// placement decision of the heaps sees all free space: the cache changes where a block goes only
// when it hands back the very block of that size just freed. The pool also drains it before
// compaction, statistics and the memory map. Bounded in entries and in bytes.
//
// Invariants: the first count() entries are occupied and their bytes sum to bytes(); each names an
// allocated heap block that no live slot names.
#include <array>
#include <cstdint>
#include <optional>

#include <vramkit/heap.hpp>

namespace vramkit {

struct CachedBlock {
  std::uint64_t bytes = 0;
  std::uint64_t offset = 0;
  BlockId block = no_block;
  std::uint32_t segment = 0;
};

class BlockCache {
 public:
  static constexpr std::size_t capacity = 16;

  /// Removes and returns the most recently cached block of exactly `bytes` whose offset is a
  /// multiple of `alignment` (segment bases are aligned to every alignment the pool serves).
  std::optional<CachedBlock> take(std::uint64_t bytes, std::uint64_t alignment) {
    for (std::size_t index = count_; index-- > 0;) {
      if (entries_[index].bytes == bytes && entries_[index].offset % alignment == 0) {
        const CachedBlock found = entries_[index];
        entries_[index] = entries_[--count_];
        bytes_ -= bytes;
        return found;
      }
    }
    return std::nullopt;
  }

  /// Keeps `block` unless the cache is full or would pass `max_bytes`; false then.
  bool put(const CachedBlock& block, std::uint64_t max_bytes) {
    if (count_ == capacity || block.bytes > max_bytes - std::min(bytes_, max_bytes)) return false;
    entries_[count_++] = block;
    bytes_ += block.bytes;
    return true;
  }

  /// Empties the cache, handing every block to `release` (which frees it in its heap).
  template <class Release>
  void drain(Release&& release) {
    while (count_ != 0) {
      const CachedBlock block = entries_[--count_];
      bytes_ -= block.bytes;
      release(block);
    }
  }

  template <class Visitor>
  void for_each(Visitor&& visit) const {
    for (std::size_t index = 0; index < count_; ++index) visit(entries_[index]);
  }

  std::size_t count() const { return count_; }
  std::uint64_t bytes() const { return bytes_; }

 private:
  std::array<CachedBlock, capacity> entries_{};
  std::size_t count_ = 0;
  std::uint64_t bytes_ = 0;
};

}  // namespace vramkit
