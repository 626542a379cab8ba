#pragma once
// Pinned<T>: a pin guard. While it lives the buffer cannot move, so its raw device pointer is
// valid; when it ends (scope exit, or reset()) the pin is released, on a stream if one was given,
// so the compactor waits for the work queued there before moving the buffer. Move-only; no
// overhead beyond the pool pointer, the handle, the pointer, the count and the stream.
#include <cstddef>
#include <cstdint>
#include <utility>

#include <cuda/std/span>

#include <vramkit/pool.hpp>

namespace vramkit {

template <class T>
class Pinned {
 public:
  Pinned() = default;
  /// Pins `handle` (throws what Pool::pin throws). `release_stream`: where the use ends.
  Pinned(Pool& pool, Handle handle, std::size_t count, Stream release_stream = nullptr)
      : pool_(&pool), handle_(handle), count_(count), stream_(release_stream) {
    data_ = reinterpret_cast<T*>(static_cast<std::uintptr_t>(pool.pin(handle)));
  }
  Pinned(Pinned&& other) noexcept { *this = std::move(other); }
  Pinned& operator=(Pinned&& other) noexcept {
    if (this != &other) {
      reset();
      pool_ = std::exchange(other.pool_, nullptr);
      handle_ = std::exchange(other.handle_, Handle{});
      data_ = std::exchange(other.data_, nullptr);
      count_ = std::exchange(other.count_, 0);
      stream_ = other.stream_;
    }
    return *this;
  }
  Pinned(const Pinned&) = delete;
  Pinned& operator=(const Pinned&) = delete;
  ~Pinned() { reset(); }

  /// The device pointer: valid while this guard lives.
  T* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return count_; }
  /// A span for kernels (cuda::std::span works in device code).
  cuda::std::span<T> span() const noexcept { return {data_, count_}; }
  /// Where the pin will be released: set the stream the last kernel using the pointer runs on.
  void release_on(Stream stream) noexcept { stream_ = stream; }
  void reset() noexcept {
    if (pool_ != nullptr) pool_->unpin_noexcept(handle_, stream_);
    pool_ = nullptr;
    data_ = nullptr;
    count_ = 0;
  }

 private:
  Pool* pool_ = nullptr;
  Handle handle_{};
  T* data_ = nullptr;
  std::size_t count_ = 0;
  Stream stream_ = nullptr;
};

}  // namespace vramkit
