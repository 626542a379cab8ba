#pragma once
// Kernels the GPU test program launches, behind plain functions so the tests stay host C++.
#include <cstdint>

#include <vramkit/device.hpp>

namespace vramkit_gpu_test {

/// values[i] = key * 2654435761 + i, on `stream`.
void launch_fill_index(std::uint32_t* values, std::uint64_t count, std::uint32_t key, vramkit::Stream stream);
/// Like launch_fill_index, but first spins for about `milliseconds` so the write lands late.
void launch_slow_fill_index(std::uint32_t* values, std::uint64_t count, std::uint32_t key, double milliseconds,
                            vramkit::Stream stream);
vramkit::Stream create_stream();
void destroy_stream(vramkit::Stream stream);
void synchronize_device();
/// Throws if a CUDA error is pending.
void check_last_error();

}  // namespace vramkit_gpu_test
