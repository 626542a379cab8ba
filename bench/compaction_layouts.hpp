#pragma once
// The compaction benchmark's layouts: buffers that stay, each after a gap that is freed before the
// compaction. Shared by vramkit_compaction_bench and vramkit_compaction_timeline.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace vramkit_bench {

struct Layout {
  std::string name;
  std::vector<std::uint64_t> keep;  // sizes of the buffers that stay
  std::vector<std::uint64_t> gap;   // bytes freed before each kept buffer
};

inline std::uint64_t round256(double bytes) { return (static_cast<std::uint64_t>(bytes) + 255) / 256 * 256; }

inline Layout random_layout(std::string name, std::size_t count, double low, double high, double scale, unsigned seed) {
  std::mt19937 random(seed);
  std::uniform_real_distribution<double> exponent(std::log(low), std::log(high));
  Layout layout{std::move(name), {}, {}};
  const auto scaled = static_cast<std::size_t>(std::max(1.0, count * scale));
  for (std::size_t i = 0; i < scaled; ++i) {
    layout.gap.push_back(round256(std::exp(exponent(random))));  // 50% of the space free between them
    layout.keep.push_back(round256(std::exp(exponent(random))));
  }
  return layout;
}

inline Layout sliding_layout(double scale) {
  Layout layout{"16 x 64 MiB sliding by 1..16 MiB", {}, {}};
  const std::uint64_t block = std::max<std::uint64_t>(round256(64.0 * (1 << 20) * scale), 4096);
  for (int i = 0; i < 16; ++i) {
    layout.gap.push_back(std::max<std::uint64_t>(round256((1 << 20) * scale), 256));
    layout.keep.push_back(block);
  }
  return layout;
}

/// The layout allocated in `pool`, just emptied: each gap, then the buffer kept after it, so that
/// they lie in that order. Returns the kept buffers' handles, then the gaps'.
template <class Pool>
auto allocate_layout(Pool& pool, const Layout& layout) {
  using Handle = decltype(pool.allocate(std::uint64_t{1}));
  std::pair<std::vector<Handle>, std::vector<Handle>> placed;
  placed.first.reserve(layout.keep.size());
  placed.second.reserve(layout.gap.size());
  for (std::size_t i = 0; i < layout.keep.size(); ++i) {
    placed.second.push_back(pool.allocate(layout.gap[i]));
    placed.first.push_back(pool.allocate(layout.keep[i]));
  }
  return placed;
}

inline void fill_words(std::vector<std::uint64_t>& words, std::uint64_t key) {
  for (std::size_t i = 0; i < words.size(); ++i) words[i] = (key << 40) ^ (i * 0x9E3779B97F4A7C15ull);
}

}  // namespace vramkit_bench
