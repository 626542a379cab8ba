// The fit check and the text reports of a solved plan. Both read only the solution, so a pool can
// check and report a plan without the MemoryPlan it came from.
#include <vramkit/detail/message.hpp>
#include <vramkit/memory_plan.hpp>
#include <vramkit/units.hpp>

#include <algorithm>
#include <sstream>

namespace vramkit {
namespace {

// Left-aligned first column, right-aligned others, each as wide as its widest cell.
std::string table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> widths;
  for (const auto& row : rows) {
    widths.resize(std::max(widths.size(), row.size()), 0);
    for (std::size_t column = 0; column < row.size(); ++column) {
      widths[column] = std::max(widths[column], row[column].size());
    }
  }
  std::string text;
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t column = 0; column < row.size(); ++column) {
      const std::string padding(widths[column] - row[column].size(), ' ');
      if (column > 0) line += "  ";
      line += column == 0 ? row[column] + padding : padding + row[column];
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    text += line + '\n';
  }
  return text;
}

std::string ratio(std::uint64_t numerator, std::uint64_t denominator) {
  if (denominator == 0) return numerator == 0 ? "1.000" : "inf";
  std::ostringstream out;
  out.setf(std::ios::fixed);
  out.precision(3);
  out << static_cast<double>(numerator) / static_cast<double>(denominator);
  return out.str();
}

}  // namespace

FitReport check_fit(const PlanSolution& solution, std::uint64_t available_bytes) {
  FitReport report;
  report.available_bytes = available_bytes;
  report.needed_bytes = solution.peak_bytes;
  report.fits = solution.peak_bytes <= available_bytes;
  report.shortfall_bytes = report.fits ? 0 : solution.peak_bytes - available_bytes;
  report.stages.reserve(solution.stages.size());
  for (std::size_t stage = 0; stage < solution.stages.size(); ++stage) {
    const std::uint64_t high_water = solution.stages[stage].high_water_bytes;
    report.stages.push_back(
        {.name = solution.stages[stage].name,
         .high_water_bytes = high_water,
         .shortfall_bytes = high_water > available_bytes ? high_water - available_bytes : 0});
    if (high_water > available_bytes &&
        (!report.worst_stage || high_water > report.stages[*report.worst_stage].high_water_bytes)) {
      report.worst_stage = stage;
    }
  }
  return report;
}

std::string to_text(const PlanSolution& solution) {
  std::vector<std::vector<std::string>> rows;
  rows.push_back({"stage", "live buffers", "live bytes", "high-water"});
  for (const StageUsage& stage : solution.stages) {
    rows.push_back({stage.name, std::to_string(stage.live_buffers), format_bytes(stage.live_bytes),
                    format_bytes(stage.high_water_bytes)});
  }
  return table(rows) + detail::message("peak ", format_bytes(solution.peak_bytes), ", lower bound ",
                                       format_bytes(solution.lower_bound_bytes), " (",
                                       ratio(solution.peak_bytes, solution.lower_bound_bytes),
                                       "x), region alignment ", solution.region_alignment, ", ",
                                       solution.buffers.size(), " buffers, strategy: ", solution.strategy,
                                       '\n');
}

std::string to_text(const FitReport& report) {
  std::string text;
  if (report.fits) {
    text = detail::message("fits: needs ", format_bytes(report.needed_bytes), " of ",
                           format_bytes(report.available_bytes), " available\n");
  } else {
    const StageFit& worst = report.stages.at(report.worst_stage.value());
    text = detail::message("does not fit: stage '", worst.name, "' reaches ",
                           format_bytes(worst.high_water_bytes), ", ", format_bytes(worst.shortfall_bytes),
                           " more than the ", format_bytes(report.available_bytes), " available\n");
  }
  std::vector<std::vector<std::string>> rows;
  rows.push_back({"stage", "high-water", "shortfall"});
  for (const StageFit& stage : report.stages) {
    rows.push_back({stage.name, format_bytes(stage.high_water_bytes),
                    stage.shortfall_bytes == 0 ? "-" : format_bytes(stage.shortfall_bytes)});
  }
  return text + table(rows);
}

}  // namespace vramkit
