// The installed vramkit from a downstream project: a pool on the host device, an allocation, a
// round trip of bytes, a compaction; and the CCCL adapter's header compiles. Exits 0 when everything behaves.
#include <cstdio>
#include <cstring>
#include <vector>

#include <vramkit/cccl_resource.hpp>  // needs CCCL through the installed package's dependencies
#include <vramkit/host_device.hpp>
#include <vramkit/pool.hpp>
#include <vramkit/units.hpp>

static_assert(vramkit::cccl_resource_concept_satisfied);

int main() {
  using namespace vramkit;
  Pool pool({.capacity_bytes = 1_MiB}, make_host_device());
  const Handle spacer = pool.allocate(4_KiB);
  const Handle buffer = pool.allocate(64_KiB);
  std::vector<std::byte> written(64_KiB, std::byte{0x5a}), read(64_KiB);
  pool.write(buffer, written);
  pool.free(spacer);
  const CompactionReport report = pool.compact();
  pool.read(buffer, read);
  pool.check_invariants();
  const bool ok = read == written && report.blocks_moved == 1 && pool.statistics().live_allocations == 1;
  pool.free(buffer);
  std::printf("vramkit consumer: %s (moved %llu block(s))\n", ok ? "ok" : "FAILED",
              static_cast<unsigned long long>(report.blocks_moved));
  return ok ? 0 : 1;
}
