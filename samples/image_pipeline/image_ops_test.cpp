// Each image operation on the host device against a plain CPU reference written out here: exact for
// the integer operations, within 1 LSB for resize. Inputs are synthetic photos of awkward sizes
// (odd widths, pitches wider than rows) plus a constant image for equalization's special case.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <vramkit/vramkit.hpp>

#include "image_ops.hpp"
#include "synthetic.hpp"

using namespace vramkit;
using image_ops::Executor;
using image_ops::Rgb8;

namespace {

int failures = 0;

using Gray = std::vector<std::uint8_t>;

int clamp(int value, int size) {
  return value < 0 ? 0 : (value >= size ? size - 1 : value);
}

Gray reference_gray(const std::vector<Rgb8>& rgb) {
  Gray gray(rgb.size());
  for (std::size_t i = 0; i < rgb.size(); ++i)
    gray[i] = (77 * rgb[i].r + 150 * rgb[i].g + 29 * rgb[i].b + 128) >> 8;
  return gray;
}

Gray reference_blur(const Gray& in, int width, int height) {
  const int binomial[5] = {1, 4, 6, 4, 1};
  Gray out(in.size());
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x) {
      int sum = 0;
      for (int dy = -2; dy <= 2; ++dy)
        for (int dx = -2; dx <= 2; ++dx)
          sum +=
              binomial[dy + 2] * binomial[dx + 2] * in[clamp(y + dy, height) * width + clamp(x + dx, width)];
      out[y * width + x] = (sum + 128) >> 8;
    }
  return out;
}

Gray reference_sobel(const Gray& in, int width, int height) {
  Gray out(in.size());
  auto p = [&](int x, int y) { return int{in[clamp(y, height) * width + clamp(x, width)]}; };
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x) {
      const int gx = p(x + 1, y - 1) + 2 * p(x + 1, y) + p(x + 1, y + 1) - p(x - 1, y - 1) - 2 * p(x - 1, y) -
                     p(x - 1, y + 1);
      const int gy = p(x - 1, y + 1) + 2 * p(x, y + 1) + p(x + 1, y + 1) - p(x - 1, y - 1) - 2 * p(x, y - 1) -
                     p(x + 1, y - 1);
      out[y * width + x] = std::min(255, (std::abs(gx) + std::abs(gy)) / 2);
    }
  return out;
}

Gray reference_equalize(const Gray& in) {
  std::uint64_t histogram[256] = {};
  for (std::uint8_t value : in) ++histogram[value];
  std::uint64_t cdf[256];
  std::uint64_t running = 0, cdf_min = 0;
  for (int v = 0; v < 256; ++v) {
    running += histogram[v];
    cdf[v] = running;
    if (cdf_min == 0 && histogram[v] != 0) cdf_min = running;
  }
  const std::uint64_t n = in.size();
  Gray out(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    const std::uint64_t c = cdf[in[i]];
    out[i] = n == cdf_min
                 ? in[i]
                 : static_cast<std::uint8_t>(((c - cdf_min) * 255 + (n - cdf_min) / 2) / (n - cdf_min));
  }
  return out;
}

Gray reference_resize(const Gray& in, int width, int height, int out_width, int out_height) {
  Gray out(std::size_t(out_width) * out_height);
  for (int y = 0; y < out_height; ++y)
    for (int x = 0; x < out_width; ++x) {
      const double sx = std::clamp((x + 0.5) * width / out_width - 0.5, 0.0, width - 1.0);
      const double sy = std::clamp((y + 0.5) * height / out_height - 0.5, 0.0, height - 1.0);
      const int x0 = int(sx), y0 = int(sy), x1 = std::min(x0 + 1, width - 1),
                y1 = std::min(y0 + 1, height - 1);
      const double fx = sx - x0, fy = sy - y0;
      const double value = (in[y0 * width + x0] * (1 - fx) + in[y0 * width + x1] * fx) * (1 - fy) +
                           (in[y1 * width + x0] * (1 - fx) + in[y1 * width + x1] * fx) * fy;
      out[y * out_width + x] = static_cast<std::uint8_t>(std::lround(value));
    }
  return out;
}

void compare(const std::string& what, const Gray& actual, const Gray& expected, int tolerance) {
  int worst = 0;
  std::size_t at = 0;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const int difference = std::abs(int{actual[i]} - int{expected[i]});
    if (difference > worst) worst = difference, at = i;
  }
  const bool ok = actual.size() == expected.size() && worst <= tolerance;
  std::printf("%-4s %-40s largest difference %d (allowed %d)\n", ok ? "ok" : "FAIL", what.c_str(), worst,
              tolerance);
  if (!ok) {
    ++failures;
    std::printf("     at pixel %zu: got %d, expected %d\n", at, actual[at], expected[at]);
  }
}

void check_image(Pool& pool, const std::vector<Rgb8>& rgb_pixels, std::uint32_t width, std::uint32_t height,
                 std::uint32_t out_width, std::uint32_t out_height) {
  const Executor executor = image_ops::executor_for(pool.device());
  const std::string size = std::to_string(width) + "x" + std::to_string(height);
  const auto weights_host = image_ops::gaussian_5x5_weights();
  DeviceBuffer<std::int32_t> weights(pool,
                                     gsl::span<const std::int32_t>(weights_host.data(), weights_host.size()));
  DeviceBuffer<std::uint8_t> sorted(pool, std::size_t{width} * height);
  DeviceBuffer<std::uint32_t> cdf(pool, 256);
  DeviceBuffer<std::uint8_t> lut(pool, 256);
  Image<Rgb8> rgb(pool, width, height);
  Image<std::uint8_t> gray(pool, width, height), blurred(pool, width, height), edges(pool, width, height),
      equalized(pool, width, height), resized(pool, out_width, out_height);
  rgb.upload(rgb_pixels);
  {
    auto rgb_pin = rgb.pin();
    auto gray_pin = gray.pin(), blurred_pin = blurred.pin(), edges_pin = edges.pin();
    auto equalized_pin = equalized.pin(), resized_pin = resized.pin();
    auto weights_pin = weights.pin();
    auto sorted_pin = sorted.pin();
    auto cdf_pin = cdf.pin();
    auto lut_pin = lut.pin();
    image_ops::to_grayscale(executor, rgb_pin.view, gray_pin.view);
    image_ops::gaussian_blur_5x5(executor, gray_pin.view, blurred_pin.view, weights_pin.data());
    image_ops::sobel_magnitude(executor, blurred_pin.view, edges_pin.view);
    image_ops::equalize_histogram(executor, blurred_pin.view, equalized_pin.view, sorted_pin.data(),
                                  cdf_pin.data(), lut_pin.data());
    image_ops::resize_bilinear(executor, equalized_pin.view, resized_pin.view);
  }
  // Each stage is checked against the reference applied to the operation's own (already checked) input.
  const Gray gray_out = gray.to_vector(), blurred_out = blurred.to_vector(),
             equalized_out = equalized.to_vector();
  compare("grayscale " + size, gray_out, reference_gray(rgb_pixels), 0);
  compare("gaussian_blur_5x5 " + size, blurred_out, reference_blur(gray_out, width, height), 0);
  compare("sobel_magnitude " + size, edges.to_vector(), reference_sobel(blurred_out, width, height), 0);
  compare("equalize_histogram " + size, equalized_out, reference_equalize(blurred_out), 0);
  compare("resize_bilinear " + size + " -> " + std::to_string(out_width) + "x" + std::to_string(out_height),
          resized.to_vector(), reference_resize(equalized_out, width, height, out_width, out_height), 1);
}

void check_all(Pool& pool) {
  std::printf("device: %s (%s)\n", pool.device().name().c_str(),
              image_ops::to_string(image_ops::executor_for(pool.device())));
  for (const auto& [width, height, out_width, out_height] : std::vector<std::array<std::uint32_t, 4>>{
           {640, 480, 512, 512}, {333, 517, 512, 512}, {1001, 77, 64, 300}}) {
    check_image(pool, synthetic::photo(width, height, width * 31 + height), width, height, out_width,
                out_height);
  }
  // A constant image: equalization leaves it as it is; blur and edges are exact on it too.
  check_image(pool, std::vector<Rgb8>(97 * 13, Rgb8{90, 90, 90}), 97, 13, 40, 40);
  // One-pixel-wide and one-pixel-high images exercise clamping at every border.
  check_image(pool, synthetic::photo(1, 50, 7), 1, 50, 3, 3);
  check_image(pool, synthetic::photo(50, 1, 8), 50, 1, 3, 3);
  pool.check_invariants();
}

}  // namespace

// Always on the host device; also on the CUDA device (thrust::device) when a GPU is present.
int main() {
  {
    Pool pool({.capacity_bytes = 64_MiB}, make_device(DeviceChoice::host));
    check_all(pool);
  }
  if (cuda_available()) {
    Pool pool({.capacity_bytes = 64_MiB}, make_device(DeviceChoice::cuda));
    check_all(pool);
  } else {
    std::printf("no GPU: the thrust::device path was not checked\n");
  }
  std::printf("%s\n", failures == 0 ? "all image operations match the CPU reference" : "MISMATCHES");
  return failures == 0 ? 0 : 1;
}
