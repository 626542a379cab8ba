// The image pipeline sample: batches of photos of different sizes through
// decode -> gray -> blur -> edges -> equalize -> resize on a vramkit pool.
//
//   image_pipeline [FOLDER] [--output DIR] [--images N] [--batch N] [--pool-mib N] [--device auto|cuda|host]
//
// FOLDER: images to read (PNG, JPEG, PPM/PGM, ...); without it, N deterministic synthetic photos
// (640x480 .. 3000x2000). Each batch declares its stage plan and checks it against the pool before
// its first image; results stay in the pool for two batches (a result cache), so images of
// different sizes leave holes; pool.compact() runs between batches. Writes the 512x512 results as
// PNGs, the plan diagram of each batch and memory maps before/after each compaction into DIR.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <vramkit/vramkit.hpp>

#include "image_io.hpp"
#include "image_ops.hpp"
#include "pipeline.hpp"
#include "synthetic.hpp"

using namespace vramkit;
namespace fs = std::filesystem;

namespace {

struct Arguments {
  std::string input_folder;
  fs::path output = "out";
  std::size_t images = 12;
  std::size_t batch = 4;
  std::uint64_t pool_mib = 48;
  DeviceChoice device = DeviceChoice::automatic;
};

[[noreturn]] void usage(const char* problem) {
  std::fprintf(stderr,
               "%s\nusage: image_pipeline [FOLDER] [--output DIR] [--images N] [--batch N] [--pool-mib N] "
               "[--device auto|cuda|host]\n",
               problem);
  std::exit(2);
}

Arguments parse(int argc, char** argv) {
  Arguments arguments;
  for (int i = 1; i < argc; ++i) {
    const std::string argument = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(("missing value after " + argument).c_str());
      return argv[++i];
    };
    if (argument == "--output")
      arguments.output = value();
    else if (argument == "--images")
      arguments.images = std::stoul(value());
    else if (argument == "--batch")
      arguments.batch = std::stoul(value());
    else if (argument == "--pool-mib")
      arguments.pool_mib = std::stoull(value());
    else if (argument == "--device") {
      const std::string device = value();
      if (device == "auto")
        arguments.device = DeviceChoice::automatic;
      else if (device == "cuda")
        arguments.device = DeviceChoice::cuda;
      else if (device == "host")
        arguments.device = DeviceChoice::host;
      else
        usage(("unknown device " + device).c_str());
    } else if (argument == "--help" || argument == "-h")
      usage("");
    else if (!argument.empty() && argument[0] == '-')
      usage(("unknown option " + argument).c_str());
    else
      arguments.input_folder = argument;
  }
  if (arguments.batch == 0) usage("--batch must be at least 1");
  return arguments;
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream(path) << text;
}

/// A result kept in the pool after its batch (a result cache), and a per-image preview: both outlive the
/// batch and are freed later, leaving holes of many sizes.
struct Kept {
  Image<std::uint8_t> result;
  DeviceBuffer<std::uint8_t> preview;
  std::size_t batch = 0;
};

}  // namespace

int main(int argc, char** argv) try {
  const Arguments arguments = parse(argc, argv);
  fs::create_directories(arguments.output);

  std::vector<synthetic::NamedPhoto> photos = arguments.input_folder.empty()
                                                  ? synthetic::default_set(arguments.images)
                                                  : image_io::read_folder(arguments.input_folder);
  if (photos.empty()) usage("no images to process");
  std::printf("%zu images from %s\n", photos.size(),
              arguments.input_folder.empty() ? "the synthetic default set" : arguments.input_folder.c_str());

  Pool pool({.capacity_bytes = arguments.pool_mib << 20}, make_device(arguments.device));
  const image_ops::Executor executor = image_ops::executor_for(pool.device());
  std::printf("device: %s; operations run with %s%s\n", pool.device().name().c_str(),
              image_ops::to_string(executor),
              pool.device().kind() == DeviceKind::host ? " (no GPU found: the host device stands in)" : "");
  std::printf("pool: %s\n\n", format_bytes(pool.statistics().reserved_bytes).c_str());

  pipeline::LongLivedBuffers long_lived(pool);
  std::deque<Kept> kept;
  std::size_t batch_number = 0;
  bool prepared = false;  // for compaction (Pool::prepare_compaction), once
  for (std::size_t first = 0; first < photos.size(); first += arguments.batch, ++batch_number) {
    const std::size_t last = std::min(photos.size(), first + arguments.batch);
    const auto batch_start = std::chrono::steady_clock::now();

    // Declare the batch's plan (for its largest image) and check it before the first image.
    std::uint32_t width = 0, height = 0;
    for (std::size_t i = first; i < last; ++i) {
      if (std::uint64_t{photos[i].width} * photos[i].height > std::uint64_t{width} * height) {
        width = photos[i].width, height = photos[i].height;
      }
    }
    const MemoryPlan plan = pipeline::make_image_plan(width, height);
    const PlanSolution solution = solve(plan);
    write_text(arguments.output / ("plan_batch" + std::to_string(batch_number) + ".svg"),
               to_svg(plan, solution));
    FitReport fit = check_fit(solution, pool);
    std::printf(
        "batch %zu: %zu images, largest %ux%u; plan peak %s (lower bound %s), largest free block %s: %s\n",
        batch_number, last - first, width, height, format_bytes(solution.peak_bytes).c_str(),
        format_bytes(solution.lower_bound_bytes).c_str(), format_bytes(fit.available_bytes).c_str(),
        fit.fits ? "fits" : "does not fit");
    if (!fit.fits) {
      std::printf("%s", to_text(fit).c_str());
      const CompactionReport hole =
          pool.compact({.goal = CompactGoal::hole, .hole_bytes = solution.peak_bytes});
      fit = check_fit(solution, pool);
      std::printf("  made a hole: moved %s; now %s\n", format_bytes(hole.bytes_moved).c_str(),
                  fit.fits ? "fits" : "still does not fit; skipping the batch");
      if (!fit.fits) continue;
    }

    for (std::size_t i = first; i < last; ++i) {
      const synthetic::NamedPhoto& photo = photos[i];
      // A half-resolution preview made at upload (a stand-in for per-image metadata a service
      // keeps): allocated before the stages, it ends up between their buffers.
      DeviceBuffer<std::uint8_t> preview(pool, std::size_t{photo.width} * photo.height / 4 + 1);
      Image<std::uint8_t> result = pipeline::process(pool, executor, long_lived, photo);
      image_io::write_gray_png(arguments.output / (photo.name + "_edges.png"), result.width(),
                               result.height(), result.to_vector());
      kept.push_back({std::move(result), std::move(preview), batch_number});
    }
    const double processing_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - batch_start).count();

    // Between batches: results two batches old leave the cache, and every other preview of this
    // batch goes too; then compact.
    while (!kept.empty() && kept.front().batch + 2 <= batch_number) kept.pop_front();
    for (std::size_t i = 0; i < kept.size(); ++i) {
      if (kept[i].batch == batch_number && i % 2 == 0) kept[i].preview.reset();
    }
    const PoolStatistics before = pool.statistics();
    const std::string stem =
        (arguments.output / ("memory_map_batch" + std::to_string(batch_number))).string();
    write_text(stem + "_before.svg",
               memory_map_svg(pool, "batch " + std::to_string(batch_number) + ": before compact()"));
    // A pool's first full compaction takes host buffers, threads and device scratch that it keeps
    // for the next ones: taken here, outside the batches' timings, for the buffers live now.
    if (!prepared) pool.prepare_compaction();
    prepared = true;
    const CompactionReport report = pool.compact();
    write_text(stem + "_after.svg",
               memory_map_svg(pool, "batch " + std::to_string(batch_number) + ": after compact()"));
    pool.check_invariants();
    std::printf(
        "  processed in %.2f s; %zu live buffers (%s) in %zu free ranges\n"
        "  compact(): fragmentation %.2f -> %.2f, largest free block %s -> %s, moved %llu blocks (%s) in "
        "%.2f ms\n\n",
        processing_seconds, std::size_t(before.live_allocations), format_bytes(before.used_bytes).c_str(),
        std::size_t(before.free_ranges), report.fragmentation_before, report.fragmentation_after,
        format_bytes(report.largest_free_before).c_str(), format_bytes(report.largest_free_after).c_str(),
        static_cast<unsigned long long>(report.blocks_moved), format_bytes(report.bytes_moved).c_str(),
        report.seconds.count() * 1e3);
  }

  const PoolStatistics statistics = pool.statistics();
  std::printf(
      "total: %llu compactions moved %s in %.2f ms; peak used %s of %s; allocation success rate %.3f\n",
      static_cast<unsigned long long>(statistics.compactions), format_bytes(statistics.bytes_moved).c_str(),
      statistics.compaction_time.count() * 1e3, format_bytes(statistics.peak_used_bytes).c_str(),
      format_bytes(statistics.reserved_bytes).c_str(), statistics.success_rate());
  std::printf(
      "wrote results (*_edges.png), plan diagrams (plan_batch*.svg) and memory maps (memory_map_batch*) to "
      "%s\n",
      arguments.output.c_str());
  return 0;
} catch (const std::exception& error) {
  std::fprintf(stderr, "image_pipeline: %s\n", error.what());
  return 1;
}
