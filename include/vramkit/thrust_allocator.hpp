#pragma once
// thrust_allocator<T>: a Thrust allocator that draws from a vramkit Pool, so that
//   thrust::device_vector<float, vramkit::thrust_allocator<float>> values(n,
//   vramkit::thrust_allocator<float>(pool));
// keeps its elements in the pool. Thrust hands raw device pointers to kernels, so every allocation is
// pinned for its whole life (Pool::allocate_pinned): compaction moves the pool's other buffers around
// it, never it. deallocate unpins and frees.
//
// Guarantees: allocate throws out_of_memory (a std::bad_alloc) or invalid_argument like
// Pool::allocate; deallocate never throws and ignores pointers this pool did not hand out through an
// adapter. Two allocators compare equal exactly when they draw from the same pool, so either may
// release the other's memory. Cost: Pool::allocate_pinned plus one hash-map insertion; the allocator
// itself is one pointer.
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>

#include <thrust/device_ptr.h>
#include <thrust/device_reference.h>

#include <vramkit/detail/message.hpp>
#include <vramkit/detail/pinned_registry.hpp>
#include <vramkit/errors.hpp>
#include <vramkit/pool.hpp>

namespace vramkit {

template <class T>
class thrust_allocator {
 public:
  using value_type = T;
  using pointer = thrust::device_ptr<T>;
  using const_pointer = thrust::device_ptr<const T>;
  using reference = thrust::device_reference<T>;
  using const_reference = thrust::device_reference<const T>;
  using size_type = std::size_t;
  using difference_type = std::ptrdiff_t;
  using propagate_on_container_copy_assignment = std::true_type;
  using propagate_on_container_move_assignment = std::true_type;
  using propagate_on_container_swap = std::true_type;
  template <class U>
  struct rebind {
    using other = thrust_allocator<U>;
  };

  /// Blocks are aligned to max(alignof(T), 256): what cudaMalloc gives, and what Thrust's kernels expect.
  static constexpr std::uint64_t alignment = alignof(T) > 256 ? alignof(T) : 256;

  explicit thrust_allocator(Pool& pool) noexcept : pool_(&pool) {}
  template <class U>
  thrust_allocator(const thrust_allocator<U>& other) noexcept : pool_(&other.pool()) {}

  /// `count` elements in a block pinned for life. count 0 gives a null pointer (and takes nothing).
  pointer allocate(size_type count) {
    if (count == 0) return pointer();
    if (count > max_size()) {
      throw invalid_argument(detail::message("thrust_allocator: ", count, " elements of ", sizeof(T),
                                             " bytes overflow; the limit is ", max_size()));
    }
    const std::uint64_t address = detail::PinnedRegistry::instance().allocate(
        *pool_, static_cast<std::uint64_t>(count) * sizeof(T), alignment);
    return pointer(reinterpret_cast<T*>(static_cast<std::uintptr_t>(address)));
  }

  /// Unpins and frees the block. Never throws; a null or foreign pointer is ignored.
  void deallocate(pointer block, size_type) noexcept {
    if (block.get() == nullptr) return;
    detail::PinnedRegistry::instance().release(*pool_, reinterpret_cast<std::uintptr_t>(block.get()));
  }

  size_type max_size() const noexcept { return std::numeric_limits<std::uint64_t>::max() / sizeof(T); }
  Pool& pool() const noexcept { return *pool_; }

  template <class U>
  friend bool operator==(const thrust_allocator& left, const thrust_allocator<U>& right) noexcept {
    return &left.pool() == &right.pool();
  }

 private:
  Pool* pool_;
};

}  // namespace vramkit
