#pragma once
// Test data: a byte pattern derived from a key, written into and checked against pool buffers.
#include <cstdint>
#include <vector>

#include <vramkit/pool.hpp>

namespace vramkit_test {

/// bytes of a pattern that differs for every key and every position (a 64-bit LCG stream).
inline std::vector<std::byte> pattern(std::uint64_t key, std::uint64_t bytes) {
  std::vector<std::byte> data(bytes);
  std::uint64_t state = key * 0x9E3779B97F4A7C15ull + 1;
  for (auto& value : data) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    value = static_cast<std::byte>(state >> 56);
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
