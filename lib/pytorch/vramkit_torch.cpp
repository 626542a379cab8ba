// vramkit_torch: a vramkit pool behind PyTorch's CUDAPluggableAllocator. A shared library exporting
// the three C functions PyTorch (and ctypes) call; everything else stays hidden.
//
// One pool per CUDA device, created on the first allocation for that device and never destroyed
// (PyTorch frees tensors during interpreter shutdown, after static destructors may have run; the
// process's exit returns the memory). Non-moving: PyTorch keeps raw pointers, so every block is
// pinned for life (allocate_pinned) and compaction is off (compact_on_failure = false).
//
// Sizing (read once, when a device's pool is created):
//  - VRAMKIT_TORCH_CAPACITY: the fraction of the device's free memory at that moment the pool may
//    grow to (default 0.9, in (0, 1]).
//  - VRAMKIT_TORCH_SEGMENT_MIB: the first segment's size and the growth step in MiB (default 256); a
//    larger request gets a segment of its own size. Reserved memory therefore tracks the peak in
//    steps of a segment, which is what vramkit_stats_json's peak_reserved_bytes reports.
//
// Streams: the pool is not stream ordered. While every call has named one stream (the common case:
// PyTorch's current stream), a freed block is reused at once, which is safe because later work on
// that same stream runs after the work queued before the free. From the first call that names a
// second stream on, the device is synchronized once, and each free records the freeing stream's
// queued work (Pool::unpin with the stream) and waits for it on the host before the block can be
// reused: correct for any stream, slower.
//
// Thread-safe: one mutex per device guards its pointer map and stream state; the pool has its own.
#include <sys/types.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include <vramkit/device.hpp>
#include <vramkit/memory_map.hpp>
#include <vramkit/pool.hpp>
#include <vramkit/statistics.hpp>

#define VRAMKIT_TORCH_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

using vramkit::Handle;
using vramkit::Pool;
using vramkit::Stream;

double environment_double(const char* name, double fallback) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  char* end = nullptr;
  const double value = std::strtod(text, &end);
  return end != text ? value : fallback;
}

struct DevicePool {
  std::mutex mutex;
  std::unique_ptr<Pool> pool;
  std::unordered_map<void*, Handle> blocks;  // every live block, pinned once
  Stream first_stream = nullptr;
  bool stream_seen = false;
  bool several_streams = false;

  // Notes the stream a call names; on the first second stream, lets queued work finish once so that
  // blocks freed without a recorded use are not handed to a stream that could overtake it.
  void note_stream(Stream stream) {
    if (several_streams) return;
    if (!stream_seen) {
      stream_seen = true;
      first_stream = stream;
    } else if (stream != first_stream) {
      several_streams = true;
      pool->device().synchronize();
    }
  }
};

std::mutex pools_mutex;
std::map<int, DevicePool*>& device_pools() {
  static auto* pools = new std::map<int, DevicePool*>();  // never destroyed: see the header
  return *pools;
}

std::unique_ptr<Pool> make_pool(int device) {
  std::shared_ptr<vramkit::Device> cuda = vramkit::make_cuda_device(device);
  double fraction = environment_double("VRAMKIT_TORCH_CAPACITY", 0.9);
  if (!(fraction > 0 && fraction <= 1)) fraction = 0.9;
  const double segment_mib = environment_double("VRAMKIT_TORCH_SEGMENT_MIB", 256);
  const std::uint64_t granularity = 512;  // PyTorch rounds its requests to 512 bytes as well
  const auto limit =
      static_cast<std::uint64_t>(static_cast<double>(cuda->memory_info().free_bytes) * fraction) &
      ~(granularity - 1);
  std::uint64_t segment = static_cast<std::uint64_t>(segment_mib > 0 ? segment_mib : 256) << 20;
  if (segment > limit) segment = limit;
  return std::make_unique<Pool>(vramkit::PoolOptions{.capacity_bytes = segment,
                                                     .max_capacity_bytes = limit,
                                                     .segment_bytes = segment,
                                                     .granularity = granularity,
                                                     .compact_on_failure = false},
                                cuda);
}

// The device's pool, created on first use. Throws what make_cuda_device or Pool throw.
DevicePool& pool_for(int device) {
  std::lock_guard lock(pools_mutex);
  DevicePool*& entry = device_pools()[device];
  if (entry == nullptr) {
    auto created = std::make_unique<DevicePool>();
    created->pool = make_pool(device);
    entry = created.release();
  }
  return *entry;
}

DevicePool* existing_pool(int device) {
  std::lock_guard lock(pools_mutex);
  const auto found = device_pools().find(device);
  return found == device_pools().end() ? nullptr : found->second;
}

// The pool's statistics in the schema of docs/metrics.md (vramkit::statistics_json), plus the
// device and what this allocator knows: whether the pool exists, its name, several streams seen.
nlohmann::json statistics_json(int device, const DevicePool* pool) {
  if (pool == nullptr) return {{"device", device}, {"initialized", false}};
  nlohmann::json json = nlohmann::json::parse(vramkit::statistics_json(pool->pool->statistics()));
  json["device"] = device;
  json["initialized"] = true;
  json["name"] = pool->pool->device().name();
  json["several_streams"] = pool->several_streams;
  return json;
}

}  // namespace

/// PyTorch's alloc_fn. Returns nullptr (and prints why to stderr) when the pool cannot serve it.
VRAMKIT_TORCH_EXPORT void* vramkit_alloc(ssize_t size, int device, Stream stream) {
  if (size <= 0) return nullptr;
  try {
    DevicePool& entry = pool_for(device);
    std::lock_guard lock(entry.mutex);
    entry.note_stream(stream);
    const Handle handle = entry.pool->allocate_pinned(static_cast<std::uint64_t>(size));
    void* block = reinterpret_cast<void*>(static_cast<std::uintptr_t>(entry.pool->address(handle)));
    entry.blocks.emplace(block, handle);
    return block;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "vramkit_alloc(%lld bytes, device %d): %s\n", static_cast<long long>(size), device,
                 error.what());
    return nullptr;
  }
}

/// PyTorch's free_fn. Never throws; ignores pointers it did not hand out.
VRAMKIT_TORCH_EXPORT void vramkit_free(void* ptr, ssize_t, int device, Stream stream) {
  if (ptr == nullptr) return;
  DevicePool* entry = existing_pool(device);
  if (entry == nullptr) return;
  try {
    std::lock_guard lock(entry->mutex);
    const auto found = entry->blocks.find(ptr);
    if (found == entry->blocks.end()) return;
    const Handle handle = found->second;
    entry->blocks.erase(found);
    entry->note_stream(stream);
    entry->pool->release(handle, entry->several_streams ? stream : nullptr);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "vramkit_free(device %d): %s\n", device, error.what());
  }
}

/// The device's pool statistics as JSON ({"initialized": false} before its first allocation). The
/// string stays valid until this thread's next call.
VRAMKIT_TORCH_EXPORT const char* vramkit_stats_json(int device) {
  thread_local std::string text;
  try {
    DevicePool* entry = existing_pool(device);
    if (entry == nullptr) {
      text = statistics_json(device, nullptr).dump();
    } else {
      std::lock_guard lock(entry->mutex);
      text = statistics_json(device, entry).dump();
    }
  } catch (const std::exception& error) {
    text = nlohmann::json{{"device", device}, {"error", error.what()}}.dump();
  }
  return text.c_str();
}
