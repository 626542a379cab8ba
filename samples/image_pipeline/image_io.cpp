#include "image_io.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#define STB_IMAGE_IMPLEMENTATION
#include <stb/stb_image.h>
#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb/stb_image_write.h>

namespace image_io {

std::vector<synthetic::NamedPhoto> read_folder(const std::filesystem::path& folder) {
  std::vector<std::filesystem::path> paths;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) {
    if (entry.is_regular_file()) paths.push_back(entry.path());
  }
  std::sort(paths.begin(), paths.end());
  std::vector<synthetic::NamedPhoto> photos;
  for (const auto& path : paths) {
    int width = 0, height = 0, channels = 0;
    stbi_uc* data = stbi_load(path.c_str(), &width, &height, &channels, 3);
    if (data == nullptr) {
      std::fprintf(stderr, "skipping %s: %s\n", path.c_str(), stbi_failure_reason());
      continue;
    }
    synthetic::NamedPhoto photo{path.stem().string(), std::uint32_t(width), std::uint32_t(height), {}};
    photo.pixels.resize(std::size_t(width) * height);
    std::memcpy(photo.pixels.data(), data, photo.pixels.size() * 3);
    stbi_image_free(data);
    photos.push_back(std::move(photo));
  }
  return photos;
}

void write_gray_png(const std::filesystem::path& path, std::uint32_t width, std::uint32_t height,
                    const std::vector<std::uint8_t>& pixels) {
  if (stbi_write_png(path.c_str(), int(width), int(height), 1, pixels.data(), int(width)) == 0) {
    throw std::runtime_error("cannot write " + path.string());
  }
}

}  // namespace image_io
