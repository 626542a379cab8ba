#pragma once
// The image pipeline's operations: grayscale, 5x5 Gaussian blur, Sobel magnitude, histogram
// equalization and bilinear resize. Each is a Thrust algorithm over a __host__ __device__ functor,
// run with thrust::device on the CUDA device and thrust::host on the host device, over the raw
// pointers of pinned buffers (ImageView). This header is plain C++ so host code and tests can call
// the operations; image_ops.cu holds the functors.
//
// Every operation is defined by integer arithmetic except resize (float, rounded), so a CPU
// reference matches exactly (resize: within 1 LSB). Borders clamp to the nearest edge pixel.
#include <array>
#include <cstdint>

#include <vramkit/device.hpp>
#include <vramkit/image.hpp>

namespace image_ops {

struct Rgb8 {
  std::uint8_t r, g, b;
};
static_assert(sizeof(Rgb8) == 3);

/// Where an operation runs: on the GPU (thrust::device) or on the host (thrust::host). The pointers
/// it receives must be of that kind: device pointers from a CUDA pool, host pointers from a host pool.
enum class Executor { device, host };
/// thrust::device for a CUDA device, thrust::host for the host device. Throws for a virtual device
/// (it has no bytes to compute on).
Executor executor_for(const vramkit::Device& device);
const char* to_string(Executor executor);

/// gray = (77 r + 150 g + 29 b + 128) >> 8 (BT.601 weights in 8-bit fixed point).
void to_grayscale(Executor executor, vramkit::ImageView<Rgb8> rgb, vramkit::ImageView<std::uint8_t> gray);

/// The 5x5 binomial kernel [1 4 6 4 1]^T [1 4 6 4 1]; its weights sum to 256.
std::array<std::int32_t, 25> gaussian_5x5_weights();
/// out = (sum of weights x in + 128) >> 8 over the 5x5 neighbourhood; `weights` points to 25 int32
/// (row-major, summing to 256) in memory of the executor's kind.
void gaussian_blur_5x5(Executor executor, vramkit::ImageView<std::uint8_t> in,
                       vramkit::ImageView<std::uint8_t> out, const std::int32_t* weights);

/// out = min(255, (|gx| + |gy|) / 2) with the 3x3 Sobel kernels (L1 gradient magnitude).
void sobel_magnitude(Executor executor, vramkit::ImageView<std::uint8_t> in,
                     vramkit::ImageView<std::uint8_t> out);

/// Classic histogram equalization: cdf[v] = pixels <= v, cdf_min = cdf of the darkest pixel, N = pixels,
/// lut[v] = ((cdf[v] - cdf_min) x 255 + (N - cdf_min) / 2) / (N - cdf_min) (lut[v] = v when N == cdf_min),
/// out = lut[in]. Scratch: `sorted` holds width x height bytes, `cdf` 256 uint32, `lut` 256 bytes, all in
/// memory of the executor's kind. The histogram is a sort plus a vectorised upper_bound (Thrust's
/// histogram idiom). thrust::sort on the device takes its temporary storage from cudaMalloc, not the pool
/// (vramkit::thrust_allocator could route it there; see docs/ecosystem.md).
void equalize_histogram(Executor executor, vramkit::ImageView<std::uint8_t> in,
                        vramkit::ImageView<std::uint8_t> out, std::uint8_t* sorted, std::uint32_t* cdf,
                        std::uint8_t* lut);

/// Bilinear resize with pixel centres aligned (source x = (x + 0.5) x in.width / out.width - 0.5,
/// clamped), rounded to nearest.
void resize_bilinear(Executor executor, vramkit::ImageView<std::uint8_t> in,
                     vramkit::ImageView<std::uint8_t> out);

}  // namespace image_ops
