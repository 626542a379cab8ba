#pragma once
// Pitched rows on the host: packing tightly packed pixels into rows `pitch_bytes` apart and back.
// Shared by Image<T> (pool-owned) and ArenaImage<T> (arena views) for their upload and download.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include <gsl/span>

#include <vramkit/detail/message.hpp>
#include <vramkit/errors.hpp>

namespace vramkit::detail {

/// Throws invalid_argument unless `count` is width x height.
inline void check_packed_pixels(std::uint32_t width, std::uint32_t height, std::size_t count) {
  if (count != std::size_t{width} * height) {
    throw invalid_argument(detail::message("image of ", width, " x ", height, " needs ",
                                           std::size_t{width} * height, " packed pixels; got ", count));
  }
}

/// Packed rows to a pitched staging copy.
template <class T>
std::vector<std::byte> to_pitched(gsl::span<const T> packed, std::uint32_t width, std::uint32_t height,
                                  std::uint64_t pitch_bytes) {
  check_packed_pixels(width, height, packed.size());
  std::vector<std::byte> pitched(pitch_bytes * height);
  for (std::uint32_t y = 0; y < height; ++y) {
    std::memcpy(pitched.data() + y * pitch_bytes, packed.data() + std::size_t{y} * width, width * sizeof(T));
  }
  return pitched;
}

/// A pitched staging copy back to packed rows.
template <class T>
void from_pitched(gsl::span<const std::byte> pitched, gsl::span<T> packed, std::uint32_t width,
                  std::uint32_t height, std::uint64_t pitch_bytes) {
  for (std::uint32_t y = 0; y < height; ++y) {
    std::memcpy(packed.data() + std::size_t{y} * width, pitched.data() + y * pitch_bytes, width * sizeof(T));
  }
}

/// Downloads a pitched image held in `pixels` (a byte buffer with download(span, offset, stream):
/// a DeviceBuffer or an ArenaBuffer) into tightly packed rows.
template <class T, class Pixels, class Stream>
void download_packed(const Pixels& pixels, gsl::span<T> packed, std::uint32_t width, std::uint32_t height,
                     std::uint64_t pitch_bytes, Stream stream) {
  check_packed_pixels(width, height, packed.size());
  std::vector<std::byte> pitched(pitch_bytes * height);
  pixels.download(pitched, 0, stream);
  from_pitched<T>(pitched, packed, width, height, pitch_bytes);
}

}  // namespace vramkit::detail
