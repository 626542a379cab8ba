// RAII types: DeviceBuffer<T>, Pinned<T>, Image<T> on the host device.
#include <catch2/catch.hpp>

#include <numeric>

#include <vramkit/device_buffer.hpp>
#include <vramkit/host_device.hpp>
#include <vramkit/image.hpp>
#include <vramkit/units.hpp>

using namespace vramkit;

TEST_CASE("DeviceBuffer frees its block when destroyed and round-trips its elements", "[buffers]") {
  Pool pool({.capacity_bytes = 1_MiB}, make_host_device());
  {
    std::vector<float> values(1000);
    std::iota(values.begin(), values.end(), 0.5f);
    DeviceBuffer<float> buffer(pool, values);
    CHECK(buffer.size() == 1000);
    CHECK(buffer.bytes() == 4000);
    CHECK(pool.statistics().live_allocations == 1);
    CHECK(buffer.to_vector() == values);
    std::vector<float> middle(10);
    buffer.download(middle, 500);
    CHECK(middle[0] == 500.5f);
  }
  CHECK(pool.statistics().live_allocations == 0);
}

TEST_CASE("a moved-from DeviceBuffer is empty and its handle no longer works; the target owns the block", "[buffers]") {
  Pool pool({.capacity_bytes = 1_MiB}, make_host_device());
  DeviceBuffer<int> source(pool, 64);
  const Handle handle = source.handle();
  DeviceBuffer<int> target = std::move(source);
  CHECK(source.empty());
  CHECK(source.handle().empty());
  CHECK_THROWS_AS(source.pin(), invalid_handle);
  CHECK(target.handle() == handle);
  DeviceBuffer<int> other(pool, 32);
  other = std::move(target);  // frees other's old block
  CHECK(pool.statistics().live_allocations == 1);
  CHECK(pool.valid(handle));
}

TEST_CASE("an empty DeviceBuffer holds no block; out-of-range and overflowing requests are refused", "[buffers][errors]") {
  Pool pool({.capacity_bytes = 1_MiB}, make_host_device());
  DeviceBuffer<double> empty(pool, 0);
  CHECK(empty.empty());
  CHECK(pool.statistics().live_allocations == 0);
  DeviceBuffer<double> buffer(pool, 10);
  std::vector<double> eleven(11);
  CHECK_THROWS_AS(buffer.upload(eleven), vramkit::invalid_argument);
  CHECK_THROWS_WITH(buffer.download(gsl::span<double>(eleven).first(5), 6), Catch::Contains("[6, 11)"));
  CHECK_THROWS_AS(DeviceBuffer<double>(pool, SIZE_MAX / 4), vramkit::invalid_argument);
}

TEST_CASE("Pinned yields the device pointer and a cuda::std::span and unpins at scope exit", "[buffers]") {
  Pool pool({.capacity_bytes = 1_MiB}, make_host_device());
  DeviceBuffer<int> buffer(pool, 100);
  {
    auto pinned = buffer.pin();
    CHECK(pool.statistics().pinned_allocations == 1);
    CHECK(pinned.span().size() == 100);
    CHECK(reinterpret_cast<std::uint64_t>(pinned.data()) == pool.address(buffer.handle()));
    for (int i = 0; i < 100; ++i) pinned.data()[i] = i * 3;  // host device memory is host-addressable
    CHECK_THROWS_AS(pool.free(buffer.handle()), state_error);
  }
  CHECK(pool.statistics().pinned_allocations == 0);
  CHECK(buffer.to_vector()[99] == 297);
}

TEST_CASE("Image pads rows to the pitch and round-trips packed pixels", "[buffers]") {
  Pool pool({.capacity_bytes = 4_MiB}, make_host_device());
  Image<std::uint8_t> image(pool, 300, 7);
  CHECK(image.pitch_bytes() == 512);
  CHECK(image.bytes() == 512 * 7);
  std::vector<std::uint8_t> pixels(300 * 7);
  for (std::size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<std::uint8_t>(i * 7 + 1);
  image.upload(pixels);
  CHECK(image.to_vector() == pixels);
  {
    auto pinned = image.pin();
    CHECK(pinned.view.at(5, 3) == pixels[3 * 300 + 5]);
  }
  CHECK_THROWS_AS(Image<float>(pool, 0, 5), vramkit::invalid_argument);
  CHECK_THROWS_AS(image.upload(std::vector<std::uint8_t>(10)), vramkit::invalid_argument);
}

TEST_CASE("an Image's rows start at multiples of its row alignment, before and after compaction", "[buffers]") {
  Pool pool({.capacity_bytes = 4_MiB}, make_host_device());
  DeviceBuffer<std::byte> small(pool, 256);  // the next block would start 256 bytes in
  DeviceBuffer<std::byte> gap(pool, 5000);
  Image<float> image(pool, 100, 4, 4096);
  CHECK(image.pitch_bytes() == 4096);
  std::vector<float> pixels(400);
  std::iota(pixels.begin(), pixels.end(), 0.5f);
  image.upload(pixels);
  const auto rows_aligned = [&] {
    auto pinned = image.pin();
    for (std::uint32_t y = 0; y < 4; ++y) {
      if (reinterpret_cast<std::uintptr_t>(pinned.view.row(y)) % 4096 != 0) return false;
    }
    return true;
  };
  CHECK(rows_aligned());
  gap = DeviceBuffer<std::byte>();
  CHECK(pool.compact().blocks_moved >= 1);
  CHECK(rows_aligned());
  CHECK(image.to_vector() == pixels);
  CHECK_THROWS_WITH(Image<float>(pool, 4, 4, 4_MiB), Catch::Contains("4194304"));
}
