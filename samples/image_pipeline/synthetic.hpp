#pragma once
// Deterministic synthetic "photos": a sky gradient, a horizon, discs and stripes, and noise, all from
// a seed, so the sample runs with no input files and the test has realistic inputs of any size.
#include <cstdint>
#include <string>
#include <vector>

#include "image_ops.hpp"

namespace synthetic {

std::vector<image_ops::Rgb8> photo(std::uint32_t width, std::uint32_t height, std::uint64_t seed);

/// A named photo of the default set.
struct NamedPhoto {
  std::string name;
  std::uint32_t width = 0;
  std::uint32_t height = 0;
  std::vector<image_ops::Rgb8> pixels;
};
/// `count` photos cycling through sizes from 640x480 to 3000x2000.
std::vector<NamedPhoto> default_set(std::size_t count);

}  // namespace synthetic
