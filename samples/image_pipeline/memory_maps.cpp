#include "memory_maps.hpp"

#include <fstream>

#if VRAMKIT_SAMPLES_HAVE_METRICS
#include <vramkit/memory_map.hpp>
#endif

bool write_memory_map(const vramkit::Pool& pool, const std::filesystem::path& path,
                      const std::string& title) {
#if VRAMKIT_SAMPLES_HAVE_METRICS
  std::ofstream(path) << vramkit::memory_map_svg(pool, title);
  return true;
#else
  (void)pool, (void)path, (void)title;
  return false;
#endif
}
