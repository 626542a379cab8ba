#pragma once
// Test data: a byte pattern derived from a key, written into and checked against pool buffers.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include <vramkit/pool.hpp>

namespace vramkit_test {

/// bytes of a pattern that differs for every key and every position (a 64-bit LCG stream,
/// 8 bytes a step).
inline std::vector<std::byte> pattern(std::uint64_t key, std::uint64_t bytes) {
  std::vector<std::byte> data(bytes);
  std::uint64_t state = key * 0x9E3779B97F4A7C15ull + 1;
  for (std::uint64_t i = 0; i < bytes; i += 8) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const std::uint64_t word = state ^ (state >> 29);
    std::memcpy(data.data() + i, &word, std::min<std::uint64_t>(8, bytes - i));
  }
  return data;
}

inline void write_pattern(vramkit::Pool& pool, vramkit::Handle handle, std::uint64_t key) {
  pool.write(handle, pattern(key, pool.size(handle)));
}

inline bool holds_pattern(const vramkit::Pool& pool, vramkit::Handle handle, std::uint64_t key) {
  std::vector<std::byte> data(pool.size(handle));
  pool.read(handle, data);
  return data == pattern(key, data.size());
}

}  // namespace vramkit_test
