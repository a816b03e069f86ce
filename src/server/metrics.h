// /metrics: Prometheus text exposition of the HTTP counters and the scheduler's state.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "model/expert_cache.h"
#include "runtime/scheduler.h"

namespace tq::server {

// Requests by endpoint and HTTP status (thread-safe).
class HttpCounters {
 public:
  void Count(const std::string& endpoint, int status);
  std::map<std::pair<std::string, int>, int64_t> Snapshot() const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, int64_t> counts_;
};

// The exposition text ("# HELP", "# TYPE", samples), names prefixed "turboquant_".
// `kv_cache` describes the cache ("f16", "K4V4 (sink 0, ...)"), exported as a label.
// `device`: the accelerator's memory (turboquant_device_memory_bytes{device=...,state=...}),
// when the model runs on one.
std::string RenderMetrics(const SchedulerStats& s, const HttpCounters& http,
                          const std::string& model, const std::string& kv_cache, int64_t rss_bytes,
                          double uptime_seconds,
                          const std::optional<Engine::DeviceMemory>& device = std::nullopt);

// The MoE expert cache's counters (--expert-cache): turboquant_expert_cache_{slots, bytes,
// lookups_total, hits_total, misses_total, prefetches_total, read_bytes_total,
// stall_seconds_total, hit_ratio}.
std::string RenderExpertCacheMetrics(const ExpertCacheStats& s);

}  // namespace tq::server
