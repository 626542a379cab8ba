#include "synthetic.hpp"

#include <algorithm>
#include <array>
#include <cmath>

namespace synthetic {
namespace {

// splitmix64: a tiny, well-mixed generator; the same seed gives the same photo everywhere.
std::uint64_t next(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

std::uint8_t to_byte(double value) {
  return static_cast<std::uint8_t>(std::clamp(value, 0.0, 255.0));
}

}  // namespace

std::vector<image_ops::Rgb8> photo(std::uint32_t width, std::uint32_t height, std::uint64_t seed) {
  std::uint64_t state = seed;
  struct Disc {
    double x, y, radius;
    image_ops::Rgb8 colour;
  };
  std::vector<Disc> discs(3 + next(state) % 6);
  for (Disc& disc : discs) {
    disc.x = double(next(state) % 1000) / 1000 * width;
    disc.y = double(next(state) % 1000) / 1000 * height;
    disc.radius = (0.03 + double(next(state) % 1000) / 1000 * 0.2) * std::min(width, height);
    disc.colour = {std::uint8_t(next(state)), std::uint8_t(next(state)), std::uint8_t(next(state))};
  }
  const double horizon = (0.4 + double(next(state) % 300) / 1000) * height;
  const double stripe_period = 8 + double(next(state) % 40);
  std::vector<image_ops::Rgb8> pixels(std::size_t{width} * height);
  for (std::uint32_t y = 0; y < height; ++y) {
    for (std::uint32_t x = 0; x < width; ++x) {
      const double noise = double(next(state) % 7) - 3;
      image_ops::Rgb8 pixel;
      if (y < horizon) {  // sky: blue gradient
        const double t = y / horizon;
        pixel = {to_byte(90 + 80 * t + noise), to_byte(140 + 60 * t + noise), to_byte(230 - 20 * t + noise)};
      } else {  // ground: green-brown with stripes (fields)
        const double stripe = std::sin((x + 2.0 * y) / stripe_period) * 25;
        pixel = {to_byte(95 + stripe + noise), to_byte(120 + stripe / 2 + noise), to_byte(60 + noise)};
      }
      for (const Disc& disc : discs) {
        const double dx = x - disc.x, dy = y - disc.y;
        if (dx * dx + dy * dy < disc.radius * disc.radius) {
          const double shade = 0.75 + 0.25 * (dy / disc.radius);
          pixel = {to_byte(disc.colour.r * shade + noise), to_byte(disc.colour.g * shade + noise),
                   to_byte(disc.colour.b * shade + noise)};
        }
      }
      pixels[std::size_t{y} * width + x] = pixel;
    }
  }
  return pixels;
}

std::vector<NamedPhoto> default_set(std::size_t count) {
  constexpr std::array<std::array<std::uint32_t, 2>, 8> sizes = {{{640, 480},
                                                                  {3000, 2000},
                                                                  {1024, 768},
                                                                  {1920, 1080},
                                                                  {800, 600},
                                                                  {2592, 1944},
                                                                  {1280, 720},
                                                                  {1600, 1200}}};
  std::vector<NamedPhoto> set;
  for (std::size_t i = 0; i < count; ++i) {
    const auto [width, height] = sizes[(i * 5 + i / sizes.size()) % sizes.size()];
    set.push_back(
        {"synthetic_" + std::to_string(i) + "_" + std::to_string(width) + "x" + std::to_string(height), width,
         height, photo(width, height, 1000 + i)});
  }
  return set;
}

}  // namespace synthetic
