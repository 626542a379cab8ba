// Lab (not built by CMake): the GPU side of a full compaction on layouts (a) and (b) of the
// compaction benchmark, timed with events: the move kernel alone (in place), the whole queue of
// one part (upload, flag reset, chunk derivation, move), the same in 4 parts, and the copy ceiling
// measured two ways.
// Build (from the repository root, with .deps gathered): nvcc -O3 -std=c++20 -arch=sm_90 -I lib -I include
//   -I .deps/usr/include bench/lab/pipeline.cu lib/device/cuda/move_kernel.cu lib/compactor/slide_chunks.cpp
#include <cuda_runtime.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>
#include "compactor/chunk_plan_paths.hpp"
#include "device/cuda/move_kernel.hpp"

using namespace vramkit;
using compactor::detail::SlideMove;
using cuda_detail::DeviceChunk;
#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { std::printf("%s: %s\n", #x, cudaGetErrorString(e)); std::exit(1); } } while (0)

double median(std::vector<float> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; }
template <class Body> double time_ms(cudaStream_t s, Body&& body, int reps = 7) {
  cudaEvent_t a, b; CHECK(cudaEventCreate(&a)); CHECK(cudaEventCreate(&b));
  std::vector<float> v;
  for (int r = 0; r < reps + 1; ++r) {
    CHECK(cudaStreamSynchronize(s)); CHECK(cudaEventRecord(a, s)); body(); CHECK(cudaEventRecord(b, s)); CHECK(cudaEventSynchronize(b));
    float t; CHECK(cudaEventElapsedTime(&t, a, b)); if (r) v.push_back(t);
  }
  return median(v);
}
__global__ void fill(std::uint64_t* w, std::size_t n) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n; i += std::size_t{gridDim.x} * blockDim.x) w[i] = i * 0x9E3779B97F4A7C15ull;
}

void run(const char* name, std::size_t count, double low, double high, unsigned seed, cudaStream_t s, cudaStream_t prep) {
  std::mt19937 random(seed);
  std::uniform_real_distribution<double> exponent(std::log(low), std::log(high));
  std::vector<compactor::Move> moves;
  std::uint64_t at = 0, packed = 0;
  for (std::size_t i = 0; i < count; ++i) {
    at += (static_cast<std::uint64_t>(std::exp(exponent(random))) + 255) / 256 * 256;
    const std::uint64_t keep = (static_cast<std::uint64_t>(std::exp(exponent(random))) + 255) / 256 * 256;
    moves.push_back({static_cast<std::uint32_t>(i), 0, at, 0, packed, keep});
    at += keep; packed += keep;
  }
  char* region; CHECK(cudaMalloc(&region, at));
  fill<<<1024, 256, 0, s>>>(reinterpret_cast<std::uint64_t*>(region), at / 8);
  const std::uint64_t bases[1] = {reinterpret_cast<std::uint64_t>(region)};
  const int kernel_count = 2;
  int per_sm = 0, sms = 0; CHECK(cuda_detail::move_blocks_per_multiprocessor(cuda_detail::MoveKernel::block, &per_sm));
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const unsigned grid = per_sm * sms;
  SlideMove* staged; CHECK(cudaMallocHost(&staged, moves.size() * sizeof(SlideMove) * 2));
  SlideMove* dmoves; DeviceChunk* dchunks; unsigned* flags;
  CHECK(cudaMalloc(&dmoves, moves.size() * sizeof(SlideMove) * 2)); CHECK(cudaMalloc(&dchunks, 64u << 20)); CHECK(cudaMalloc(&flags, 16u << 20));
  const std::uint32_t limit = cuda_detail::max_chunk_bytes;
  // parts: block boundaries
  auto queue_part = [&](std::size_t first, std::size_t last, std::size_t slot, cudaStream_t q, bool two_streams) {
    std::size_t n = 0; std::uint64_t total = 0, bytes = 0;
    SlideMove* out = staged + first;  // each part its own staging bytes
    if (!compactor::detail::make_slide_moves(gsl::span<const compactor::Move>(moves).subspan(first, last - first), bases, limit, out, n, total, bytes)) { std::printf("not a slide\n"); std::exit(1); }
    (void)slot;
    DeviceChunk* chunks = dchunks + first * 16;  // a block makes at most 16 chunks: parts stay apart
    unsigned* f = flags + first * 16;
    CHECK(cudaMemcpyAsync(dmoves + first, out, n * sizeof(SlideMove), cudaMemcpyHostToDevice, q));
    CHECK(cuda_detail::launch_derive_slide_chunks(dmoves + first, n, 0, total, limit, chunks, f, q));
    if (two_streams) { cudaEvent_t ev; CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming)); CHECK(cudaEventRecord(ev, q)); CHECK(cudaStreamWaitEvent(s, ev, 0)); }
    CHECK(cuda_detail::launch_move_chunks(cuda_detail::MoveKernel::block, chunks, 0, total, f + total, f, grid, s));
    return total;
  };
  std::uint64_t moved = packed;
  // kernel alone: derive once, then time the move kernel
  std::size_t n = 0; std::uint64_t total = 0, bytes = 0;
  compactor::detail::make_slide_moves(moves, bases, limit, staged, n, total, bytes);
  CHECK(cudaMemcpy(dmoves, staged, n * sizeof(SlideMove), cudaMemcpyHostToDevice));
  CHECK(cuda_detail::launch_derive_slide_chunks(dmoves, n, 0, total, limit, dchunks, flags, s));
  const double kernel_ms = time_ms(s, [&] { CHECK(cudaMemsetAsync(flags, 0, (total + 1) * 4, s)); CHECK(cuda_detail::launch_move_chunks(cuda_detail::MoveKernel::block, dchunks, 0, total, flags + total, flags, grid, s)); });
  const double one_ms = time_ms(s, [&] { queue_part(0, moves.size(), 0, s, false); });
  const std::size_t b1 = moves.size() / 27, b2 = 3 * b1, b3 = 9 * b1;
  const double four_ms = time_ms(s, [&] { queue_part(0, b1, 0, s, false); queue_part(b1, b2, 1, s, false); queue_part(b2, b3, 2, s, false); queue_part(b3, moves.size(), 3, s, false); });
  const double four2_ms = time_ms(s, [&] { queue_part(0, b1, 0, prep, true); queue_part(b1, b2, 1, prep, true); queue_part(b2, b3, 2, prep, true); queue_part(b3, moves.size(), 3, prep, true); });
  // ceilings
  char *src, *dst; CHECK(cudaMalloc(&src, moved)); CHECK(cudaMalloc(&dst, moved));
  CHECK(cudaMemset(src, 1, moved));
  CHECK(cudaMemcpyAsync(dst, src, moved, cudaMemcpyDeviceToDevice, s));
  const double bench_way = time_ms(s, [&] { for (int i = 0; i < 10; ++i) CHECK(cudaMemcpyAsync(dst, src, moved, cudaMemcpyDeviceToDevice, s)); }, 1) / 10;
  const double single_const = time_ms(s, [&] { CHECK(cudaMemcpyAsync(dst, src, moved, cudaMemcpyDeviceToDevice, s)); }, 9);
  fill<<<1024, 256, 0, s>>>(reinterpret_cast<std::uint64_t*>(src), moved / 8);
  const double single_pattern = time_ms(s, [&] { CHECK(cudaMemcpyAsync(dst, src, moved, cudaMemcpyDeviceToDevice, s)); }, 9);
  const double ten_pattern = time_ms(s, [&] { for (int i = 0; i < 10; ++i) CHECK(cudaMemcpyAsync(dst, src, moved, cudaMemcpyDeviceToDevice, s)); }, 3) / 10;
  auto pct = [&](double ms) { return 100.0 * single_pattern / ms; };
  std::printf("%s: %zu moves, %.1f MiB, %llu chunks\n", name, moves.size(), moved / 1048576.0, (unsigned long long)total);
  std::printf("  ceiling: bench way (memset 1, 10 back to back) %.3f ms; single copy, memset 1 %.3f ms; single, pattern %.3f ms (%.0f GB/s); 10 back to back, pattern %.3f ms\n",
              bench_way, single_const, single_pattern, 2.0 * moved / single_pattern / 1e6, ten_pattern);
  std::printf("  move kernel alone (in place) %.3f ms = %.1f%%; one part queued %.3f ms = %.1f%%; 4 parts %.3f ms = %.1f%%; 4 parts, prep on a 2nd stream %.3f ms = %.1f%%\n",
              kernel_ms, pct(kernel_ms), one_ms, pct(one_ms), four_ms, pct(four_ms), four2_ms, pct(four2_ms));
  cudaFree(src); cudaFree(dst); cudaFree(region); cudaFree(dmoves); cudaFree(dchunks); cudaFree(flags); cudaFreeHost(staged);
  (void)kernel_count;
}

int main() {
  cudaStream_t s, prep; CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)); CHECK(cudaStreamCreateWithFlags(&prep, cudaStreamNonBlocking));
  for (int round = 0; round < 2; ++round) {
    run("(a) 10,000 x 4 KiB..1 MiB", 10000, 4096, 1 << 20, 1, s, prep);
    run("(b) 100,000 x 256 B..64 KiB", 100000, 256, 64 << 10, 2, s, prep);
  }
}
