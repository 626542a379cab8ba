// Trace replay: the reader's errors (with line numbers), exact figures on a small synthetic trace, and
// the two shared PyTorch traces replayed at a fixed capacity without a failed request.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <sstream>
#include <string>

#include <vramkit/errors.hpp>
#include <vramkit/trace_replay.hpp>
#include <vramkit/units.hpp>

using namespace vramkit;

namespace {

Trace parse(const std::string& text) {
  std::istringstream input(text);
  return read_trace(input, "test.csv");
}

std::string error_of(const std::string& text) {
  try {
    parse(text);
  } catch (const vramkit::invalid_argument& error) {
    return error.what();
  }
  return "no error";
}

constexpr std::uint64_t MiB = 1ull << 20;

// A, B, C of 1 MiB; B freed; D of 2 MiB. Peak live 4 MiB. Without moving, D finds two separate
// 1 MiB holes in 4 MiB, so it needs 5 MiB; moving C (1 MiB) into B's hole serves it in 4 MiB.
const std::string three_and_a_hole =
    "op,id,size,stream\n"
    "a,10,1048576,0\n"
    "a,11,1048576,0\n"
    "a,12,1048576,0\n"
    "f,11,,0\n"
    "a,13,2097152,0\n"
    "f,10,1048576,0\n"
    "f,12,1048576,0\n"
    "f,13,2097152,0\n";

// The shared traces folder, or nothing (with a warning) when it is missing and the run does not
// require it: a clone away from shared/ (a new user's) still passes; CI sets VRAMKIT_REQUIRE_TRACES.
std::optional<std::filesystem::path> traces_dir() {
#ifndef VRAMKIT_TRACES_DIR
  FAIL("VRAMKIT_TRACES_DIR is not defined (tests/CMakeLists.txt sets it to shared/traces)");
  return {};
#else
  const std::filesystem::path dir = VRAMKIT_TRACES_DIR;
  if (std::filesystem::is_directory(dir)) return dir;
  if (std::getenv("VRAMKIT_REQUIRE_TRACES") != nullptr) {
    FAIL("the shared traces folder " << dir.string()
                                     << " is missing; CI must check out shared/ beside the repository");
  }
  WARN("the shared traces folder " << dir.string()
                                   << " is missing: the trace replays did not run (configure with "
                                      "-DVRAMKIT_TRACES_DIR=..., or set VRAMKIT_REQUIRE_TRACES to make this a failure)");
  return std::nullopt;
#endif
}

std::uint64_t capacity_at(const Trace& trace, double factor) {
  const auto bytes = static_cast<std::uint64_t>(static_cast<double>(trace.peak_live_bytes) * factor);
  return (bytes + MiB - 1) / MiB * MiB;
}

}  // namespace

TEST_CASE("trace reader parses requests, dense allocation indices and the peak live bytes", "[replay]") {
  const Trace trace = parse(three_and_a_hole);
  REQUIRE(trace.requests.size() == 8);
  CHECK(trace.allocations == 4);
  CHECK(trace.peak_live_bytes == 4 * MiB);
  CHECK(trace.allocated_bytes == 5 * MiB);
  CHECK(trace.requests[3].op == TraceOp::free);
  CHECK(trace.requests[3].allocation == 1);
  CHECK(trace.requests[3].bytes == MiB);
  CHECK(trace.requests[4].id == 13);
}

TEST_CASE("trace reader names the line of each malformed input", "[replay]") {
  CHECK_THAT(error_of(""), Catch::Contains("empty trace"));
  CHECK_THAT(error_of("op,id,bytes\n"), Catch::Contains("test.csv:1:") && Catch::Contains("header"));
  CHECK_THAT(error_of("op,id,size,stream\na,0,16,0\nx,1,16,0\n"), Catch::Contains("test.csv:3:"));
  CHECK_THAT(error_of("op,id,size,stream\na,0,16,0\na,1,16\n"),
             Catch::Contains("test.csv:3:") && Catch::Contains("4 fields"));
  CHECK_THAT(error_of("op,id,size,stream\na,0,16,0,9\n"), Catch::Contains("test.csv:2:"));
  CHECK_THAT(error_of("op,id,size,stream\na,0,12x,0\n"),
             Catch::Contains("test.csv:2:") && Catch::Contains("12x"));
  CHECK_THAT(error_of("op,id,size,stream\na,0,-16,0\n"),
             Catch::Contains("test.csv:2:") && Catch::Contains("negative"));
  CHECK_THAT(error_of("op,id,size,stream\na,0,0,0\n"),
             Catch::Contains("test.csv:2:") && Catch::Contains("size 0"));
  CHECK_THAT(error_of("op,id,size,stream\na,0,281474976710657,0\n"),
             Catch::Contains("test.csv:2:") && Catch::Contains("2^48"));
  CHECK_THAT(error_of("op,id,size,stream\na,0,99999999999999999999999,0\n"), Catch::Contains("out of range"));
}

TEST_CASE("trace reader rejects a double free, a free of an unknown id and a duplicate id", "[replay]") {
  CHECK_THAT(error_of("op,id,size,stream\na,7,16,0\nf,7,16,0\nf,7,16,0\n"),
             Catch::Contains("test.csv:4:") && Catch::Contains("double free of id 7"));
  CHECK_THAT(error_of("op,id,size,stream\na,7,16,0\nf,8,16,0\n"),
             Catch::Contains("test.csv:3:") && Catch::Contains("unknown id 8"));
  CHECK_THAT(error_of("op,id,size,stream\na,7,16,0\na,7,16,0\n"),
             Catch::Contains("test.csv:3:") && Catch::Contains("duplicate allocation of id 7"));
  CHECK_THROWS_AS(read_trace_file("/nonexistent/trace.csv"), vramkit::invalid_argument);
}

TEST_CASE("virtual replay of a synthetic trace gives the exact footprint under each policy", "[replay]") {
  const Trace trace = parse(three_and_a_hole);
  SECTION("none needs a second MiB for the 2 MiB request") {
    const FootprintResult found = find_footprint(trace, {.policy = ReplayPolicy::none});
    CHECK(found.footprint_bytes == 5 * MiB);
    CHECK(found.replay.failed_requests == 0);
    CHECK(found.replay.compactions == 0);
  }
  SECTION("on-failure serves it in the peak live bytes by moving one 1 MiB block") {
    const FootprintResult found = find_footprint(trace, {.policy = ReplayPolicy::on_failure});
    CHECK(found.footprint_bytes == 4 * MiB);
    CHECK(found.replay.compactions == 1);
    CHECK(found.replay.bytes_moved == MiB);
    CHECK(found.replay.moved_ratio() == Approx(0.2));
  }
  SECTION("the full-compaction baseline also serves it in 4 MiB") {
    const FootprintResult found =
        find_footprint(trace, {.policy = ReplayPolicy::on_failure, .failure_mode = FailureMode::full});
    CHECK(found.footprint_bytes == 4 * MiB);
    CHECK(found.replay.compactions == 1);
  }
  SECTION("at a fixed capacity a request that finds no block is counted and its free skipped") {
    const ReplayResult result = replay(trace, {.capacity_bytes = 4 * MiB, .policy = ReplayPolicy::none});
    CHECK(result.failed_requests == 1);
    CHECK(result.success_rate() == Approx(0.75));
    CHECK(result.allocated_bytes == 3 * MiB);
  }
}

TEST_CASE("threshold replay compacts after the free that fragments the pool, on the trace clock",
          "[replay]") {
  // After B's free, 2 MiB are free in two 1 MiB pieces: fragmentation 0.5 > 0.3. The policy's full
  // compaction slides C down, so D fits without an on-failure compaction.
  const Trace trace = parse(three_and_a_hole);
  const ReplayResult result = replay(trace, {.capacity_bytes = 4 * MiB, .policy = ReplayPolicy::threshold});
  CHECK(result.failed_requests == 0);
  CHECK(result.compactions == 1);
  CHECK(result.bytes_moved == MiB);
  SECTION("without a failing request, only the threshold policy compacts") {
    const Trace no_request =
        parse("op,id,size,stream\na,1,1048576,0\na,2,1048576,0\na,3,1048576,0\nf,2,,0\n");
    CHECK(replay(no_request, {.capacity_bytes = 4 * MiB, .policy = ReplayPolicy::threshold}).compactions ==
          1);
    CHECK(replay(no_request, {.capacity_bytes = 4 * MiB, .policy = ReplayPolicy::on_failure}).compactions ==
          0);
    CHECK(
        replay(no_request,
               {.capacity_bytes = 4 * MiB, .policy = ReplayPolicy::threshold, .fragmentation_threshold = 0.6})
            .compactions == 0);
  }
}

TEST_CASE("host replay with verification checks patterns through a compaction", "[replay]") {
  const Trace trace = parse(three_and_a_hole);
  const ReplayResult result = replay(trace, {.capacity_bytes = 4 * MiB,
                                             .policy = ReplayPolicy::on_failure,
                                             .device = DeviceChoice::host,
                                             .verify = true});
  CHECK(result.failed_requests == 0);
  CHECK(result.compactions == 1);
  CHECK(result.verified);
  CHECK_THROWS_AS(replay(trace, {.capacity_bytes = 4 * MiB, .verify = true}), vramkit::invalid_argument);
}

// The traces' peak live bytes: resnet_train 5.6 GiB, too much host memory for CI, so it replays on the
// virtual device; image_pipeline (509 MiB) replays on the host device with every byte verified.
TEST_CASE("both shared PyTorch traces replay at 1.05x peak live without a failed request",
          "[replay][traces]") {
  const std::optional<std::filesystem::path> found = traces_dir();
  if (!found) return;
  const std::filesystem::path& dir = *found;
  SECTION("resnet_train, virtual device") {
    const Trace trace = read_trace_file(dir / "resnet_train.csv");
    const ReplayResult result =
        replay(trace, {.capacity_bytes = capacity_at(trace, 1.05), .policy = ReplayPolicy::on_failure});
    CHECK(result.requests == 41189);
    CHECK(result.failed_requests == 0);
  }
  SECTION("image_pipeline, host device, verified") {
    const Trace trace = read_trace_file(dir / "image_pipeline.csv");
    const ReplayResult result = replay(trace, {.capacity_bytes = capacity_at(trace, 1.05),
                                               .policy = ReplayPolicy::on_failure,
                                               .device = DeviceChoice::host,
                                               .verify = true});
    CHECK(result.requests == 15824);
    CHECK(result.failed_requests == 0);
    CHECK(result.verified);
  }
}
