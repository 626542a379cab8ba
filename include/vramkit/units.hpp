#pragma once
// Byte-count literals (64_MiB) and a formatter that writes byte counts the way people read them.
#include <cstdint>
#include <string>

namespace vramkit {

constexpr std::uint64_t operator""_KiB(unsigned long long value) { return value << 10; }
constexpr std::uint64_t operator""_MiB(unsigned long long value) { return value << 20; }
constexpr std::uint64_t operator""_GiB(unsigned long long value) { return value << 30; }

/// "3 GiB", "1.50 MiB", "256 B": exact integers print without decimals.
std::string format_bytes(std::uint64_t bytes);

}  // namespace vramkit
