// Stream uses recorded at unpin and release: a use is kept until its work is known to have ended,
// and no longer than that, so that a buffer pinned and unpinned on a stream batch after batch (no
// free, no compaction between) does not gather one recorded use a batch. The device here hands out
// tokens and says which have ended, as the CUDA device does with events.
#include <cstdint>
#include <set>

#include <catch2/catch.hpp>

#include <vramkit/errors.hpp>
#include <vramkit/pool.hpp>
#include <vramkit/units.hpp>

#include "support/forwarding_device.hpp"

using namespace vramkit;

namespace {

class UseTracker final : public vramkit_test::ForwardingDevice {
 public:
  UseToken ended_through = 0;    ///< Every token up to this one has ended.
  std::set<UseToken> recorded;   ///< Recorded and not forgotten.
  std::set<UseToken> waited;     ///< Passed to host_wait or order_after.
  std::set<UseToken> forgotten_early;  ///< Forgotten before it ended and without a host wait.

  UseToken record_use_end(Stream) override {
    recorded.insert(++last_);
    return last_;
  }
  bool use_ended(UseToken token) override { return token <= ended_through; }
  bool fail_waits = false;       ///< host_wait throws device_error, as a failed cudaEventSynchronize.

  void host_wait(UseToken token) override {
    if (fail_waits) throw device_error("injected: the wait for a stream use failed");
    waited.insert(token);
  }
  void order_after(UseToken token) override { waited.insert(token); }  // the moves wait for it
  void forget(UseToken token) noexcept override {
    if (token > ended_through && !waited.contains(token)) forgotten_early.insert(token);
    recorded.erase(token);
  }
  UseToken last() const { return last_; }

 private:
  UseToken last_ = 0;
};

const Stream stream = reinterpret_cast<Stream>(std::uintptr_t{0x40});

}  // namespace

TEST_CASE("a buffer unpinned on a stream batch after batch keeps only the uses still in flight", "[pool][streams]") {
  auto device = std::make_shared<UseTracker>();
  Pool pool({.capacity_bytes = 1_MiB}, device);
  const Handle buffer = pool.allocate(4096);
  std::size_t most = 0;
  for (int batch = 0; batch < 10'000; ++batch) {
    pool.pin(buffer);
    pool.unpin(buffer, stream);
    // The stream runs three batches behind the host.
    device->ended_through = device->last() > 3 ? device->last() - 3 : 0;
    most = std::max(most, device->recorded.size());
  }
  CHECK(device->last() == 10'000);
  CHECK(most <= 128);  // bounded: not one use a batch
  CHECK(device->forgotten_early.empty());
  // The three uses in flight are still recorded, and freeing the buffer waits for them.
  for (UseToken token = device->last() - 2; token <= device->last(); ++token) CHECK(device->recorded.contains(token));
  pool.free(buffer);
  for (UseToken token = device->last() - 2; token <= device->last(); ++token) CHECK(device->waited.contains(token));
  CHECK(device->recorded.empty());
  CHECK(device->forgotten_early.empty());
}

TEST_CASE("recorded uses whose work has not ended are never forgotten", "[pool][streams]") {
  auto device = std::make_shared<UseTracker>();
  Pool pool({.capacity_bytes = 1_MiB}, device);
  const Handle kept = pool.allocate(4096);
  const Handle released = pool.allocate(4096);
  for (int batch = 0; batch < 1'000; ++batch) {
    pool.pin(kept);
    pool.unpin(kept, stream);
  }
  CHECK(device->recorded.size() == 1'000);
  // A release on the stream is a use too: the memory is reused only after it, and after the
  // unpin's. Freeing waits for both.
  pool.pin(released);
  CHECK(pool.release(released, stream));  // freed when its pin ends
  pool.unpin(released, stream);
  CHECK(device->waited == std::set<UseToken>{1'001, 1'002});
  CHECK(device->recorded.size() == 1'000);
  CHECK(device->forgotten_early.empty());
  // A compaction orders its moves after every use, then forgets them all.
  pool.compact();
  CHECK(device->recorded.empty());
  // Uses that end are forgotten by the sweeps that later uses start.
  device->ended_through = UINT64_MAX;
  for (int batch = 0; batch < 1'000; ++batch) {
    pool.pin(kept);
    pool.unpin(kept, stream);
  }
  CHECK(device->recorded.size() <= 64);
  pool.free(kept);
  CHECK(device->recorded.empty());
  CHECK(device->forgotten_early.empty());
}

TEST_CASE("an unpin whose deferred free cannot wait for the stream changes nothing and can be tried again",
          "[pool][streams]") {
  auto device = std::make_shared<UseTracker>();
  Pool pool({.capacity_bytes = 1_MiB}, device);
  const Handle buffer = pool.allocate(4096);
  pool.pin(buffer);
  REQUIRE(pool.release(buffer, stream));  // the owner lets go while a kernel still has it pinned
  device->fail_waits = true;
  CHECK_THROWS_AS(pool.unpin(buffer), device_error);
  CHECK(pool.valid(buffer));
  CHECK(pool.statistics().pinned_allocations == 1);
  CHECK(pool.statistics().live_allocations == 1);
  device->fail_waits = false;
  pool.unpin(buffer);  // the last pin: frees it, after the wait
  CHECK_FALSE(pool.valid(buffer));
  CHECK(pool.statistics().pinned_allocations == 0);
  CHECK(pool.statistics().live_allocations == 0);
  CHECK(device->recorded.empty());
  CHECK(device->forgotten_early.empty());
  pool.check_invariants();
}
