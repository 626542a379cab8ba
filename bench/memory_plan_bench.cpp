// Memory plan solver: planned peak against the lower bound, and solve time, on seeded random plans.
//
//   vramkit_memory_plan_bench [seed]
//
// Plans: 10 buffers over 8 stages (200 plans), 100 over 16 (50), 1,000 over 32 (10). Sizes are
// log-uniform from 256 B to 64 MiB; alignment 256 (one buffer in ten: 4 KiB); lifetimes start at a
// uniform stage and last 1..3 stages (seven buffers in ten) or 1..all remaining stages (the rest).
// Solve time is the fastest of three solves of each plan. Optional arguments after the seed set
// SolveOptions: perturbations, first_fit (0/1), best_fit (0/1), perturbation_visits.
#include <vramkit/memory_plan.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <vector>

using namespace vramkit;

namespace {

double uniform(std::mt19937_64& random) {
  return static_cast<double>(random() >> 11) * 0x1.0p-53;
}

MemoryPlan random_plan(std::mt19937_64& random, std::size_t buffers, std::size_t stages) {
  std::vector<std::string> names;
  for (std::size_t i = 0; i < stages; ++i) names.push_back("s" + std::to_string(i));
  MemoryPlan plan(names);
  for (std::size_t i = 0; i < buffers; ++i) {
    const auto bytes = static_cast<std::uint64_t>(std::exp2(8.0 + 18.0 * uniform(random)));
    const std::size_t first = random() % stages;
    const std::size_t longest = random() % 10 < 7 ? 3 : stages;
    const std::size_t last = std::min(stages - 1, first + random() % longest);
    plan.add_buffer({.name = "b" + std::to_string(i),
                     .bytes = bytes,
                     .first_stage = names[first],
                     .last_stage = names[last],
                     .alignment = random() % 10 == 0 ? 4096u : 256u});
  }
  return plan;
}

struct Case {
  std::size_t buffers;
  std::size_t stages;
  std::size_t plans;
};

}  // namespace

int main(int argc, char** argv) {
  const std::uint64_t seed = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1;
  SolveOptions options;
  if (argc > 2) options.perturbations = static_cast<std::uint32_t>(std::strtoul(argv[2], nullptr, 10));
  if (argc > 3) options.first_fit = argv[3][0] == '1';
  if (argc > 4) options.best_fit = argv[4][0] == '1';
  if (argc > 5) options.perturbation_visits = std::strtoull(argv[5], nullptr, 10);
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::printf("%8s %7s %6s | %10s %10s %8s | %12s %12s\n", "buffers", "stages", "plans", "mean ratio",
              "worst", "at bound", "median ms", "max ms");
  std::map<std::string, int> winners;
  for (const Case c : {Case{10, 8, 200}, Case{100, 16, 50}, Case{1000, 32, 10}}) {
    std::mt19937_64 random(seed * 1000003 + c.buffers);
    std::vector<double> ratios;
    std::vector<double> milliseconds;
    int at_bound = 0;
    for (std::size_t p = 0; p < c.plans; ++p) {
      const MemoryPlan plan = random_plan(random, c.buffers, c.stages);
      // The fastest of three solves: the machine is shared, and the other two absorb its noise.
      PlanSolution solution;
      double fastest = 1e300;
      for (int repeat = 0; repeat < 3; ++repeat) {
        const auto start = std::chrono::steady_clock::now();
        solution = solve(plan, options);
        const auto stop = std::chrono::steady_clock::now();
        fastest = std::min(fastest, std::chrono::duration<double, std::milli>(stop - start).count());
      }
      milliseconds.push_back(fastest);
      ratios.push_back(static_cast<double>(solution.peak_bytes) /
                       static_cast<double>(solution.lower_bound_bytes));
      at_bound += solution.peak_bytes == solution.lower_bound_bytes;
      if (c.buffers == 1000) ++winners[solution.strategy.substr(0, solution.strategy.find(", perturbation"))];
    }
    double sum = 0;
    for (const double r : ratios) sum += r;
    std::sort(milliseconds.begin(), milliseconds.end());
    std::printf("%8zu %7zu %6zu | %10.4f %10.4f %8d | %12.3f %12.3f\n", c.buffers, c.stages, c.plans,
                sum / static_cast<double>(ratios.size()), *std::max_element(ratios.begin(), ratios.end()),
                at_bound, milliseconds[milliseconds.size() / 2], milliseconds.back());
  }
  std::printf("winning strategies:");
  for (const auto& [name, wins] : winners) std::printf(" [%s] %d", name.c_str(), wins);
  std::printf("\n");
}
