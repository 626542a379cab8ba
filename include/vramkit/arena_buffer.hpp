#pragma once
// ArenaBuffer<T> and ArenaImage<T>: non-owning views of memory handed out by a ScopedArena or a
// PlannedBatch. The memory belongs to a pinned region (a pool block of kind arena, which the
// compactor never moves), so the device pointer stays valid for as long as the region lives; nothing
// is freed when a view ends. Copies go through the pool on the region's handle at the view's offset:
// they are range-checked by the pool, and a view used after its region went back to the pool (a
// root arena or a batch released) raises invalid_handle instead of touching reused memory. Within
// a live region nothing is checked: a view taken before its arena's reset(), or from a child arena
// that has since gone, still reaches the same bytes, which may have been handed out again (like a
// pointer into a stack frame that has returned). Take views for the scope that owns them.
// Cost: a pool pointer, a handle, an offset, an address and a count (images: width, height, pitch).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include <cuda/std/span>
#include <gsl/span>

#include <vramkit/detail/message.hpp>
#include <vramkit/detail/pitched_rows.hpp>
#include <vramkit/errors.hpp>
#include <vramkit/image.hpp>
#include <vramkit/pool.hpp>

namespace vramkit {

/// `size()` elements of T at byte `offset()` of a pinned region.
template <class T>
class ArenaBuffer {
  static_assert(std::is_trivially_copyable_v<T>, "arena buffers hold trivially copyable elements");

 public:
  ArenaBuffer() = default;
  /// Views `count` elements at `offset` of the pinned region `region`, whose device address is
  /// `region_address` (given, so that a view costs no pool lock to make).
  ArenaBuffer(Pool& pool, Handle region, std::uint64_t region_address, std::uint64_t offset,
              std::size_t count)
      : pool_(&pool), region_(region), offset_(offset), address_(region_address + offset), count_(count) {}

  /// The device pointer: valid while the arena (or batch) that handed out this view lives.
  T* data() const noexcept { return reinterpret_cast<T*>(static_cast<std::uintptr_t>(address_)); }
  std::uint64_t address() const noexcept { return address_; }
  /// A span for kernels (cuda::std::span works in device code).
  cuda::std::span<T> span() const noexcept { return {data(), count_}; }
  std::size_t size() const noexcept { return count_; }
  std::uint64_t bytes() const noexcept { return count_ * sizeof(T); }
  bool empty() const noexcept { return count_ == 0; }
  /// Byte offset inside the region (the root arena's region for nested arenas).
  std::uint64_t offset() const noexcept { return offset_; }
  Handle region() const noexcept { return region_; }

  /// Copies `values` into elements [first, first + values.size()).
  void upload(gsl::span<const T> values, std::size_t first = 0, Stream stream = nullptr) const {
    check_range(first, values.size());
    if (!values.empty()) pool_->write(region_, gsl::as_bytes(values), offset_ + first * sizeof(T), stream);
  }
  /// Copies elements [first, first + values.size()) into `values`.
  void download(gsl::span<T> values, std::size_t first = 0, Stream stream = nullptr) const {
    check_range(first, values.size());
    if (!values.empty()) {
      pool_->read(region_, gsl::as_writable_bytes(values), offset_ + first * sizeof(T), stream);
    }
  }
  std::vector<T> to_vector() const {
    std::vector<T> values(count_);
    download(values);
    return values;
  }

 private:
  void check_range(std::size_t first, std::size_t count) const {
    if (first > count_ || count > count_ - first) {
      throw invalid_argument(detail::message("elements [", first, ", ", first + count,
                                             ") are outside an arena buffer of ", count_, " elements"));
    }
  }

  Pool* pool_ = nullptr;
  Handle region_{};
  std::uint64_t offset_ = 0;
  std::uint64_t address_ = 0;
  std::size_t count_ = 0;
};

/// `height` rows of `width` T, `pitch_bytes()` apart, at byte `offset()` of a pinned region.
template <class T>
class ArenaImage {
  static_assert(std::is_trivially_copyable_v<T>, "arena images hold trivially copyable pixels");

 public:
  ArenaImage() = default;
  ArenaImage(Pool& pool, Handle region, std::uint64_t region_address, std::uint64_t offset,
             std::uint32_t width, std::uint32_t height, std::uint64_t pitch_bytes)
      : pixels_(pool, region, region_address, offset, pitch_bytes * height),
        width_(width),
        height_(height),
        pitch_bytes_(pitch_bytes) {}

  std::uint32_t width() const noexcept { return width_; }
  std::uint32_t height() const noexcept { return height_; }
  std::uint64_t pitch_bytes() const noexcept { return pitch_bytes_; }
  std::uint64_t bytes() const noexcept { return pixels_.bytes(); }
  std::uint64_t offset() const noexcept { return pixels_.offset(); }
  std::uint64_t address() const noexcept { return pixels_.address(); }
  /// Pointer, size and pitch for kernels: valid while the arena (or batch) lives.
  ImageView<T> view() const noexcept {
    return {reinterpret_cast<T*>(pixels_.data()), width_, height_, pitch_bytes_};
  }

  /// Uploads tightly packed rows (width x height values). Cost: one pitched staging copy on the host.
  void upload(gsl::span<const T> packed, Stream stream = nullptr) const {
    pixels_.upload(detail::to_pitched(packed, width_, height_, pitch_bytes_), 0, stream);
  }
  /// Downloads into tightly packed rows.
  void download(gsl::span<T> packed, Stream stream = nullptr) const {
    detail::download_packed(pixels_, packed, width_, height_, pitch_bytes_, stream);
  }
  std::vector<T> to_vector() const {
    std::vector<T> packed(std::size_t{width_} * height_);
    download(packed);
    return packed;
  }

 private:
  ArenaBuffer<std::byte> pixels_;
  std::uint32_t width_ = 0;
  std::uint32_t height_ = 0;
  std::uint64_t pitch_bytes_ = 0;
};

}  // namespace vramkit
