// vramkit-replay: replays an allocation trace on a Pool and prints one JSON object of figures.
// Exit status: 0 done; 2 usage error or bad trace; 1 any other failure (device error, corruption).
#include <unistd.h>

#include <charconv>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include <vramkit/errors.hpp>
#include <vramkit/trace_replay.hpp>

namespace {

constexpr const char* usage =
    "usage: vramkit-replay TRACE.csv [--policy none|on-failure|threshold] [--on-failure-mode minimal|full]\n"
    "                      [--capacity auto|BYTES] [--device virtual|host|cuda] [--alignment 256|512]\n"
    "                      [--free-cache auto|off|BYTES] [--verify] [--svg FILE]\n";

struct UsageError {
  std::string message;
};

struct Arguments {
  std::string trace;
  vramkit::ReplayOptions options;
  bool automatic_capacity = true;
  std::string svg;
};

std::uint64_t parse_bytes(std::string_view text, const char* what) {
  std::uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc{} || end != text.data() + text.size() || value == 0) {
    throw UsageError{std::string(what) + " must be a positive integer, found '" + std::string(text) + "'"};
  }
  return value;
}

Arguments parse(int argc, char** argv) {
  Arguments arguments;
  for (int index = 1; index < argc; ++index) {
    const std::string_view argument = argv[index];
    auto value = [&]() -> std::string_view {
      if (index + 1 >= argc) throw UsageError{std::string(argument) + " needs a value"};
      return argv[++index];
    };
    if (argument == "--policy") {
      const std::string_view policy = value();
      if (policy == "none") {
        arguments.options.policy = vramkit::ReplayPolicy::none;
      } else if (policy == "on-failure") {
        arguments.options.policy = vramkit::ReplayPolicy::on_failure;
      } else if (policy == "threshold") {
        arguments.options.policy = vramkit::ReplayPolicy::threshold;
      } else {
        throw UsageError{"unknown policy '" + std::string(policy) + "'"};
      }
    } else if (argument == "--on-failure-mode") {
      const std::string_view mode = value();
      if (mode == "minimal") {
        arguments.options.failure_mode = vramkit::FailureMode::minimal;
      } else if (mode == "full") {
        arguments.options.failure_mode = vramkit::FailureMode::full;
      } else {
        throw UsageError{"unknown on-failure mode '" + std::string(mode) + "'"};
      }
    } else if (argument == "--capacity") {
      const std::string_view capacity = value();
      arguments.automatic_capacity = capacity == "auto";
      if (!arguments.automatic_capacity)
        arguments.options.capacity_bytes = parse_bytes(capacity, "--capacity");
    } else if (argument == "--device") {
      const std::string_view device = value();
      if (device == "virtual") {
        arguments.options.device = vramkit::DeviceChoice::virtual_memory;
      } else if (device == "host") {
        arguments.options.device = vramkit::DeviceChoice::host;
      } else if (device == "cuda") {
        arguments.options.device = vramkit::DeviceChoice::cuda;
      } else {
        throw UsageError{"unknown device '" + std::string(device) + "'"};
      }
    } else if (argument == "--alignment") {
      const std::uint64_t alignment = parse_bytes(value(), "--alignment");
      if (alignment != 256 && alignment != 512) throw UsageError{"--alignment must be 256 or 512"};
      arguments.options.alignment = alignment;
    } else if (argument == "--free-cache") {
      const std::string_view cache = value();
      arguments.options.free_cache_bytes = cache == "auto"  ? vramkit::PoolOptions::automatic_cache
                                           : cache == "off" ? 0
                                                            : parse_bytes(cache, "--free-cache");
    } else if (argument == "--verify") {
      arguments.options.verify = true;
    } else if (argument == "--svg") {
      arguments.svg = value();
    } else if (argument == "--help" || argument == "-h") {
      std::cout << usage;
      std::exit(0);
    } else if (argument.starts_with("-")) {
      throw UsageError{"unknown option '" + std::string(argument) + "'"};
    } else if (arguments.trace.empty()) {
      arguments.trace = argument;
    } else {
      throw UsageError{"more than one trace: '" + std::string(argument) + "'"};
    }
  }
  if (arguments.trace.empty()) throw UsageError{"no trace given"};
  if (arguments.options.verify && arguments.options.device == vramkit::DeviceChoice::virtual_memory) {
    throw UsageError{"--verify needs --device host or cuda (the virtual device has no memory)"};
  }
  return arguments;
}

void show_progress(std::size_t done, std::size_t total) {
  const int percent = total == 0 ? 100 : static_cast<int>(100 * done / total);
  const int filled = percent / 2;
  std::fprintf(stderr, "\r[%-50.*s] %3d%% (%zu/%zu)", filled,
               "##################################################", percent, done, total);
  if (done == total) std::fputc('\n', stderr);
  std::fflush(stderr);
}

}  // namespace

int main(int argc, char** argv) {
  Arguments arguments;
  try {
    arguments = parse(argc, argv);
  } catch (const UsageError& error) {
    std::cerr << "vramkit-replay: " << error.message << "\n" << usage;
    return 2;
  }
  try {
    const vramkit::Trace trace = vramkit::read_trace_file(arguments.trace);
    vramkit::ReplayOptions options = arguments.options;
    if (!arguments.svg.empty()) options.samples = 2000;
    if (isatty(STDERR_FILENO)) options.progress = show_progress;

    vramkit::ReplayResult result;
    std::uint64_t footprint = 0;
    double search_seconds = 0;
    std::size_t search_replays = 0;
    if (arguments.automatic_capacity) {
      // The search replays many times; the progress bar follows the final replay only.
      auto progress = options.progress;
      options.progress = nullptr;
      const auto search_started = std::chrono::steady_clock::now();
      vramkit::FootprintResult found = vramkit::find_footprint(trace, options);
      search_seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - search_started).count();
      search_replays = found.replays;
      result = std::move(found.replay);
      footprint = found.footprint_bytes;
      if (progress) progress(trace.requests.size(), trace.requests.size());
    } else {
      result = vramkit::replay(trace, options);
      // With a fixed capacity, the footprint is what the pool used at its peak (in blocks).
      footprint = result.failed_requests == 0 ? result.peak_used_bytes : 0;
    }

    nlohmann::ordered_json out;
    out["trace"] = arguments.trace;
    out["policy"] = vramkit::to_string(options.policy);
    out["on_failure_mode"] = vramkit::to_string(options.failure_mode);
    out["device"] = options.device == vramkit::DeviceChoice::virtual_memory ? "virtual"
                    : options.device == vramkit::DeviceChoice::host         ? "host"
                                                                            : "cuda";
    out["alignment"] = options.alignment;
    out["free_cache_bytes"] = options.free_cache_bytes == vramkit::PoolOptions::automatic_cache
                                  ? nlohmann::ordered_json("auto")
                                  : nlohmann::ordered_json(options.free_cache_bytes);
    out["requests"] = result.requests;
    out["peak_live_bytes"] = trace.peak_live_bytes;
    out["capacity_bytes"] = result.capacity_bytes;
    if (footprint != 0) {
      out["footprint_bytes"] = footprint;
      out["footprint_ratio"] = static_cast<double>(footprint) / static_cast<double>(trace.peak_live_bytes);
    } else {
      out["footprint_bytes"] = nullptr;
      out["footprint_ratio"] = nullptr;
    }
    out["failed_requests"] = result.failed_requests;
    out["success_rate"] = result.success_rate();
    out["compactions"] = result.compactions;
    out["bytes_moved"] = result.bytes_moved;
    out["moved_ratio"] = result.moved_ratio();
    if (options.verify) {
      out["verified"] = result.verified;
    } else {
      out["verified"] = nullptr;
    }
    out["seconds"] = result.seconds.count();
    if (arguments.automatic_capacity) {
      out["search_replays"] = search_replays;
      out["search_seconds"] = search_seconds;
    }
    std::cout << out.dump(2) << std::endl;

    if (!arguments.svg.empty()) {
      std::ofstream svg(arguments.svg);
      svg << vramkit::replay_svg(trace, result);
      if (!svg) {
        std::cerr << "vramkit-replay: cannot write '" << arguments.svg << "'\n";
        return 1;
      }
    }
    return 0;
  } catch (const vramkit::invalid_argument& error) {
    std::cerr << "vramkit-replay: " << error.what() << "\n";
    return 2;
  } catch (const std::exception& error) {
    std::cerr << "vramkit-replay: " << error.what() << "\n";
    return 1;
  }
}
