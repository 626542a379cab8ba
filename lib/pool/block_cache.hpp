#pragma once
// Internal to the pool: freed blocks kept, still allocated in their heap, for the next request of
// exactly the same size. An allocate+free pair of a repeated size then skips the heap's split and
// merge: the pattern of a pipeline that asks for the same buffers every batch.
//
// The cache holds free space the heaps cannot see, so the pool empties it (drain) before anything
// that looks at the heaps: compaction, statistics, the memory map, and an allocation that the
// heaps cannot serve. Bounded in entries (bins x ways) and in bytes.
//
// Invariants: count() entries are occupied (bytes != 0), their bytes sum to bytes(); each names an
// allocated heap block that no live slot names.
#include <array>
#include <cstdint>
#include <optional>

#include <vramkit/heap.hpp>

namespace vramkit {

struct CachedBlock {
  std::uint64_t bytes = 0;  ///< The block's size; 0 marks an empty entry.
  std::uint64_t offset = 0;
  BlockId block = no_block;
  std::uint32_t segment = 0;
};

class BlockCache {
 public:
  static constexpr std::size_t bins = 32;
  static constexpr std::size_t ways = 4;

  /// Removes and returns a cached block of exactly `bytes` whose offset is a multiple of
  /// `alignment` (segment bases are aligned to every alignment the pool serves).
  std::optional<CachedBlock> take(std::uint64_t bytes, std::uint64_t alignment) {
    if (count_ == 0) return std::nullopt;
    CachedBlock* bin = &entries_[bin_of(bytes) * ways];
    for (std::size_t way = 0; way < ways; ++way) {
      CachedBlock& entry = bin[way];
      if (entry.bytes == bytes && entry.offset % alignment == 0) {
        const CachedBlock found = entry;
        entry.bytes = 0;
        --count_;
        bytes_ -= bytes;
        return found;
      }
    }
    return std::nullopt;
  }

  /// Keeps `block` unless its bin is full or the cache would pass `max_bytes`; false then.
  bool put(const CachedBlock& block, std::uint64_t max_bytes) {
    if (block.bytes == 0 || block.bytes > max_bytes - std::min(bytes_, max_bytes)) return false;
    CachedBlock* bin = &entries_[bin_of(block.bytes) * ways];
    for (std::size_t way = 0; way < ways; ++way) {
      if (bin[way].bytes == 0) {
        bin[way] = block;
        ++count_;
        bytes_ += block.bytes;
        return true;
      }
    }
    return false;
  }

  /// Empties the cache, handing every block to `release` (which frees it in its heap).
  template <class Release>
  void drain(Release&& release) {
    if (count_ == 0) return;
    for (CachedBlock& entry : entries_) {
      if (entry.bytes == 0) continue;
      const CachedBlock block = entry;
      entry.bytes = 0;
      --count_;
      bytes_ -= block.bytes;
      release(block);
    }
  }

  template <class Visitor>
  void for_each(Visitor&& visit) const {
    for (const CachedBlock& entry : entries_)
      if (entry.bytes != 0) visit(entry);
  }

  std::size_t count() const { return count_; }
  std::uint64_t bytes() const { return bytes_; }

 private:
  // Fibonacci hashing of the size in granules of 16 bytes (the smallest pool granularity).
  static std::size_t bin_of(std::uint64_t bytes) {
    return static_cast<std::size_t>(((bytes >> 4) * 0x9E3779B97F4A7C15ull) >> 59);  // 5 bits: 32 bins
  }
  static_assert(bins == 32, "bin_of yields 5 bits");

  std::array<CachedBlock, bins * ways> entries_{};
  std::size_t count_ = 0;
  std::uint64_t bytes_ = 0;
};

}  // namespace vramkit
