// Lab (not built by CMake): variants of the move kernel's copy mechanics on layout (a) of the
// compaction benchmark, out of place, against one cudaMemcpyAsync of the same bytes.
// Build (from the repository root, with .deps gathered): nvcc -O3 -std=c++20 -arch=sm_90 -I lib -I include
//   -I .deps/usr/include bench/lab/move_sweep.cu lib/device/cuda/move_kernel.cu lib/compactor/slide_chunks.cpp
#include <cuda_runtime.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <random>
#include <vector>
#include "device/cuda/move_kernel.hpp"

using vramkit::cuda_detail::DeviceChunk;
#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { std::printf("%s: %s\n", #x, cudaGetErrorString(e)); std::exit(1); } } while (0)

template <int H> __device__ __forceinline__ uint4 load(const uint4* p) {
  if constexpr (H == 0) return __ldcg(p);
  else if constexpr (H == 1) return __ldcs(p);
  else if constexpr (H == 2) return __ldg(p);
  else return __ldlu(p);
}
template <int H> __device__ __forceinline__ void store(uint4* p, uint4 v) {
  if constexpr (H == 0) __stcg(p, v);
  else if constexpr (H == 1) __stcs(p, v);
  else __stwb(p, v);
}

template <unsigned T, unsigned V, int L, int S, bool EARLY>
__global__ void __launch_bounds__(T) sweep(const DeviceChunk* __restrict__ chunks, std::uint32_t end, unsigned* ticket, unsigned* flags) {
  __shared__ std::uint32_t taken;
  if (EARLY && threadIdx.x == 0) taken = atomicAdd(ticket, 1u);
  for (;;) {
    if (!EARLY && threadIdx.x == 0) taken = atomicAdd(ticket, 1u);
    __syncthreads();
    const std::uint32_t index = taken;
    __syncthreads();
    if (index >= end) return;
    const DeviceChunk chunk = chunks[index];
    const unsigned vectors = chunk.bytes / 16;
    const auto* source = reinterpret_cast<const uint4*>(chunk.source);
    uint4 held[V];
#pragma unroll
    for (unsigned k = 0; k < V; ++k) {
      const unsigned v = k * T + threadIdx.x;
      if (v < vectors) held[k] = load<L>(source + v);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      __threadfence();
      atomicExch(flags + index, 1u);
      if (EARLY) taken = atomicAdd(ticket, 1u);
    }
    auto* destination = reinterpret_cast<uint4*>(chunk.destination);
#pragma unroll
    for (unsigned k = 0; k < V; ++k) {
      const unsigned v = k * T + threadIdx.x;
      if (v < vectors) store<S>(destination + v, held[k]);
    }
  }
}

__global__ void fill(std::uint64_t* words, std::size_t count) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < count; i += std::size_t{gridDim.x} * blockDim.x)
    words[i] = i * 0x9E3779B97F4A7C15ull ^ (i >> 7);
}
__global__ void verify(const DeviceChunk* chunks, std::uint32_t count, unsigned long long* bad) {
  for (std::uint32_t c = blockIdx.x; c < count; c += gridDim.x) {
    const auto* s = reinterpret_cast<const std::uint64_t*>(chunks[c].source);
    const auto* d = reinterpret_cast<const std::uint64_t*>(chunks[c].destination);
    for (unsigned i = threadIdx.x; i < chunks[c].bytes / 8; i += blockDim.x)
      if (s[i] != d[i]) atomicAdd(bad, 1ull);
  }
}

struct Setup { char* a; char* b; std::uint64_t total; std::vector<std::pair<std::uint64_t, std::uint64_t>> moves; std::uint64_t moved; };

std::vector<DeviceChunk> chunk_up(const Setup& s, std::uint64_t limit) {
  std::vector<DeviceChunk> out;
  std::uint64_t dst = 0;
  for (auto [src, bytes] : s.moves) {
    for (std::uint64_t o = 0; o < bytes; o += limit) {
      const std::uint64_t n = std::min(limit, bytes - o);
      out.push_back({reinterpret_cast<std::uint64_t>(s.a) + src + o, reinterpret_cast<std::uint64_t>(s.b) + dst + o, static_cast<std::uint32_t>(n), 0, 0xFFFFFFFFu, 0xFFFFFFFFu});
    }
    dst += bytes;
  }
  return out;
}

double median(std::vector<float> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; }

template <class Launch>
double time_it(Launch&& launch, unsigned* ticket, unsigned* flags, std::size_t nflags, int reps = 9) {
  cudaEvent_t e0, e1; CHECK(cudaEventCreate(&e0)); CHECK(cudaEventCreate(&e1));
  std::vector<float> ms;
  for (int r = 0; r < reps + 2; ++r) {
    CHECK(cudaMemsetAsync(ticket, 0, 4)); CHECK(cudaMemsetAsync(flags, 0, nflags * 4));
    CHECK(cudaEventRecord(e0)); launch(); CHECK(cudaGetLastError()); CHECK(cudaEventRecord(e1)); CHECK(cudaEventSynchronize(e1));
    float t; CHECK(cudaEventElapsedTime(&t, e0, e1)); if (r >= 2) ms.push_back(t);
  }
  return median(ms);
}

int main() {
  std::mt19937 random(1);
  std::uniform_real_distribution<double> exponent(std::log(4096.0), std::log(1048576.0));
  Setup s{};
  std::uint64_t at = 0;
  for (int i = 0; i < 10000; ++i) {
    at += (static_cast<std::uint64_t>(std::exp(exponent(random))) + 255) / 256 * 256;
    const std::uint64_t keep = (static_cast<std::uint64_t>(std::exp(exponent(random))) + 255) / 256 * 256;
    s.moves.push_back({at, keep}); at += keep; s.moved += keep;
  }
  s.total = at;
  CHECK(cudaMalloc(&s.a, s.total)); CHECK(cudaMalloc(&s.b, s.total));
  fill<<<1024, 256>>>(reinterpret_cast<std::uint64_t*>(s.a), s.total / 8);
  CHECK(cudaDeviceSynchronize());
  unsigned* ticket; unsigned* flags; unsigned long long* bad; DeviceChunk* dchunks;
  CHECK(cudaMalloc(&ticket, 4)); CHECK(cudaMalloc(&flags, 4u << 20)); CHECK(cudaMalloc(&bad, 8)); CHECK(cudaMalloc(&dchunks, 32u << 20));
  cudaDeviceProp p; CHECK(cudaGetDeviceProperties(&p, 0));
  const double ceiling_ms = time_it([&] { CHECK(cudaMemcpyAsync(s.b, s.a, s.moved, cudaMemcpyDeviceToDevice)); }, ticket, flags, 1);
  std::printf("moved %.1f MiB in %zu buffers; one cudaMemcpyAsync %.3f ms = %.0f GB/s (read+write)\n", s.moved / 1048576.0, s.moves.size(), ceiling_ms, 2.0 * s.moved / ceiling_ms / 1e6);
  auto report = [&](const char* name, std::uint64_t limit, auto&& launch) {
    const auto chunks = chunk_up(s, limit);
    CHECK(cudaMemcpy(dchunks, chunks.data(), chunks.size() * sizeof(DeviceChunk), cudaMemcpyHostToDevice));
    CHECK(cudaMemset(s.b, 0, s.moved)); CHECK(cudaMemset(bad, 0, 8));
    const double ms = time_it([&] { launch(static_cast<std::uint32_t>(chunks.size())); }, ticket, flags, chunks.size());
    verify<<<4096, 256>>>(dchunks, static_cast<std::uint32_t>(chunks.size()), bad);
    unsigned long long wrong = 0; CHECK(cudaMemcpy(&wrong, bad, 8, cudaMemcpyDeviceToHost));
    std::printf("%-34s chunks %6zu  %.3f ms  %5.1f%% of memcpy  %s\n", name, chunks.size(), ms, 100 * ceiling_ms / ms, wrong ? "WRONG" : "ok");
  };
  int real_blocks = 0;
  CHECK(vramkit::cuda_detail::move_blocks_per_multiprocessor(vramkit::cuda_detail::MoveKernel::block, &real_blocks));
  report("library block kernel", 65536, [&](std::uint32_t n) {
    CHECK(vramkit::cuda_detail::launch_move_chunks(vramkit::cuda_detail::MoveKernel::block, dchunks, 0, n, ticket, flags, real_blocks * p.multiProcessorCount, 0)); });
  auto variant = [&](const char* name, auto kernel, unsigned threads, std::uint64_t limit) {
    int per = 0; CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, kernel, threads, 0));
    char label[96]; std::snprintf(label, sizeof label, "%s (%d/SM)", name, per);
    report(label, limit, [&](std::uint32_t n) { kernel<<<std::min<unsigned>(per * p.multiProcessorCount, n), threads>>>(dchunks, n, ticket, flags); });
  };
  variant("T512 V8 cg/cg", sweep<512, 8, 0, 0, false>, 512, 65536);
  variant("T512 V8 cg/cg early ticket", sweep<512, 8, 0, 0, true>, 512, 65536);
  variant("T512 V8 cs/cs", sweep<512, 8, 1, 1, false>, 512, 65536);
  variant("T512 V8 ldg/cg", sweep<512, 8, 2, 0, false>, 512, 65536);
  variant("T512 V8 cg/wb", sweep<512, 8, 0, 2, false>, 512, 65536);
  variant("T512 V8 cs/cs early", sweep<512, 8, 1, 1, true>, 512, 65536);
  variant("T256 V16 cg/cg", sweep<256, 16, 0, 0, false>, 256, 65536);
  variant("T1024 V4 cg/cg", sweep<1024, 4, 0, 0, false>, 1024, 65536);
  variant("T512 V4 cg/cg (32K)", sweep<512, 4, 0, 0, false>, 512, 32768);
  variant("T512 V16 cg/cg (128K)", sweep<512, 16, 0, 0, false>, 512, 131072);
  variant("T256 V8 cg/cg (32K)", sweep<256, 8, 0, 0, false>, 256, 32768);
  variant("T128 V16 cg/cg (32K)", sweep<128, 16, 0, 0, false>, 128, 32768);
  variant("T1024 V8 cg/cg (128K)", sweep<1024, 8, 0, 0, false>, 1024, 131072);
  std::printf("again: one cudaMemcpyAsync %.3f ms\n", time_it([&] { CHECK(cudaMemcpyAsync(s.b, s.a, s.moved, cudaMemcpyDeviceToDevice)); }, ticket, flags, 1));
}
