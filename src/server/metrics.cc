#include "server/metrics.h"

#include <fmt/format.h>

namespace tq::server {

void HttpCounters::Count(const std::string& endpoint, int status) {
  std::lock_guard lk(mu_);
  ++counts_[{endpoint, status}];
}

std::map<std::pair<std::string, int>, int64_t> HttpCounters::Snapshot() const {
  std::lock_guard lk(mu_);
  return counts_;
}

namespace {

// Label values escaped as the exposition format asks (backslash, quote, newline).
std::string Escape(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

class Writer {
 public:
  void Family(const char* name, const char* type, const char* help) {
    out_ +=
        fmt::format("# HELP turboquant_{} {}\n# TYPE turboquant_{} {}\n", name, help, name, type);
  }
  void Sample(const char* name, double v, const std::string& labels = "") {
    out_ += fmt::format("turboquant_{}{}{}{} {}\n", name, labels.empty() ? "" : "{", labels,
                        labels.empty() ? "" : "}", v);
  }
  void One(const char* name, const char* type, const char* help, double v) {
    Family(name, type, help);
    Sample(name, v);
  }
  std::string& str() { return out_; }

 private:
  std::string out_;
};

}  // namespace

std::string RenderMetrics(const SchedulerStats& s, const HttpCounters& http,
                          const std::string& model, const std::string& kv_cache, int64_t rss_bytes,
                          double uptime_seconds,
                          const std::optional<Engine::DeviceMemory>& device) {
  Writer w;
  w.Family("model_info", "gauge", "The served model.");
  w.Sample("model_info", 1, fmt::format("model=\"{}\"", Escape(model)));
  w.Family("kv_cache_info", "gauge", "The KV cache format (plain dtype or TurboQuant KxVy).");
  w.Sample("kv_cache_info", 1, fmt::format("cache=\"{}\"", Escape(kv_cache)));
  w.Family("http_requests_total", "counter", "HTTP requests by endpoint and status code.");
  for (const auto& [key, n] : http.Snapshot()) {
    w.Sample("http_requests_total", double(n),
             fmt::format("endpoint=\"{}\",status=\"{}\"", Escape(key.first), key.second));
  }
  w.One("sequences_total", "counter", "Sequences admitted to a decode slot.",
        double(s.sequences_total));
  w.Family("sequences_finished_total", "counter", "Finished sequences by reason.");
  w.Sample("sequences_finished_total", double(s.finished_stop), "reason=\"stop\"");
  w.Sample("sequences_finished_total", double(s.finished_length), "reason=\"length\"");
  w.Sample("sequences_finished_total", double(s.finished_cancelled), "reason=\"cancelled\"");
  w.Sample("sequences_finished_total", double(s.finished_error), "reason=\"error\"");
  w.One("rejected_total", "counter", "Sequences refused because the queue was full.",
        double(s.rejected_total));
  w.One("prompt_tokens_total", "counter", "Prompt tokens of admitted sequences.",
        double(s.prompt_tokens_total));
  w.One("prefill_tokens_total", "counter", "Prompt tokens computed (not reused from a cache).",
        double(s.prefill_tokens_total));
  w.One("cached_prompt_tokens_total", "counter", "Prompt tokens reused from a kept KV cache.",
        double(s.cached_tokens_total));
  w.One("generated_tokens_total", "counter", "Tokens generated.", double(s.generated_tokens_total));
  w.One("decode_steps_total", "counter",
        "Steps (passes over the weights) that decoded a token for running sequences.",
        double(s.decode_steps_total));
  w.One("decode_seconds_total", "counter",
        "Time in decode steps (including prompt chunks batched into them).",
        s.decode_seconds_total);
  w.One("prefill_seconds_total", "counter", "Time in steps that only prefilled prompts.",
        s.prefill_seconds_total);
  w.Family("time_to_first_token_seconds", "summary", "Submit to first token, per sequence.");
  w.Sample("time_to_first_token_seconds_sum", s.ttft_seconds_sum);
  w.Sample("time_to_first_token_seconds_count", double(s.ttft_count));
  w.Family("queue_wait_seconds", "summary", "Submit to decode slot, per sequence.");
  w.Sample("queue_wait_seconds_sum", s.queue_seconds_sum);
  w.Sample("queue_wait_seconds_count", double(s.ttft_count));
  w.One("tokens_per_second", "gauge", "Generated tokens per second over the last 5 s.",
        s.tokens_per_second);
  w.One("requests_queued", "gauge", "Sequences waiting for a slot.", double(s.queued));
  w.One("requests_running", "gauge", "Sequences in a decode slot.", double(s.active));
  w.Family("kv_cache_tokens", "gauge", "Tokens held in KV caches (active: running sequences).");
  w.Sample("kv_cache_tokens", double(s.kv_tokens_active), "state=\"active\"");
  w.Sample("kv_cache_tokens", double(s.kv_tokens_total), "state=\"all\"");
  w.One("kv_cache_capacity_tokens", "gauge", "Tokens all KV caches can hold.",
        double(s.kv_capacity_tokens));
  w.One("kv_cache_usage_ratio", "gauge", "kv_cache_tokens{state=all} / capacity.",
        s.kv_capacity_tokens > 0 ? double(s.kv_tokens_total) / double(s.kv_capacity_tokens) : 0.0);
  w.One("kv_cache_bytes_per_token", "gauge",
        "KV storage per token over all layers (compressed size for a TurboQuant cache).",
        double(s.kv_bytes_per_token));
  w.One("kv_cache_bytes", "gauge",
        "Bytes of KV held by all caches (coded size for a TurboQuant cache; sliding-window "
        "layers count their window).",
        double(s.kv_bytes >= 0 ? s.kv_bytes : s.kv_tokens_total * s.kv_bytes_per_token));
  w.One("process_resident_memory_bytes", "gauge", "Resident set size.", double(rss_bytes));
  if (device) {
    w.Family("device_memory_bytes", "gauge",
             "Accelerator memory (the whole card: every process on it).");
    const std::string d = "device=\"" + device->device + "\"";
    w.Sample("device_memory_bytes", double(device->total_bytes - device->free_bytes),
             d + ",state=\"used\"");
    w.Sample("device_memory_bytes", double(device->free_bytes), d + ",state=\"free\"");
    w.Sample("device_memory_bytes", double(device->total_bytes), d + ",state=\"total\"");
  }
  w.One("uptime_seconds", "gauge", "Seconds since the server started.", uptime_seconds);
  return std::move(w.str());
}

std::string RenderExpertCacheMetrics(const ExpertCacheStats& s) {
  std::string out;
  auto sample = [&](const char* name, const char* type, const char* help, double v) {
    out += fmt::format(
        "# HELP turboquant_expert_cache_{0} {1}\n# TYPE turboquant_expert_cache_{0} "
        "{2}\nturboquant_expert_cache_{0} {3}\n",
        name, help, type, v);
  };
  sample("slots", "gauge", "Experts the MoE expert cache holds.", double(s.slots));
  sample("bytes", "gauge", "Bytes of the expert cache's slots.", double(s.slots * s.slot_bytes));
  sample("lookups_total", "counter", "Expert uses by the forward pass.", double(s.lookups));
  sample("hits_total", "counter", "Expert uses served from the cache.", double(s.hits));
  sample("misses_total", "counter", "Expert uses that read the checkpoint.", double(s.misses));
  sample("prefetches_total", "counter", "Experts read ahead by the next-layer prediction.",
         double(s.prefetches));
  sample("read_bytes_total", "counter", "Bytes of experts read from the checkpoint.",
         double(s.bytes_read));
  sample("stall_seconds_total", "counter", "Seconds the forward pass waited for expert reads.",
         s.stall_seconds);
  sample("hit_ratio", "gauge", "hits / lookups since start.", s.hit_rate());
  return out;
}

}  // namespace tq::server
