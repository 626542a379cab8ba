#include <vramkit/units.hpp>

#include <cstdio>

namespace vramkit {

std::string format_bytes(std::uint64_t bytes) {
  static constexpr const char* names[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  unsigned unit = 0;
  while (unit + 1 < std::size(names) && bytes >= (std::uint64_t{1} << (10 * (unit + 1)))) ++unit;
  const std::uint64_t scale = std::uint64_t{1} << (10 * unit);
  char text[48];
  if (bytes % scale == 0) {
    std::snprintf(text, sizeof text, "%llu %s", static_cast<unsigned long long>(bytes / scale), names[unit]);
  } else {
    std::snprintf(text, sizeof text, "%.2f %s", static_cast<double>(bytes) / static_cast<double>(scale),
                  names[unit]);
  }
  return text;
}

}  // namespace vramkit
