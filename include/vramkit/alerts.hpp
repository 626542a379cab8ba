#pragma once
// AlertMonitor: DESIGN.md's warning thresholds (utilization over 0.8, success rate under 0.9,
// fragmentation over 0.30) turned into events. Each alert fires once when its metric crosses to the
// unhealthy side and re-arms only when the metric is back on the healthy side, so a caller may call
// check() as often as it likes without flooding its log. check() costs three comparisons plus the
// callbacks it fires; it does not read the pool (pass it pool.statistics()).
//
// Not thread-safe: one monitor belongs to one polling loop.
#include <array>
#include <cstddef>
#include <functional>
#include <string>

#include <vramkit/statistics.hpp>

namespace vramkit {

enum class AlertKind { utilization, success_rate, fragmentation };
const char* to_string(AlertKind kind);

struct Alert {
  AlertKind kind = AlertKind::utilization;
  double value = 0;      ///< The metric when the alert fired.
  double threshold = 0;  ///< The option it crossed.
  std::string message;   ///< "vramkit alert: utilization 0.85 is over 0.8 (3.4 MiB of 4 MiB used)".
};

using AlertCallback = std::function<void(const Alert&)>;

struct AlertOptions {
  double utilization_warn = 0.8;     ///< Alert when utilization() > this. In [0, 1].
  double success_rate_warn = 0.9;    ///< Alert when success_rate() < this. In [0, 1].
  double fragmentation_warn = 0.30;  ///< Alert when fragmentation() > this. In [0, 1].
  AlertCallback callback = {};       ///< Empty: one line on stderr per alert.
};

class AlertMonitor {
 public:
  /// Throws invalid_argument for a threshold outside [0, 1] or NaN, naming the option and value.
  explicit AlertMonitor(AlertOptions options = {});

  /// Fires the callback for every metric that has crossed to the unhealthy side since the last
  /// call (or since construction), in the order utilization, success rate, fragmentation. Returns
  /// how many alerts fired. A callback that throws leaves its alert fired (it is not retried); the
  /// metrics after it are looked at on the next call.
  std::size_t check(const PoolStatistics& statistics);

  /// Whether the alert of `kind` has fired and not yet re-armed.
  bool active(AlertKind kind) const { return active_[static_cast<std::size_t>(kind)]; }
  const AlertOptions& options() const { return options_; }

 private:
  AlertOptions options_;
  std::array<bool, 3> active_{};  // indexed by AlertKind
};

}  // namespace vramkit
