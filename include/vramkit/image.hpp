#pragma once
// Image<T>: a 2-D device buffer of width x height pixels of T with a row pitch (bytes between rows,
// rounded up to `row_alignment`), owned through a handle like DeviceBuffer. ImageView<T> is what a
// kernel (or a host twin) gets from a pin: pointer, size and pitch, usable in device code.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include <gsl/span>

#include <vramkit/detail/bits.hpp>
#include <vramkit/detail/host_device_macros.hpp>
#include <vramkit/detail/pitched_rows.hpp>
#include <vramkit/device_buffer.hpp>

namespace vramkit {

template <class T>
struct ImageView {
  T* data = nullptr;
  std::uint32_t width = 0;
  std::uint32_t height = 0;
  std::uint64_t pitch_bytes = 0;

  VRAMKIT_HOST_DEVICE T* row(std::uint32_t y) const {
    return reinterpret_cast<T*>(reinterpret_cast<unsigned char*>(data) + y * pitch_bytes);
  }
  VRAMKIT_HOST_DEVICE T& at(std::uint32_t x, std::uint32_t y) const { return row(y)[x]; }
};

template <class T>
class Image {
 public:
  Image() = default;
  /// Every row starts at a multiple of `row_alignment`: the pitch is rounded up to it and the pixels'
  /// block is aligned to it (the pool raises it to its granularity). Throws invalid_argument for a zero width or height, a
  /// size that overflows, or a row alignment that is not a power of two or exceeds the pool's
  /// largest block alignment (2 MiB).
  Image(Pool& pool, std::uint32_t width, std::uint32_t height, std::uint64_t row_alignment = 256)
      : width_(width), height_(height) {
    if (width == 0 || height == 0) {
      throw invalid_argument(detail::message("image of ", width, " x ", height, " pixels: both must be > 0"));
    }
    if (!detail::is_power_of_two(row_alignment)) {
      throw invalid_argument(detail::message("row alignment ", row_alignment, " is not a power of two"));
    }
    pitch_bytes_ = detail::align_up(std::uint64_t{width} * sizeof(T), row_alignment);
    if (pitch_bytes_ == 0 || height > std::numeric_limits<std::uint64_t>::max() / pitch_bytes_) {
      throw invalid_argument(detail::message("image of ", width, " x ", height, " pixels with rows of ",
                                             pitch_bytes_, " bytes overflows 64-bit byte counts"));
    }
    pixels_ = DeviceBuffer<std::byte>(pool, pitch_bytes_ * height, row_alignment);
  }

  std::uint32_t width() const noexcept { return width_; }
  std::uint32_t height() const noexcept { return height_; }
  std::uint64_t pitch_bytes() const noexcept { return pitch_bytes_; }
  std::uint64_t bytes() const noexcept { return pixels_.bytes(); }
  Handle handle() const noexcept { return pixels_.handle(); }

  /// Uploads tightly packed rows (width x height values).
  void upload(gsl::span<const T> packed, Stream stream = nullptr) {
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

  /// A pin guard over the pixels and a view of them, valid while the guard lives.
  struct PinnedImage {
    Pinned<std::byte> pin;
    ImageView<T> view;
  };
  PinnedImage pin(Stream release_stream = nullptr) {
    Pinned<std::byte> guard = pixels_.pin(release_stream);
    ImageView<T> view{reinterpret_cast<T*>(guard.data()), width_, height_, pitch_bytes_};
    return {std::move(guard), view};
  }

 private:
  DeviceBuffer<std::byte> pixels_;
  std::uint32_t width_ = 0;
  std::uint32_t height_ = 0;
  std::uint64_t pitch_bytes_ = 0;
};

}  // namespace vramkit
