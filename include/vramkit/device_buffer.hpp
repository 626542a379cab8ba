#pragma once
// DeviceBuffer<T>: an owning, movable handle to `size()` elements of T in a pool. It frees its block
// when destroyed (never throws) and holds no raw pointer: compaction may move it between pins.
// A buffer of 0 elements is empty and holds no block (like an empty std::vector). Move-only.
// Cost: a pool pointer, a handle and a count.
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include <gsl/span>

#include <vramkit/detail/message.hpp>
#include <vramkit/errors.hpp>
#include <vramkit/pinned.hpp>
#include <vramkit/pool.hpp>

namespace vramkit {

template <class T>
class DeviceBuffer {
  static_assert(std::is_trivially_copyable_v<T>, "device buffers hold trivially copyable elements");

 public:
  DeviceBuffer() = default;
  /// `count` uninitialised elements. Throws invalid_argument when count x sizeof(T) overflows,
  /// out_of_memory when the pool cannot serve it.
  DeviceBuffer(Pool& pool, std::size_t count, std::uint64_t alignment = 256) : pool_(&pool), count_(count) {
    if (count > std::numeric_limits<std::uint64_t>::max() / sizeof(T)) {
      throw invalid_argument(detail::message("buffer of ", count, " elements of ", sizeof(T),
                                             " bytes overflows 64-bit byte counts"));
    }
    if (count != 0) handle_ = pool.allocate(count * sizeof(T), alignment);
  }
  /// A buffer holding a copy of `values`.
  DeviceBuffer(Pool& pool, gsl::span<const T> values) : DeviceBuffer(pool, values.size()) { upload(values); }

  DeviceBuffer(DeviceBuffer&& other) noexcept
      : pool_(std::exchange(other.pool_, nullptr)),
        handle_(std::exchange(other.handle_, Handle{})),
        count_(std::exchange(other.count_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      reset();
      pool_ = std::exchange(other.pool_, nullptr);
      handle_ = std::exchange(other.handle_, Handle{});
      count_ = std::exchange(other.count_, 0);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { reset(); }

  std::size_t size() const noexcept { return count_; }
  std::uint64_t bytes() const noexcept { return count_ * sizeof(T); }
  bool empty() const noexcept { return count_ == 0; }
  Handle handle() const noexcept { return handle_; }
  Pool* pool() const noexcept { return pool_; }

  /// Copies `values` into elements [first, first + values.size()).
  void upload(gsl::span<const T> values, std::size_t first = 0, Stream stream = nullptr) {
    check_range(first, values.size());
    if (!values.empty()) pool_->write(handle_, gsl::as_bytes(values), first * sizeof(T), stream);
  }
  /// Copies elements [first, first + values.size()) into `values`.
  void download(gsl::span<T> values, std::size_t first = 0, Stream stream = nullptr) const {
    check_range(first, values.size());
    if (!values.empty()) pool_->read(handle_, gsl::as_writable_bytes(values), first * sizeof(T), stream);
  }
  std::vector<T> to_vector() const {
    std::vector<T> values(count_);
    download(values);
    return values;
  }

  /// Pins the buffer: the guard yields the device pointer / a cuda::std::span for kernels.
  Pinned<T> pin(Stream release_stream = nullptr) {
    if (pool_ == nullptr || empty()) throw invalid_handle("pin of an empty buffer");
    return Pinned<T>(*pool_, handle_, count_, release_stream);
  }

  /// Frees the block now (never throws); the buffer becomes empty.
  void reset() noexcept {
    if (pool_ != nullptr && !handle_.empty()) pool_->release(handle_);
    handle_ = Handle{};
    count_ = 0;
  }

 private:
  void check_range(std::size_t first, std::size_t count) const {
    if (first > count_ || count > count_ - first) {
      throw invalid_argument(detail::message("elements [", first, ", ", first + count, ") are outside a buffer of ",
                                             count_, " elements"));
    }
  }

  Pool* pool_ = nullptr;
  Handle handle_{};
  std::size_t count_ = 0;
};

}  // namespace vramkit
