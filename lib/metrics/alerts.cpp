// AlertMonitor: edge-triggered warnings.
//
// Invariant: active_[k] is true exactly when the last check() saw metric k on the unhealthy side
// (strictly past its threshold). An alert fires on a false -> true transition and only then.
#include <vramkit/alerts.hpp>
#include <vramkit/detail/message.hpp>
#include <vramkit/errors.hpp>
#include <vramkit/units.hpp>

#include <cmath>
#include <cstdio>

namespace vramkit {
namespace {

void check_threshold(const char* name, double value) {
  if (std::isnan(value) || value < 0.0 || value > 1.0) {
    throw invalid_argument(detail::message("AlertMonitor: ", name, " ", value, " is outside [0, 1]"));
  }
}

void print_to_stderr(const Alert& alert) {
  std::fprintf(stderr, "%s\n", alert.message.c_str());
}

}  // namespace

const char* to_string(AlertKind kind) {
  switch (kind) {
    case AlertKind::utilization:
      return "utilization";
    case AlertKind::success_rate:
      return "success_rate";
    case AlertKind::fragmentation:
      return "fragmentation";
  }
  return "unknown";
}

AlertMonitor::AlertMonitor(AlertOptions options) : options_(std::move(options)) {
  check_threshold("utilization_warn", options_.utilization_warn);
  check_threshold("success_rate_warn", options_.success_rate_warn);
  check_threshold("fragmentation_warn", options_.fragmentation_warn);
  if (!options_.callback) options_.callback = print_to_stderr;
}

std::size_t AlertMonitor::check(const PoolStatistics& statistics) {
  const double utilization = statistics.utilization();
  const double success_rate = statistics.success_rate();
  const double fragmentation = statistics.fragmentation();
  struct Reading {
    AlertKind kind;
    bool unhealthy;
    double value;
    double threshold;
    std::string detail;
  };
  const Reading readings[] = {
      {AlertKind::utilization, utilization > options_.utilization_warn, utilization,
       options_.utilization_warn,
       detail::message("is over ", options_.utilization_warn, " (", format_bytes(statistics.used_bytes),
                       " of ", format_bytes(statistics.reserved_bytes), " used)")},
      {AlertKind::success_rate, success_rate < options_.success_rate_warn, success_rate,
       options_.success_rate_warn,
       detail::message("is under ", options_.success_rate_warn, " (", statistics.allocation_failures, " of ",
                       statistics.allocation_requests, " requests failed)")},
      {AlertKind::fragmentation, fragmentation > options_.fragmentation_warn, fragmentation,
       options_.fragmentation_warn,
       detail::message("is over ", options_.fragmentation_warn, " (largest free block ",
                       format_bytes(statistics.largest_free_block), " of ",
                       format_bytes(statistics.free_bytes), " free in ", statistics.free_ranges, " ranges)")},
  };
  std::size_t fired = 0;
  for (const Reading& reading : readings) {
    bool& active = active_[static_cast<std::size_t>(reading.kind)];
    const bool crossed = reading.unhealthy && !active;
    active = reading.unhealthy;  // set before the callback: a throwing callback does not re-fire
    if (!crossed) continue;
    ++fired;
    options_.callback({reading.kind, reading.value, reading.threshold,
                       detail::message("vramkit alert: ", to_string(reading.kind), " ", reading.value, " ",
                                       reading.detail)});
  }
  return fired;
}

}  // namespace vramkit
