// Lab (not built by CMake): the least host work any host-side bookkeeping of a full compaction can
// do, on layout (b) of the compaction benchmark (100,000 kept blocks of 256 B..64 KiB, each after a
// freed gap), with the host's caches cold as after a batch's host work. Nodes (40 B, as Heap's) and
// slots (64 B, as the handle table's) are laid out as the pool leaves them; the passes are
//   walk:   follow the address-ordered list, write one 24-byte move per kept block (the staging);
//   update: write each kept block's node at its new place, and its slot's offset and block id;
// each timed alone on one thread, then split over T threads (the nodes taken as an array in address
// order, as Heap::rebuild leaves them; a two-pass scan for the walk). The T threads are started
// once, outside the timings, and wait at a barrier between passes; for the cold case every one of
// them sweeps its share of 256 MiB, so no core's own cache keeps its range. It answers whether
// (b)'s goal (end to end within 1/0.7 of the copy ceiling's time) is reachable with the host
// doing O(blocks).
// Build: g++ -O2 -std=c++20 -pthread bench/lab/host_floor.cpp -o host_floor
// Run: ./host_floor [threads: 1 to the hardware's, default 8 or fewer]
#include <algorithm>
#include <barrier>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <thread>
#include <vector>

namespace {

struct Node {  // as vramkit::Heap::Node
  std::uint64_t offset, bytes;
  std::uint32_t previous, next, previous_free, next_free, tag;
  std::uint16_t free_class;
  bool free, in_use;
};
struct Slot {  // as vramkit::Slot: 64 bytes
  std::uint64_t offset, bytes, block_bytes, alignment;
  std::uint32_t block, segment, generation, pins, pending, next_free;
  bool live, free_when_unpinned;
  std::uint8_t kind;
};
struct Move { std::uint64_t from, to, bytes; };
static_assert(sizeof(Node) == 40 && sizeof(Slot) == 64 && sizeof(Move) == 24);

std::vector<std::uint64_t> sweep(256u << 17);  // 256 MiB

/// `count` threads (the caller's the first), started once: run(job) has each call job(t) and returns
/// when all are done. Between jobs the others wait at a barrier, so no timing pays for their start.
class Workers {
 public:
  explicit Workers(unsigned count) : count_(count), start_(count), done_(count) {
    for (unsigned t = 1; t < count; ++t)
      threads_.emplace_back([this, t] {
        for (;;) {
          start_.arrive_and_wait();
          if (stop_) return;
          job_(t);
          done_.arrive_and_wait();
        }
      });
  }
  ~Workers() {
    stop_ = true;
    start_.arrive_and_wait();
    for (auto& thread : threads_) thread.join();
  }
  unsigned count() const { return count_; }
  void run(const std::function<void(unsigned)>& job) {
    job_ = job;
    start_.arrive_and_wait();
    job_(0);
    done_.arrive_and_wait();
  }
  /// Thread t's share [begin, end) of `items`.
  std::pair<std::size_t, std::size_t> share(unsigned t, std::size_t items) const {
    return {items * t / count_, items * (t + 1) / count_};
  }

 private:
  unsigned count_;
  std::barrier<> start_, done_;
  std::function<void(unsigned)> job_;
  bool stop_ = false;  // written before the start barrier, read after it
  std::vector<std::thread> threads_;
};

/// Every thread sweeps its share of 256 MiB: afterwards no cache of any of them holds the arrays.
void evict(Workers& workers) {
  workers.run([&](unsigned t) {
    const auto [begin, end] = workers.share(t, sweep.size());
    for (std::size_t i = begin; i < end; ++i) sweep[i] += 1;
  });
}

template <class Body> double median_ms(Workers& workers, bool cold, Body&& body) {
  std::vector<double> times;
  for (int run = 0; run < 7; ++run) {
    if (cold) evict(workers);
    const auto start = std::chrono::steady_clock::now();
    body();
    times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const unsigned hardware = std::max(1u, std::thread::hardware_concurrency());
  const long asked = argc > 1 ? std::strtol(argv[1], nullptr, 10) : std::min(8u, hardware);
  if (asked < 1 || asked > static_cast<long>(hardware)) {
    std::fprintf(stderr, "threads: %s is not from 1 to %u (this machine's hardware threads)\n", argv[1], hardware);
    return 2;
  }
  const auto threads = static_cast<unsigned>(asked);
  Workers workers(threads);
  std::mt19937 random(2);  // layout (b)'s seed
  std::uniform_real_distribution<double> exponent(std::log(256.0), std::log(65536.0));
  auto size = [&] { return (static_cast<std::uint64_t>(std::exp(exponent(random))) + 255) / 256 * 256; };
  const std::size_t kept = 100000;
  std::vector<Node> nodes(2 * kept);
  std::vector<Slot> slots(2 * kept);  // a gap's slot, then its kept block's, as the benchmark allocates
  std::uint64_t cursor = 0, moved = 0;
  for (std::size_t i = 0; i < 2 * kept; ++i) {
    const std::uint64_t bytes = size();
    nodes[i] = {cursor, bytes, static_cast<std::uint32_t>(i - 1), static_cast<std::uint32_t>(i + 1), 0, 0,
                static_cast<std::uint32_t>(i), 0, i % 2 == 0, true};
    if (i % 2 == 1) moved += bytes;
    cursor += bytes;
  }
  nodes.back().next = ~0u;
  std::vector<Move> staged(kept);
  std::vector<Node> rebuilt(kept + 1);
  const double ceiling_ms = 2.0 * moved / 4.25e12 * 1e3;

  auto walk = [&] {
    std::uint64_t to = 0;
    std::size_t count = 0;
    for (std::uint32_t id = 0; id != ~0u; id = nodes[id].next) {
      const Node& node = nodes[id];
      if (node.free) continue;
      staged[count++] = {node.offset, to, node.bytes};
      to += node.bytes;
    }
  };
  auto update_range = [&](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) {
      const Move& move = staged[i];
      const std::uint32_t tag = static_cast<std::uint32_t>(2 * i + 1);
      rebuilt[i] = {move.to, move.bytes, static_cast<std::uint32_t>(i - 1), static_cast<std::uint32_t>(i + 1), 0, 0,
                    tag, 0, false, true};
      slots[tag].offset = move.to;
      slots[tag].block = static_cast<std::uint32_t>(i);
    }
  };
  // The walk split over threads: each sums its range's kept bytes, then writes its moves from its
  // prefix (the nodes as an array in address order).
  std::vector<std::uint64_t> sums(threads + 1), firsts(threads + 1);
  auto parallel_walk = [&] {
    workers.run([&](unsigned t) {
      const auto [begin, end] = workers.share(t, nodes.size());
      std::uint64_t sum = 0, count = 0;
      for (std::size_t i = begin; i < end; ++i)
        if (!nodes[i].free) sum += nodes[i].bytes, ++count;
      sums[t + 1] = sum;
      firsts[t + 1] = count;
    });
    for (unsigned t = 0; t < threads; ++t) sums[t + 1] += sums[t], firsts[t + 1] += firsts[t];
    workers.run([&](unsigned t) {
      const auto [begin, end] = workers.share(t, nodes.size());
      std::uint64_t to = sums[t];
      std::size_t count = firsts[t];
      for (std::size_t i = begin; i < end; ++i) {
        if (nodes[i].free) continue;
        staged[count++] = {nodes[i].offset, to, nodes[i].bytes};
        to += nodes[i].bytes;
      }
    });
  };
  auto parallel_update = [&] {
    workers.run([&](unsigned t) {
      const auto [begin, end] = workers.share(t, kept);
      update_range(begin, end);
    });
  };
  std::printf("layout (b): %zu kept blocks, %.1f MiB moved; copy ceiling %.3f ms (4.25 TB/s); goal: end to end <= %.3f ms\n",
              kept, moved / 1048576.0, ceiling_ms, ceiling_ms / 0.7);
  for (bool cold : {false, true}) {
    const double w = median_ms(workers, cold, walk), u = median_ms(workers, cold, [&] { update_range(0, kept); });
    const double pw = median_ms(workers, cold, parallel_walk), pu = median_ms(workers, cold, parallel_update);
    std::printf("%s caches: 1 thread: walk %.3f ms (%.1f ns a block), update %.3f ms (%.1f ns); "
                "%u threads: walk %.3f ms, update %.3f ms\n",
                cold ? "cold" : "warm", w, w * 1e6 / kept, u, u * 1e6 / kept, threads, pw, pu);
  }
  std::uint64_t check = 0;
  for (const Slot& slot : slots) check += slot.offset;
  std::printf("(checksum %llu)\n", static_cast<unsigned long long>(check));
}
