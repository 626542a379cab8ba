// The functors behind image_ops.hpp. One functor per operation, each __host__ __device__, each run
// by thrust::for_each_n over pixel indices; the dispatch picks thrust::device or thrust::host.
#include "image_ops.hpp"

#include <cstdint>
#include <stdexcept>
#include <string>

#include <thrust/binary_search.h>
#include <thrust/execution_policy.h>
#include <thrust/for_each.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/sort.h>

namespace image_ops {
namespace {

using vramkit::ImageView;

template <class Functor>
void for_each_index(Executor executor, std::uint64_t count, Functor functor) {
  const thrust::counting_iterator<std::uint64_t> first(0);
  if (executor == Executor::device) {
    thrust::for_each_n(thrust::device, first, count, functor);
  } else {
    thrust::for_each_n(thrust::host, first, count, functor);
  }
}

__host__ __device__ inline std::int32_t clamp_index(std::int64_t value, std::uint32_t size) {
  return static_cast<std::int32_t>(value < 0 ? 0 : (value >= size ? size - 1 : value));
}

struct Grayscale {
  ImageView<Rgb8> rgb;
  ImageView<std::uint8_t> gray;
  __host__ __device__ void operator()(std::uint64_t index) const {
    const auto x = static_cast<std::uint32_t>(index % rgb.width),
               y = static_cast<std::uint32_t>(index / rgb.width);
    const Rgb8 pixel = rgb.at(x, y);
    gray.at(x, y) = static_cast<std::uint8_t>((77u * pixel.r + 150u * pixel.g + 29u * pixel.b + 128u) >> 8);
  }
};

struct Blur5x5 {
  ImageView<std::uint8_t> in, out;
  const std::int32_t* weights;
  __host__ __device__ void operator()(std::uint64_t index) const {
    const auto x = static_cast<std::int64_t>(index % in.width),
               y = static_cast<std::int64_t>(index / in.width);
    std::int32_t sum = 0;
    for (int dy = -2; dy <= 2; ++dy) {
      const std::uint8_t* row = in.row(clamp_index(y + dy, in.height));
      for (int dx = -2; dx <= 2; ++dx)
        sum += weights[(dy + 2) * 5 + dx + 2] * row[clamp_index(x + dx, in.width)];
    }
    out.at(static_cast<std::uint32_t>(x), static_cast<std::uint32_t>(y)) =
        static_cast<std::uint8_t>((sum + 128) >> 8);
  }
};

struct Sobel {
  ImageView<std::uint8_t> in, out;
  __host__ __device__ std::int32_t pixel(std::int64_t x, std::int64_t y) const {
    return in.at(clamp_index(x, in.width), clamp_index(y, in.height));
  }
  __host__ __device__ void operator()(std::uint64_t index) const {
    const auto x = static_cast<std::int64_t>(index % in.width),
               y = static_cast<std::int64_t>(index / in.width);
    const std::int32_t gx = pixel(x + 1, y - 1) + 2 * pixel(x + 1, y) + pixel(x + 1, y + 1) -
                            pixel(x - 1, y - 1) - 2 * pixel(x - 1, y) - pixel(x - 1, y + 1);
    const std::int32_t gy = pixel(x - 1, y + 1) + 2 * pixel(x, y + 1) + pixel(x + 1, y + 1) -
                            pixel(x - 1, y - 1) - 2 * pixel(x, y - 1) - pixel(x + 1, y - 1);
    const std::int32_t magnitude = ((gx < 0 ? -gx : gx) + (gy < 0 ? -gy : gy)) / 2;
    out.at(static_cast<std::uint32_t>(x), static_cast<std::uint32_t>(y)) =
        static_cast<std::uint8_t>(magnitude > 255 ? 255 : magnitude);
  }
};

struct PackRows {
  ImageView<std::uint8_t> in;
  std::uint8_t* packed;
  __host__ __device__ void operator()(std::uint64_t index) const {
    packed[index] =
        in.at(static_cast<std::uint32_t>(index % in.width), static_cast<std::uint32_t>(index / in.width));
  }
};

struct EqualizationTable {
  const std::uint8_t* sorted;  // sorted[0] is the darkest pixel
  const std::uint32_t* cdf;
  std::uint8_t* lut;
  std::uint64_t pixels;
  __host__ __device__ void operator()(std::uint64_t value) const {
    const std::uint64_t cdf_min = cdf[sorted[0]];
    if (pixels == cdf_min) {
      lut[value] = static_cast<std::uint8_t>(value);
      return;
    }
    const std::uint64_t range = pixels - cdf_min;
    const std::uint64_t below = cdf[value] < cdf_min ? 0 : cdf[value] - cdf_min;
    lut[value] = static_cast<std::uint8_t>((below * 255 + range / 2) / range);
  }
};

struct ApplyTable {
  ImageView<std::uint8_t> in, out;
  const std::uint8_t* lut;
  __host__ __device__ void operator()(std::uint64_t index) const {
    const auto x = static_cast<std::uint32_t>(index % in.width),
               y = static_cast<std::uint32_t>(index / in.width);
    out.at(x, y) = lut[in.at(x, y)];
  }
};

struct Bilinear {
  ImageView<std::uint8_t> in, out;
  __host__ __device__ void operator()(std::uint64_t index) const {
    const auto x = static_cast<std::uint32_t>(index % out.width),
               y = static_cast<std::uint32_t>(index / out.width);
    float source_x = (static_cast<float>(x) + 0.5f) * in.width / out.width - 0.5f;
    float source_y = (static_cast<float>(y) + 0.5f) * in.height / out.height - 0.5f;
    source_x = source_x < 0 ? 0 : (source_x > in.width - 1 ? in.width - 1 : source_x);
    source_y = source_y < 0 ? 0 : (source_y > in.height - 1 ? in.height - 1 : source_y);
    const auto x0 = static_cast<std::uint32_t>(source_x), y0 = static_cast<std::uint32_t>(source_y);
    const std::uint32_t x1 = x0 + 1 < in.width ? x0 + 1 : x0, y1 = y0 + 1 < in.height ? y0 + 1 : y0;
    const float fx = source_x - x0, fy = source_y - y0;
    const float top = in.at(x0, y0) * (1 - fx) + in.at(x1, y0) * fx;
    const float bottom = in.at(x0, y1) * (1 - fx) + in.at(x1, y1) * fx;
    const float value = top * (1 - fy) + bottom * fy;
    out.at(x, y) = static_cast<std::uint8_t>(value + 0.5f);
  }
};

std::uint64_t pixels(const ImageView<std::uint8_t>& view) {
  return std::uint64_t{view.width} * view.height;
}

void check_same_size(const char* operation, std::uint32_t w1, std::uint32_t h1, std::uint32_t w2,
                     std::uint32_t h2) {
  if (w1 != w2 || h1 != h2)
    throw std::invalid_argument(std::string(operation) + ": input and output sizes differ");
}

}  // namespace

Executor executor_for(const vramkit::Device& device) {
  switch (device.kind()) {
    case vramkit::DeviceKind::cuda:
      return Executor::device;
    case vramkit::DeviceKind::host:
      return Executor::host;
    default:
      throw std::invalid_argument("image operations need a CUDA or host device, not a virtual one");
  }
}

const char* to_string(Executor executor) {
  return executor == Executor::device ? "thrust::device" : "thrust::host";
}

void to_grayscale(Executor executor, ImageView<Rgb8> rgb, ImageView<std::uint8_t> gray) {
  check_same_size("to_grayscale", rgb.width, rgb.height, gray.width, gray.height);
  for_each_index(executor, std::uint64_t{rgb.width} * rgb.height, Grayscale{rgb, gray});
}

std::array<std::int32_t, 25> gaussian_5x5_weights() {
  constexpr std::int32_t binomial[5] = {1, 4, 6, 4, 1};
  std::array<std::int32_t, 25> weights{};
  for (int y = 0; y < 5; ++y)
    for (int x = 0; x < 5; ++x) weights[y * 5 + x] = binomial[y] * binomial[x];
  return weights;
}

void gaussian_blur_5x5(Executor executor, ImageView<std::uint8_t> in, ImageView<std::uint8_t> out,
                       const std::int32_t* weights) {
  check_same_size("gaussian_blur_5x5", in.width, in.height, out.width, out.height);
  for_each_index(executor, pixels(in), Blur5x5{in, out, weights});
}

void sobel_magnitude(Executor executor, ImageView<std::uint8_t> in, ImageView<std::uint8_t> out) {
  check_same_size("sobel_magnitude", in.width, in.height, out.width, out.height);
  for_each_index(executor, pixels(in), Sobel{in, out});
}

void equalize_histogram(Executor executor, ImageView<std::uint8_t> in, ImageView<std::uint8_t> out,
                        std::uint8_t* sorted, std::uint32_t* cdf, std::uint8_t* lut) {
  check_same_size("equalize_histogram", in.width, in.height, out.width, out.height);
  const std::uint64_t count = pixels(in);
  for_each_index(executor, count, PackRows{in, sorted});
  const thrust::counting_iterator<std::uint32_t> values(0);
  if (executor == Executor::device) {
    thrust::sort(thrust::device, sorted, sorted + count);
    thrust::upper_bound(thrust::device, sorted, sorted + count, values, values + 256, cdf);
  } else {
    thrust::sort(thrust::host, sorted, sorted + count);
    thrust::upper_bound(thrust::host, sorted, sorted + count, values, values + 256, cdf);
  }
  for_each_index(executor, 256, EqualizationTable{sorted, cdf, lut, count});
  for_each_index(executor, count, ApplyTable{in, out, lut});
}

void resize_bilinear(Executor executor, ImageView<std::uint8_t> in, ImageView<std::uint8_t> out) {
  for_each_index(executor, pixels(out), Bilinear{in, out});
}

}  // namespace image_ops
