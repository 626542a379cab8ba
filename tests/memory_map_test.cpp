// Memory maps: JSON parsed back and compared with statistics() and block_map(); SVG with one rect
// per block, well formed, with its headline metrics.
#include <catch2/catch.hpp>

#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <vramkit/host_device.hpp>
#include <vramkit/memory_map.hpp>
#include <vramkit/units.hpp>

using namespace vramkit;

namespace {

// A pool with every block state: live, pinned (pins > 0), arena (allocate_pinned) and free holes,
// over two segments.
struct MixedPool {
  Pool pool{{.capacity_bytes = 1_MiB, .max_capacity_bytes = 4_MiB, .segment_bytes = 1_MiB},
            make_host_device()};
  std::vector<Handle> handles;
  MixedPool() {
    std::mt19937_64 random(7);
    for (int i = 0; i < 40; ++i) handles.push_back(pool.allocate(256 + random() % 64_KiB));
    handles.push_back(pool.allocate_pinned(64_KiB));
    for (std::size_t i = 0; i < handles.size() - 1; i += 3) pool.free(handles[i]);
    pool.pin(handles[1]);
    pool.pin(handles[4]);
  }
};

std::size_t count(const std::string& text, const std::string& needle) {
  std::size_t found = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + needle.size()))
    ++found;
  return found;
}

// Tag balance: every <name ...> closed by </name> in order, self-closing tags and the <?xml ?>
// declaration skipped, no stray '<' or '&' in text. Returns "" or what is wrong.
std::string xml_problem(const std::string& xml) {
  std::vector<std::string> open;
  std::size_t at = 0;
  while (at < xml.size()) {
    const std::size_t lt = xml.find('<', at);
    const std::string text = xml.substr(at, lt == std::string::npos ? std::string::npos : lt - at);
    for (std::size_t amp = text.find('&'); amp != std::string::npos; amp = text.find('&', amp + 1)) {
      const auto semicolon = text.find(';', amp);
      if (semicolon == std::string::npos || semicolon - amp > 6) return "bare & in text: " + text;
    }
    if (lt == std::string::npos) break;
    const std::size_t gt = xml.find('>', lt);
    if (gt == std::string::npos) return "unclosed tag";
    const std::string tag = xml.substr(lt + 1, gt - lt - 1);
    if (tag.find('<') != std::string::npos) return "'<' inside a tag: " + tag;
    if (tag.empty()) return "empty tag";
    if (tag[0] == '?' || tag[0] == '!') {
    } else if (tag[0] == '/') {
      if (open.empty() || open.back() != tag.substr(1)) return "mismatched </" + tag.substr(1) + ">";
      open.pop_back();
    } else if (tag.back() != '/') {
      open.push_back(tag.substr(0, tag.find_first_of(" \n\t")));
    }
    at = gt + 1;
  }
  if (!open.empty()) return "unclosed <" + open.back() + ">";
  return "";
}

}  // namespace

TEST_CASE("statistics JSON holds every field and derived metric and parses back", "[metrics][json]") {
  MixedPool mixed;
  mixed.pool.compact();
  const PoolStatistics s = mixed.pool.statistics();
  const nlohmann::json j = nlohmann::json::parse(statistics_json(s));
  CHECK(j.size() == 23);  // 18 fields and 5 derived metrics: a new field must be added here too
  CHECK(j.at("reserved_bytes").get<std::uint64_t>() == s.reserved_bytes);
  CHECK(j.at("used_bytes").get<std::uint64_t>() == s.used_bytes);
  CHECK(j.at("requested_bytes").get<std::uint64_t>() == s.requested_bytes);
  CHECK(j.at("free_bytes").get<std::uint64_t>() == s.free_bytes);
  CHECK(j.at("largest_free_block").get<std::uint64_t>() == s.largest_free_block);
  CHECK(j.at("free_ranges").get<std::uint64_t>() == s.free_ranges);
  CHECK(j.at("live_allocations").get<std::uint64_t>() == s.live_allocations);
  CHECK(j.at("pinned_allocations").get<std::uint64_t>() == s.pinned_allocations);
  CHECK(j.at("segments").get<std::uint64_t>() == s.segments);
  CHECK(j.at("peak_used_bytes").get<std::uint64_t>() == s.peak_used_bytes);
  CHECK(j.at("peak_reserved_bytes").get<std::uint64_t>() == s.peak_reserved_bytes);
  CHECK(j.at("allocation_requests").get<std::uint64_t>() == s.allocation_requests);
  CHECK(j.at("allocation_failures").get<std::uint64_t>() == s.allocation_failures);
  CHECK(j.at("compactions").get<std::uint64_t>() == s.compactions);
  CHECK(j.at("blocks_moved").get<std::uint64_t>() == s.blocks_moved);
  CHECK(j.at("bytes_moved").get<std::uint64_t>() == s.bytes_moved);
  CHECK(j.at("compaction_time_seconds").get<double>() == s.compaction_time.count());
  CHECK(j.at("sum_of_squared_free").get<double>() == s.sum_of_squared_free);
  CHECK(j.at("fragmentation").get<double>() == s.fragmentation());
  CHECK(j.at("fragmentation_quadratic").get<double>() == s.fragmentation_quadratic());
  CHECK(j.at("utilization").get<double>() == s.utilization());
  CHECK(j.at("success_rate").get<double>() == s.success_rate());
  CHECK(j.at("peak_utilization").get<double>() == s.peak_utilization());
  CHECK(s.compactions == 1);
  CHECK(s.pinned_allocations == 3);
}

TEST_CASE("memory map JSON lists every segment and block in order", "[metrics][json]") {
  MixedPool mixed;
  const nlohmann::json j = nlohmann::json::parse(memory_map_json(mixed.pool));
  CHECK(j.at("statistics").at("used_bytes").get<std::uint64_t>() == mixed.pool.statistics().used_bytes);
  const auto segments = mixed.pool.segments();
  REQUIRE(segments.size() >= 2);
  REQUIRE(j.at("segments").size() == segments.size());
  std::vector<BlockInfo> blocks;
  for (std::size_t index = 0; index < segments.size(); ++index) {
    const nlohmann::json& segment = j.at("segments")[index];
    CHECK(segment.at("segment").get<std::uint32_t>() == segments[index].segment);
    CHECK(segment.at("address").get<std::uint64_t>() == segments[index].address);
    CHECK(segment.at("bytes").get<std::uint64_t>() == segments[index].bytes);
    for (const nlohmann::json& block : segment.at("blocks")) {
      const std::string state = block.at("state").get<std::string>();
      BlockInfo info{static_cast<std::uint32_t>(index), block.at("offset").get<std::uint64_t>(),
                     block.at("bytes").get<std::uint64_t>(), BlockState::free, 0};
      for (BlockState s : {BlockState::free, BlockState::live, BlockState::pinned, BlockState::arena}) {
        if (state == to_string(s)) info.state = s;
      }
      CHECK(block.contains("slot") == (info.state != BlockState::free));
      if (block.contains("slot")) info.slot = block.at("slot").get<std::uint32_t>();
      blocks.push_back(info);
    }
  }
  const std::vector<BlockInfo> expected = mixed.pool.block_map();
  REQUIRE(blocks.size() == expected.size());
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    INFO("block " << i);
    CHECK(blocks[i].segment == expected[i].segment);
    CHECK(blocks[i].offset == expected[i].offset);
    CHECK(blocks[i].bytes == expected[i].bytes);
    CHECK(blocks[i].state == expected[i].state);
    CHECK(blocks[i].slot == expected[i].slot);
  }
  std::size_t states[4] = {};
  for (const BlockInfo& block : expected) ++states[static_cast<int>(block.state)];
  CHECK(states[0] > 0);
  CHECK(states[1] > 0);
  CHECK(states[2] == 2);
  CHECK(states[3] == 1);
}

TEST_CASE("memory map SVG draws one rect per block, well formed, with headline metrics", "[metrics][svg]") {
  MixedPool mixed;
  const std::string svg = memory_map_svg(mixed.pool, "before <compaction> & after");
  const auto map = mixed.pool.block_map();
  CHECK(count(svg, "<rect class=\"block") == map.size());
  CHECK(count(svg, "<rect class=\"block pinned\"") == 2);
  CHECK(count(svg, "<rect class=\"block arena\"") == 1);
  CHECK(xml_problem(svg) == "");
  CHECK_THAT(svg, Catch::Contains("before &lt;compaction&gt; &amp; after"));
  const PoolStatistics s = mixed.pool.statistics();
  CHECK_THAT(svg, Catch::Contains("reserved " + format_bytes(s.reserved_bytes)));
  CHECK_THAT(svg, Catch::Contains("largest free block " + format_bytes(s.largest_free_block)));
  CHECK_THAT(svg, Catch::Contains("fragmentation") && Catch::Contains("utilization"));
  CHECK_THAT(svg, Catch::Contains("class=\"legend\""));

  mixed.pool.compact();
  const std::string after = memory_map_svg(mixed.pool);
  CHECK(count(after, "<rect class=\"block") == mixed.pool.block_map().size());
  CHECK(xml_problem(after) == "");
}

TEST_CASE("memory map SVG keeps a one-granule block visible in a large segment", "[metrics][svg]") {
  Pool pool({.capacity_bytes = 64_MiB}, make_host_device());
  Handle tiny = pool.allocate(1);
  const std::string svg = memory_map_svg(pool);
  CHECK(count(svg, "<rect class=\"block") == 2);
  const auto at = svg.find("<rect class=\"block live\"");
  REQUIRE(at != std::string::npos);
  const auto width_at = svg.find("width=\"", at) + 7;
  CHECK(std::stod(svg.substr(width_at, svg.find('"', width_at) - width_at)) >= 1.0);
  pool.free(tiny);
}

TEST_CASE("the xml checker used above finds unbalanced tags", "[metrics][svg]") {
  CHECK(xml_problem("<svg><rect/></svg>").empty());
  CHECK_FALSE(xml_problem("<svg><g></svg>").empty());
  CHECK_FALSE(xml_problem("<svg>a & b</svg>").empty());
  CHECK_FALSE(xml_problem("<svg><text>x</svg>").empty());
}
