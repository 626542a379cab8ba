#pragma once
// cccl_resource: a vramkit Pool as a CCCL memory resource (cuda::mr), device accessible and with the
// stream-ordered interface, so that CCCL containers and RMM-style code can allocate from a pool:
//   vramkit::cccl_resource resource(pool);
//   void* block = resource.allocate_async(bytes, 256, cuda::stream_ref(stream));   // CCCL 3.0
//   void* block = resource.allocate(cuda::stream_ref(stream), bytes, 256);         // CCCL >= 3.1
//
// Raw pointers escape, so every block is pinned for its whole life (Pool::allocate_pinned): compaction
// never moves it. The pool is not stream ordered: allocate_async allocates at once (the stream is not
// used), and deallocate_async ends the pin on the stream (Pool::unpin with that stream records where
// the stream's queued work ends) and frees; the free waits on the host until that work has finished,
// so deallocate_async may block. Synchronous deallocate assumes the caller has finished with the block.
//
// CCCL 3.0 keeps cuda/memory_resource behind LIBCUDACXX_ENABLE_EXPERIMENTAL_MEMORY_RESOURCE (defined
// here; include this header before any other that includes <cuda/memory_resource>). CCCL 3.1 renamed
// the concepts and members: async_resource -> resource, resource -> synchronous_resource,
// allocate_async(bytes, alignment, stream) -> allocate(stream, bytes, alignment), allocate ->
// allocate_sync. This type provides both spellings; vramkit::cccl_resource_concept_satisfied checks
// whichever concept the CCCL in use has.
//
// Guarantees: allocations throw like Pool::allocate (out_of_memory is a std::bad_alloc); deallocations
// never throw and ignore pointers this pool did not hand out through an adapter. Two resources are
// equal exactly when they share a pool. Cost: Pool::allocate_pinned plus one hash-map insertion.
#ifndef LIBCUDACXX_ENABLE_EXPERIMENTAL_MEMORY_RESOURCE
#define LIBCUDACXX_ENABLE_EXPERIMENTAL_MEMORY_RESOURCE
#endif
#include <cstddef>
#include <cstdint>

#include <cuda/memory_resource>
#include <cuda/stream_ref>

#include <vramkit/detail/pinned_registry.hpp>
#include <vramkit/pool.hpp>

namespace vramkit {

class cccl_resource {
 public:
  explicit cccl_resource(Pool& pool) noexcept : pool_(&pool) {}

  // Synchronous (CCCL 3.0 spelling, then CCCL >= 3.1).
  void* allocate(std::size_t bytes, std::size_t alignment = 256) { return allocate_pinned(bytes, alignment); }
  void deallocate(void* block, std::size_t, std::size_t = 256) noexcept { release(block, nullptr); }
  void* allocate_sync(std::size_t bytes, std::size_t alignment = 256) {
    return allocate_pinned(bytes, alignment);
  }
  void deallocate_sync(void* block, std::size_t, std::size_t = 256) noexcept { release(block, nullptr); }

  // Stream ordered (CCCL 3.0 spelling, then CCCL >= 3.1). See the header comment: allocation is
  // immediate; deallocation records the stream's use and waits for it.
  void* allocate_async(std::size_t bytes, std::size_t alignment, ::cuda::stream_ref) {
    return allocate_pinned(bytes, alignment);
  }
  void* allocate_async(std::size_t bytes, ::cuda::stream_ref stream) {
    return allocate_async(bytes, 256, stream);
  }
  void deallocate_async(void* block, std::size_t, std::size_t, ::cuda::stream_ref stream) noexcept {
    release(block, stream.get());
  }
  void deallocate_async(void* block, std::size_t bytes, ::cuda::stream_ref stream) noexcept {
    deallocate_async(block, bytes, 256, stream);
  }
  void* allocate(::cuda::stream_ref, std::size_t bytes, std::size_t alignment = 256) {
    return allocate_pinned(bytes, alignment);
  }
  void deallocate(::cuda::stream_ref stream, void* block, std::size_t, std::size_t = 256) noexcept {
    release(block, stream.get());
  }

  Pool& pool() const noexcept { return *pool_; }
  friend bool operator==(const cccl_resource& left, const cccl_resource& right) noexcept {
    return left.pool_ == right.pool_;
  }
  /// The pool's memory is device memory (on the CUDA device; the host device simulates it).
  friend constexpr void get_property(const cccl_resource&, ::cuda::mr::device_accessible) noexcept {}

 private:
  void* allocate_pinned(std::size_t bytes, std::size_t alignment) {
    const std::uint64_t address = detail::PinnedRegistry::instance().allocate(*pool_, bytes, alignment);
    return reinterpret_cast<void*>(static_cast<std::uintptr_t>(address));
  }
  void release(void* block, Stream stream) noexcept {
    if (block == nullptr) return;
    detail::PinnedRegistry::instance().release(*pool_, reinterpret_cast<std::uintptr_t>(block), stream);
  }

  Pool* pool_;
};

/// Whether cccl_resource satisfies the stream-ordered, device-accessible resource concept of the CCCL
/// in use (async_resource_with before 3.1, resource_with from 3.1), and the synchronous one.
#if CCCL_VERSION >= 3001000
inline constexpr bool cccl_resource_concept_satisfied =
    ::cuda::mr::resource_with<cccl_resource, ::cuda::mr::device_accessible> &&
    ::cuda::mr::synchronous_resource_with<cccl_resource, ::cuda::mr::device_accessible>;
#else
inline constexpr bool cccl_resource_concept_satisfied =
    ::cuda::mr::async_resource_with<cccl_resource, ::cuda::mr::device_accessible> &&
    ::cuda::mr::resource_with<cccl_resource, ::cuda::mr::device_accessible>;
#endif

}  // namespace vramkit
