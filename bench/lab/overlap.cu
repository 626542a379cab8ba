// Lab (not built by CMake): the GPU's idle time between the move kernels of consecutive parts of a
// slide (8..10 µs in runs 73 and 74). Does a programmatic dependent launch (the second kernel
// launched with cudaLaunchAttributeProgrammaticStreamSerialization, the first never triggering, so
// that the second's blocks start as the first's last block exits) shorten it, and does it still
// when an event record and an event wait stand between the two launches, as in the CUDA device?
// Each case: kernel A (a full grid, each block busy for `busy` µs by %globaltimer), then kernel B
// (the same); the gap is B's first block's start minus A's last block's exit. Medians of 31.
// Build: nvcc -O3 -std=c++20 -arch=sm_90 bench/lab/overlap.cu -o overlap
//
// Run 78 (H100 80GB HBM3, driver 580.159.04; 1,048 blocks of 256 threads, medians of 31): plain
// launches 2.05..2.30 µs between A's last exit and B's first start, the same with an event record
// and wait between; PDL 1.02 µs, with or without them; PDL with a kernel on the preparation stream
// between (as the CUDA device queues a part's chunk derivation) 2.56 µs. The library built with
// it (VRAMKIT_PART_OVERLAP, `1e35250`): (b)'s next compaction 71% and 70% of the ceiling against
// 70% and 70% without (medians of 5, one run each): within the noise, so it was taken out again.
// The 8..10 µs between parts seen in runs 73 and 74 are not the launch's own latency.
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>
#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { std::printf("%s: %s\n", #x, cudaGetErrorString(e)); std::exit(1); } } while (0)

__device__ unsigned long long now() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
  return t;
}

// stamps[0]: earliest block start, stamps[1]: latest block exit.
__global__ void __launch_bounds__(256) busy(unsigned long long nanoseconds, unsigned long long* stamps) {
  const unsigned long long begin = now();
  if (threadIdx.x == 0) atomicMin(stamps, begin);
  while (now() - begin < nanoseconds) {
  }
  __syncthreads();
  if (threadIdx.x == 0) atomicMax(stamps + 1, now());
}

__global__ void tiny(unsigned* p) { if (threadIdx.x == 0) atomicAdd(p, 1u); }

int main(int argc, char** argv) {
  const double busy_us = argc > 1 ? std::atof(argv[1]) : 100.0;
  cudaDeviceProp properties{};
  CHECK(cudaGetDeviceProperties(&properties, 0));
  int per_multiprocessor = 0;
  CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_multiprocessor, busy, 256, 0));
  const unsigned blocks = per_multiprocessor * properties.multiProcessorCount - properties.multiProcessorCount / 16;
  std::printf("%s, %u blocks of 256 threads (%d a multiprocessor), each busy %.0f us\n", properties.name, blocks,
              per_multiprocessor, busy_us);
  cudaStream_t stream, prep;
  CHECK(cudaStreamCreate(&stream));
  CHECK(cudaStreamCreateWithFlags(&prep, cudaStreamNonBlocking));
  cudaEvent_t moved, prepared;
  CHECK(cudaEventCreateWithFlags(&moved, cudaEventDisableTiming));
  CHECK(cudaEventCreateWithFlags(&prepared, cudaEventDisableTiming));
  unsigned long long* stamps;
  unsigned* counter;
  CHECK(cudaMalloc(&stamps, 4 * sizeof(unsigned long long)));
  CHECK(cudaMalloc(&counter, 64));
  const unsigned long long initial[4] = {~0ull, 0, ~0ull, 0};
  const unsigned long long ns = static_cast<unsigned long long>(busy_us * 1000);

  const char* names[] = {"plain launches", "event record + wait between", "PDL", "PDL, event record + wait between",
                         "PDL, record + wait, tiny kernel on prep between"};
  for (int kind = 0; kind < 5; ++kind) {
    std::vector<double> gaps, spans;
    for (int round = 0; round < 31; ++round) {
      CHECK(cudaMemcpy(stamps, initial, sizeof initial, cudaMemcpyHostToDevice));
      busy<<<blocks, 256, 0, stream>>>(ns, stamps);
      const bool pdl = kind >= 2;
      if (kind == 1 || kind >= 3) {
        if (kind == 4) tiny<<<1, 32, 0, prep>>>(counter);
        CHECK(cudaEventRecord(moved, stream));
        CHECK(cudaEventRecord(prepared, prep));
        CHECK(cudaStreamWaitEvent(stream, prepared, 0));
      }
      cudaLaunchConfig_t config{};
      config.gridDim = blocks;
      config.blockDim = 256;
      config.stream = stream;
      cudaLaunchAttribute attribute{};
      attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
      attribute.val.programmaticStreamSerializationAllowed = 1;
      config.attrs = &attribute;
      config.numAttrs = pdl ? 1 : 0;
      CHECK(cudaLaunchKernelEx(&config, busy, ns, stamps + 2));
      CHECK(cudaStreamSynchronize(stream));
      unsigned long long got[4];
      CHECK(cudaMemcpy(got, stamps, sizeof got, cudaMemcpyDeviceToHost));
      gaps.push_back((static_cast<double>(got[2]) - static_cast<double>(got[1])) / 1000.0);
      spans.push_back((static_cast<double>(got[3]) - static_cast<double>(got[0])) / 1000.0);
    }
    std::sort(gaps.begin(), gaps.end());
    std::sort(spans.begin(), spans.end());
    std::printf("%-50s gap (B's first start - A's last exit) median %7.2f us [%7.2f..%7.2f]; A+B %8.2f us\n",
                names[kind], gaps[15], gaps[3], gaps[27], spans[15]);
  }
  return 0;
}
