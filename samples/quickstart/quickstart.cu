// The shortest complete vramkit program: a pool, a buffer, upload, pin, a kernel, download, stats.
// On a machine without a GPU it runs on the host device and says so.
#include <cstdio>
#include <numeric>
#include <vector>

#include <vramkit/vramkit.hpp>

using namespace vramkit;

__global__ void scale(cuda::std::span<float> values, float factor) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < values.size()) values[i] *= factor;
}

int main() {
  Pool pool({.capacity_bytes = 64_MiB}, make_device());  // CUDA if a GPU is present, else host
  std::printf("device: %s\n", pool.device().name().c_str());

  std::vector<float> host(1 << 20);
  std::iota(host.begin(), host.end(), 0.0f);
  DeviceBuffer<float> buffer(pool, host);  // allocate + upload

  {
    Pinned<float> pinned = buffer.pin();  // the raw pointer is valid while pinned
    if (pool.device().kind() == DeviceKind::cuda) {
      scale<<<(host.size() + 255) / 256, 256>>>(pinned.span(), 2.0f);
      if (cudaDeviceSynchronize() != cudaSuccess) return 1;
    } else {
      for (float& value : pinned.span()) value *= 2.0f;  // the host twin of the kernel
    }
  }

  const std::vector<float> result = buffer.to_vector();
  std::printf("result[12345] = %.1f (expected %.1f)\n", result[12345], 2.0f * 12345);
  const PoolStatistics statistics = pool.statistics();
  std::printf("reserved %s, used %s, fragmentation %.2f, utilization %.2f, success rate %.2f\n",
              format_bytes(statistics.reserved_bytes).c_str(), format_bytes(statistics.used_bytes).c_str(),
              statistics.fragmentation(), statistics.utilization(), statistics.success_rate());
  return result[12345] == 2.0f * 12345 ? 0 : 1;
}
