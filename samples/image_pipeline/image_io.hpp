#pragma once
// Reading and writing image files through stb_image (PNG, JPEG, BMP, PPM/PGM, ...) and
// stb_image_write (PNG). Plain host code; the only file with the stb implementations is image_io.cpp.
#include <cstdint>
#include <filesystem>
#include <vector>

#include "synthetic.hpp"

namespace image_io {

/// Every readable image in `folder` (sorted by name), converted to 8-bit RGB. Files stb cannot read
/// are reported on stderr and skipped.
std::vector<synthetic::NamedPhoto> read_folder(const std::filesystem::path& folder);

/// Writes a width x height 8-bit grayscale PNG; throws std::runtime_error on failure.
void write_gray_png(const std::filesystem::path& path, std::uint32_t width, std::uint32_t height,
                    const std::vector<std::uint8_t>& pixels);

}  // namespace image_io
