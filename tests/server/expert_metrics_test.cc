// /metrics samples of the MoE expert cache (server/metrics.h).
#include <gtest/gtest.h>

#include "server/metrics.h"

namespace tq::server {
namespace {

TEST(ExpertCacheMetrics, EverySampleHasHelpTypeAndValue) {
  ExpertCacheStats s;
  s.slots = 12;
  s.slot_bytes = 1000;
  s.lookups = 10;
  s.hits = 7;
  s.misses = 3;
  s.bytes_read = 3000;
  s.stall_seconds = 0.25;
  const std::string t = RenderExpertCacheMetrics(s);
  for (const char* line :
       {"# TYPE turboquant_expert_cache_hits_total counter\n", "turboquant_expert_cache_slots 12\n",
        "turboquant_expert_cache_bytes 12000\n", "turboquant_expert_cache_hits_total 7\n",
        "turboquant_expert_cache_misses_total 3\n",
        "turboquant_expert_cache_read_bytes_total 3000\n",
        "turboquant_expert_cache_stall_seconds_total 0.25\n",
        "turboquant_expert_cache_hit_ratio 0.7\n"})
    EXPECT_NE(t.find(line), std::string::npos) << line << "\n" << t;
}

}  // namespace
}  // namespace tq::server
