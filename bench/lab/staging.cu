// Lab (not built by CMake): what the CUDA device's staging of a slide costs the host on layout
// (b) (100,000 moves), piece by piece, with the host's caches cold as in a compaction after a
// batch: a pass over the moves (the kernel choice), their conversion into 32-byte slide moves
// written into pinned memory (cudaMallocHost) or into pageable memory, and cudaMemcpyAsync of
// pinned buffers of several sizes, timed in the call itself and to completion, after the CPU
// wrote the buffer and without. Run 49 saw that call take 427..457 us for 3.2 MB while the copy
// ran 61 us. Prints the median of 9 repeats.
// Build: nvcc -O3 -std=c++20 -arch=sm_90 bench/lab/staging.cu -o staging
#include <cuda_runtime.h>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { std::printf("%s: %s\n", #x, cudaGetErrorString(e)); std::exit(1); } } while (0)
using Clock = std::chrono::steady_clock;

namespace {

struct Move {  // as vramkit::compactor::Move (40 bytes)
  std::uint32_t tag, from_segment;
  std::uint64_t from_offset;
  std::uint32_t to_segment;
  std::uint64_t to_offset, bytes;
};
struct SlideMove {  // as vramkit::compactor::detail::SlideMove (32 bytes)
  std::uint64_t source, destination, bytes;
  std::uint32_t first_chunk, move;
};

double micros(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::micro>(b - a).count(); }

void evict() {
  static std::vector<std::uint64_t> sweep(256 << 17);
  static std::uint64_t round = 0;
  ++round;
  for (auto& word : sweep) word = round;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::uint64_t convert(const std::vector<Move>& moves, SlideMove* out) {
  std::uint64_t chunks = 0;
  for (std::size_t i = 0; i < moves.size(); ++i) {
    const Move& m = moves[i];
    out[i] = {m.from_offset + 4096, m.to_offset + 4096, m.bytes, static_cast<std::uint32_t>(chunks),
              static_cast<std::uint32_t>(i)};
    chunks += m.bytes <= 8192 ? 1 : (m.bytes - 1) / 8192 + 1;
  }
  return chunks;
}

}  // namespace

int main() {
  constexpr std::size_t count = 100000;
  std::mt19937_64 rng(2);
  std::vector<Move> moves(count);
  std::uint64_t from = 0, to = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const std::uint64_t bytes = 256 * (1 + rng() % 256), gap = 256 * (1 + rng() % 256);
    from += gap;
    moves[i] = {static_cast<std::uint32_t>(i), 0, from, 0, to, bytes};
    from += bytes;
    to += bytes;
  }
  const std::size_t staged_bytes = count * sizeof(SlideMove);
  SlideMove* pinned = nullptr;
  CHECK(cudaMallocHost(&pinned, 2 * staged_bytes));
  std::vector<SlideMove> pageable(2 * count);
  void* device = nullptr;
  CHECK(cudaMalloc(&device, 16 << 20));
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  CHECK(cudaMemcpyAsync(device, pinned, 4096, cudaMemcpyHostToDevice, stream));
  CHECK(cudaStreamSynchronize(stream));

  std::vector<double> sum_us, pinned_us, pageable_us, api_us, total_us;
  std::uint64_t sink = 0;
  for (int r = 0; r < 9; ++r) {
    evict();
    auto t0 = Clock::now();
    std::uint64_t bytes = 0;
    for (const Move& m : moves) bytes += m.bytes;
    auto t1 = Clock::now();
    sink += bytes + convert(moves, pinned);
    auto t2 = Clock::now();
    CHECK(cudaMemcpyAsync(device, pinned, staged_bytes, cudaMemcpyHostToDevice, stream));
    auto t3 = Clock::now();
    CHECK(cudaStreamSynchronize(stream));
    auto t4 = Clock::now();
    evict();
    auto t5 = Clock::now();
    sink += convert(moves, pageable.data());
    auto t6 = Clock::now();
    sum_us.push_back(micros(t0, t1));
    pinned_us.push_back(micros(t1, t2));
    api_us.push_back(micros(t2, t3));
    total_us.push_back(micros(t2, t4));
    pageable_us.push_back(micros(t5, t6));
  }
  std::printf("staging of 100,000 moves, caches cold (median of 9):\n");
  std::printf("  pass over the moves (sum of bytes)        %8.1f us\n", median(sum_us));
  std::printf("  convert into pinned memory                %8.1f us\n", median(pinned_us));
  std::printf("  convert into pageable memory              %8.1f us\n", median(pageable_us));
  std::printf("  cudaMemcpyAsync of the 3.2 MB: the call   %8.1f us, to completion %8.1f us\n", median(api_us),
              median(total_us));
  std::printf("cudaMemcpyAsync from pinned memory, by size (the call; to completion), median of 9:\n");
  for (std::size_t size : {std::size_t{4096}, std::size_t{64} << 10, std::size_t{256} << 10, std::size_t{1} << 20,
                           staged_bytes, std::size_t{6} << 20}) {
    for (int written = 0; written < 2; ++written) {
      std::vector<double> call, done;
      for (int r = 0; r < 9; ++r) {
        if (written) std::memset(pinned, r, size);
        auto a = Clock::now();
        CHECK(cudaMemcpyAsync(device, pinned, size, cudaMemcpyHostToDevice, stream));
        auto b = Clock::now();
        CHECK(cudaStreamSynchronize(stream));
        auto c = Clock::now();
        call.push_back(micros(a, b));
        done.push_back(micros(a, c));
      }
      std::printf("  %8zu B, %-24s %8.1f us; %8.1f us\n", size, written ? "just written by the CPU:" : "not written since:",
                  median(call), median(done));
    }
  }
  // A fresh pinned buffer each time, as run 49's first compaction had.
  std::vector<double> call;
  for (int r = 0; r < 5; ++r) {
    SlideMove* fresh = nullptr;
    CHECK(cudaMallocHost(&fresh, 2 * staged_bytes));
    convert(moves, fresh);
    auto a = Clock::now();
    CHECK(cudaMemcpyAsync(device, fresh, staged_bytes, cudaMemcpyHostToDevice, stream));
    auto b = Clock::now();
    CHECK(cudaStreamSynchronize(stream));
    CHECK(cudaFreeHost(fresh));
    call.push_back(micros(a, b));
  }
  std::printf("  3.2 MB from a freshly allocated pinned buffer: the call %8.1f us (median of 5)\n", median(call));
  std::printf("(sink %llu)\n", static_cast<unsigned long long>(sink));
  return 0;
}
