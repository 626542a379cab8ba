#pragma once
// PinnedRegistry: the handles behind raw pointers that adapters (thrust_allocator, cccl_resource) have
// handed out. Such an allocation is pinned for its whole life, so its address never changes and the
// pair (pool, address) names it until it is released.
//
// Invariant: an entry exists exactly while its handle is live and pinned once by the adapter.
// Cost: one mutex and one hash-map operation per allocation and per release.
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <utility>

#include <vramkit/handle.hpp>
#include <vramkit/pool.hpp>

namespace vramkit::detail {

class PinnedRegistry {
 public:
  /// The registry shared by every adapter in the process, so that two adapters over the same pool
  /// (which compare equal) can release each other's allocations.
  static PinnedRegistry& instance() {
    static PinnedRegistry registry;
    return registry;
  }

  /// Allocates a block pinned for life and records it; returns its device address.
  std::uint64_t allocate(Pool& pool, std::uint64_t bytes, std::uint64_t alignment) {
    const Handle handle = pool.allocate_pinned(bytes, alignment);
    std::uint64_t address = 0;
    try {
      address = pool.address(handle);
      std::lock_guard lock(mutex_);
      entries_.emplace(Key{&pool, address}, handle);
    } catch (...) {
      pool.release(handle);
      throw;
    }
    return address;
  }

  /// Frees the block (allocate_pinned: it never moves), after recording `stream`'s use when given so
  /// that the memory is not reused before that work has finished. Returns false,
  /// changing nothing, for an address this pool did not hand out through a registry. Never throws.
  bool release(Pool& pool, std::uint64_t address, Stream stream = nullptr) noexcept {
    std::optional<Handle> handle;
    {
      std::lock_guard lock(mutex_);
      const auto entry = entries_.find(Key{&pool, address});
      if (entry == entries_.end()) return false;
      handle = entry->second;
      entries_.erase(entry);
    }
    // release() records the stream's use and waits for it (on the host) before the memory is reused.
    return pool.release(*handle, stream);
  }

  /// The handle behind an address, if this registry holds it.
  std::optional<Handle> find(const Pool& pool, std::uint64_t address) const {
    std::lock_guard lock(mutex_);
    const auto entry = entries_.find(Key{&pool, address});
    if (entry == entries_.end()) return std::nullopt;
    return entry->second;
  }

 private:
  using Key = std::pair<const Pool*, std::uint64_t>;
  struct KeyHash {
    std::size_t operator()(const Key& key) const noexcept {
      return std::hash<const void*>{}(key.first) ^
             (std::hash<std::uint64_t>{}(key.second) * 0x9e3779b97f4a7c15ull);
    }
  };

  mutable std::mutex mutex_;
  std::unordered_map<Key, Handle, KeyHash> entries_;
};

}  // namespace vramkit::detail
