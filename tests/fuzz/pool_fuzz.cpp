// libFuzzer target: the input's bytes are a sequence of operations on a host-device pool (allocate,
// free, pin, unpin, write, fill, compact full/hole/budget, stale handles, bad ranges) and small
// MemoryPlan solves. A model keeps every live buffer's expected bytes; after every step the pool's
// invariants are checked and every live buffer is read back and compared, and pinned buffers must
// not have moved. Any mismatch aborts (libFuzzer then saves the input).
//
// Build and run: scripts/fuzz.sh [seconds].
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <vramkit/host_device.hpp>
#include <vramkit/memory_plan.hpp>
#include <vramkit/pool.hpp>
#include <vramkit/units.hpp>

using namespace vramkit;

namespace {

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "pool_fuzz: %s\n", what);
  std::abort();
}

class Input {
 public:
  Input(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  bool empty() const { return position_ >= size_; }
  std::uint8_t byte() { return position_ < size_ ? data_[position_++] : 0; }
  std::uint16_t word() { return static_cast<std::uint16_t>(byte() | byte() << 8); }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t position_ = 0;
};

// Operations run over the whole fuzzing session (docs/reliability.md quotes it), printed at exit.
std::uint64_t operations_run = 0;
struct ReportOperations {
  ~ReportOperations() {
    std::fprintf(stderr, "pool_fuzz: %llu operations run\n", (unsigned long long)operations_run);
  }
} report_operations;

struct Buffer {
  Handle handle;
  std::vector<std::byte> expected;
  std::uint32_t pins = 0;
  bool arena = false;  ///< allocate_pinned: never moves
  std::uint64_t pinned_address = 0;
};

std::vector<std::byte> bytes_from(std::uint64_t seed, std::uint64_t count) {
  std::vector<std::byte> data(count);
  std::uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
  for (auto& value : data) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    value = static_cast<std::byte>(state >> 56);
  }
  return data;
}

void check_pool(const Pool& pool, const std::vector<Buffer>& buffers) {
  pool.check_invariants();
  if (pool.options().guard_bytes != 0) pool.check_guards();
  std::uint64_t live = 0;
  for (const Buffer& buffer : buffers) {
    std::vector<std::byte> actual(buffer.expected.size());
    pool.read(buffer.handle, actual);
    if (actual != buffer.expected) fail("a live buffer's bytes changed");
    if ((buffer.pins != 0 || buffer.arena) && pool.address(buffer.handle) != buffer.pinned_address)
      fail("a pinned buffer moved");
    ++live;
  }
  if (pool.statistics().live_allocations != live) fail("live allocation count differs from the model");
}

void solve_small_plan(Input& input) {
  const std::size_t stages = 1 + input.byte() % 4;
  std::vector<std::string> names;
  for (std::size_t stage = 0; stage < stages; ++stage) names.push_back("s" + std::to_string(stage));
  MemoryPlan plan(names);
  const std::size_t count = 1 + input.byte() % 6;
  for (std::size_t index = 0; index < count; ++index) {
    const std::size_t first = input.byte() % stages;
    const std::size_t last = first + input.byte() % (stages - first);
    const std::uint64_t bytes = 1 + input.word() * 16ull;
    plan.add_buffer({.name = "b" + std::to_string(index),
                     .bytes = bytes,
                     .first_stage = names[first],
                     .last_stage = names[last],
                     .alignment = 1ull << (input.byte() % 12)});
  }
  const PlanSolution solution = solve(plan, {.perturbations = 4});
  if (solution.lower_bound_bytes > solution.peak_bytes) fail("plan: lower bound above the peak");
  for (std::size_t a = 0; a < solution.buffers.size(); ++a) {
    const PlacedBuffer& x = solution.buffers[a];
    if (x.offset % x.alignment != 0) fail("plan: misaligned buffer");
    if (x.offset + x.reserved_bytes > solution.peak_bytes || x.reserved_bytes < x.bytes)
      fail("plan: past the peak");
    for (std::size_t b = a + 1; b < solution.buffers.size(); ++b) {
      const PlacedBuffer& y = solution.buffers[b];
      const bool share_stage = x.first_stage <= y.last_stage && y.first_stage <= x.last_stage;
      const bool share_bytes =
          x.offset < y.offset + y.reserved_bytes && y.offset < x.offset + x.reserved_bytes;
      if (share_stage && share_bytes) fail("plan: two buffers live together share bytes");
    }
  }
  if (!check_fit(solution, solution.peak_bytes).fits) fail("plan: does not fit its own peak");
  if (solution.peak_bytes > 0 && check_fit(solution, solution.peak_bytes - 1).fits)
    fail("plan: fits below its peak");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Input input(data, size);
  const std::uint8_t setup = input.byte();
  auto device = make_host_device({.capacity_bytes = 64_MiB, .shuffle_seed = (setup & 1u) != 0 ? setup : 0u});
  Pool pool({.capacity_bytes = 64_KiB << (setup >> 1 & 3u),
             .max_capacity_bytes = (setup & 8u) != 0 ? 2_MiB : 0,
             .granularity = 16u << (setup >> 4 & 3u),
             .compact_on_failure = (setup & 64u) == 0,
             .guard_bytes = (setup & 128u) != 0 ? 48u : 0u},
            device);
  std::vector<Buffer> buffers;
  std::vector<Handle> freed;
  std::uint64_t step = 0;
  while (!input.empty()) {
    const std::uint8_t operation = input.byte();
    const std::size_t pick = buffers.empty() ? 0 : input.byte() % buffers.size();
    ++step;
    ++operations_run;
    switch (operation % 13) {
      case 0:
      case 1: {  // allocate (sometimes pinned for life) and write
        const std::uint64_t bytes = 1 + input.word() % (operation % 2 == 0 ? 4096u : 65536u);
        const std::uint64_t alignment = 1ull << (input.byte() % 14);
        try {
          const Handle handle = (operation & 32u) != 0 ? pool.allocate_pinned(bytes, alignment)
                                                       : pool.allocate(bytes, alignment);
          if (pool.address(handle) % std::max<std::uint64_t>(alignment, 1) != 0) fail("misaligned block");
          Buffer buffer{handle, bytes_from(step, bytes)};
          pool.write(handle, buffer.expected);
          buffer.arena = (operation & 32u) != 0;
          buffer.pinned_address = pool.address(handle);
          buffers.push_back(std::move(buffer));
        } catch (const out_of_memory&) {
        }
        break;
      }
      case 2:  // free
        if (buffers.empty()) break;
        if (buffers[pick].pins != 0) {
          try {
            pool.free(buffers[pick].handle);
            fail("freeing a pinned buffer succeeded");
          } catch (const state_error&) {
          }
          break;
        }
        pool.free(buffers[pick].handle);
        freed.push_back(buffers[pick].handle);
        buffers[pick] = std::move(buffers.back());
        buffers.pop_back();
        break;
      case 3:  // pin
        if (buffers.empty()) break;
        if (pool.pin(buffers[pick].handle) != pool.address(buffers[pick].handle))
          fail("pin and address differ");
        buffers[pick].pinned_address = pool.address(buffers[pick].handle);
        ++buffers[pick].pins;
        break;
      case 4:  // unpin
        if (buffers.empty()) break;
        if (buffers[pick].pins == 0) {
          if (pool.unpin_noexcept(buffers[pick].handle)) fail("unpin of an unpinned buffer succeeded");
          break;
        }
        pool.unpin(buffers[pick].handle);
        --buffers[pick].pins;
        break;
      case 5: {  // write part of a buffer
        if (buffers.empty()) break;
        Buffer& buffer = buffers[pick];
        const std::uint64_t offset = input.word() % buffer.expected.size();
        const std::uint64_t bytes = input.word() % (buffer.expected.size() - offset + 1);
        const auto part = bytes_from(step, bytes);
        pool.write(buffer.handle, part, offset);
        std::copy(part.begin(), part.end(), buffer.expected.begin() + static_cast<std::ptrdiff_t>(offset));
        break;
      }
      case 6: {  // an access past the end is refused and changes nothing
        if (buffers.empty()) break;
        std::vector<std::byte> too_long(buffers[pick].expected.size() + 1);
        try {
          pool.write(buffers[pick].handle, too_long);
          fail("a write past the end succeeded");
        } catch (const vramkit::invalid_argument&) {
        }
        break;
      }
      case 7: {  // fill
        if (buffers.empty()) break;
        const auto value = static_cast<std::byte>(input.byte());
        pool.fill(buffers[pick].handle, value);
        std::fill(buffers[pick].expected.begin(), buffers[pick].expected.end(), value);
        break;
      }
      case 8:
        pool.compact({.release_empty_segments = (operation & 16u) != 0});
        break;
      case 9:
        pool.compact({.goal = CompactGoal::hole,
                      .hole_bytes = 1 + input.word() * 16ull,
                      .hole_alignment = 1ull << (input.byte() % 22)});
        break;
      case 10:
        pool.compact({.max_bytes_moved = input.word() * 64ull});
        break;
      case 11:  // stale handles never resolve
        if (freed.empty()) break;
        if (pool.valid(freed[pick % freed.size()])) fail("a freed handle is valid");
        try {
          pool.pin(freed[pick % freed.size()]);
          fail("a freed handle was pinned");
        } catch (const invalid_handle&) {
        }
        break;
      case 12:
        try {
          solve_small_plan(input);
        } catch (const vramkit::invalid_argument&) {  // e.g. a plan past its limits; nothing to check
        }
        break;
    }
    check_pool(pool, buffers);
  }
  for (Buffer& buffer : buffers) {
    while (buffer.pins-- != 0) pool.unpin(buffer.handle);
    if (!pool.release(buffer.handle)) fail("release of a live buffer failed");
  }
  if (pool.statistics().used_bytes != 0) fail("bytes lost after freeing everything");
  return 0;
}
