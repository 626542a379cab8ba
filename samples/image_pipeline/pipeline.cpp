#include "pipeline.hpp"

// Pins are released without a stream: thrust::device (unlike thrust::cuda::par_nosync) waits for its
// kernels before returning, so when a pin's scope ends the work that used its pointer has finished.

namespace pipeline {

using namespace vramkit;

LongLivedBuffers::LongLivedBuffers(Pool& pool) : cdf(pool, 256), lut(pool, 256) {
  const auto weights = image_ops::gaussian_5x5_weights();
  blur_weights =
      DeviceBuffer<std::int32_t>(pool, gsl::span<const std::int32_t>(weights.data(), weights.size()));
}

MemoryPlan make_image_plan(std::uint32_t width, std::uint32_t height) {
  MemoryPlan plan({"decode", "gray", "blur", "edges", "equalize", "resize"});
  plan.add_image<std::uint8_t>("rgb", width, height, 3, "decode", "gray");
  plan.add_image<std::uint8_t>("gray", width, height, 1, "gray", "blur");
  plan.add_image<std::uint8_t>("blurred", width, height, 1, "blur", "edges");
  plan.add_image<std::uint8_t>("edges", width, height, 1, "edges", "equalize");
  plan.add_array<std::uint8_t>("sort scratch", std::uint64_t{width} * height, "equalize", "equalize");
  plan.add_image<std::uint8_t>("equalized", width, height, 1, "equalize", "resize");
  plan.add_image<std::uint8_t>("result 512x512", output_width, output_height, 1, "resize", "resize");
  return plan;
}

Image<std::uint8_t> process(Pool& pool, image_ops::Executor executor, LongLivedBuffers& buffers,
                            const synthetic::NamedPhoto& photo) {
  const std::uint32_t width = photo.width, height = photo.height;
  // decode: the photo arrives decoded on the host; upload it.
  Image<image_ops::Rgb8> rgb(pool, width, height);
  rgb.upload(photo.pixels);
  // gray
  Image<std::uint8_t> gray(pool, width, height);
  {
    auto in = rgb.pin();
    auto out = gray.pin();
    image_ops::to_grayscale(executor, in.view, out.view);
  }
  rgb = {};
  // blur
  Image<std::uint8_t> blurred(pool, width, height);
  {
    auto in = gray.pin();
    auto out = blurred.pin();
    auto weights = buffers.blur_weights.pin();
    image_ops::gaussian_blur_5x5(executor, in.view, out.view, weights.data());
  }
  gray = {};
  // edges
  Image<std::uint8_t> edges(pool, width, height);
  {
    auto in = blurred.pin();
    auto out = edges.pin();
    image_ops::sobel_magnitude(executor, in.view, out.view);
  }
  blurred = {};
  // equalize (the edge image: faint edges become visible)
  Image<std::uint8_t> equalized(pool, width, height);
  {
    DeviceBuffer<std::uint8_t> scratch(pool, std::size_t{width} * height);
    auto in = edges.pin();
    auto out = equalized.pin();
    auto sorted = scratch.pin();
    auto cdf = buffers.cdf.pin();
    auto lut = buffers.lut.pin();
    image_ops::equalize_histogram(executor, in.view, out.view, sorted.data(), cdf.data(), lut.data());
  }
  edges = {};
  // resize
  Image<std::uint8_t> result(pool, output_width, output_height);
  {
    auto in = equalized.pin();
    auto out = result.pin();
    image_ops::resize_bilinear(executor, in.view, out.view);
  }
  return result;
}

}  // namespace pipeline
