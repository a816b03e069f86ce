// The expert cache: MoE expert weights streamed from the checkpoint into a fixed arena of slots
// (`--expert-cache SIZE`), so the memory experts take stays at the budget whatever the model's
// size. Everything else (attention, routers, shared experts, dense layers, norms, embeddings)
// stays resident.
//
// A slot holds one expert: the storage spans (Linear::StorageSpans: codes + scales [+ minimums],
// or a dense weight) of its gate, up and down projections, each at a 64-byte aligned offset. A
// miss preads the spans from the shard file into a slot (never touching the mapping, whose
// touched pages would count in RSS) and builds the expert's linears on the slot
// (Linear::OnStorage). The kernels then read the same bytes in the same order as the resident
// path: streamed logits equal resident logits bit for bit, whatever is cached.
//
// Eviction: LRU (default) or LFU (use counts with LRU tie-break, halved every `slots` misses so
// old popularity fades: a cheap ARC-like frequency/recency mix). Prefetch (model/moe_forward.cc):
// while layer L computes, the router of the next MoE layer applied to layer L's input predicts
// its experts, and reader threads fill their slots (posix_fadvise WILLNEED on the spans first).
//
// Slots are backend buffers. On a host backend the pread lands in the slot. On a device backend
// with a copy queue (cuda), when host memory has room, every expert's slot image is read once
// into pinned host memory at construction (the experts then live in host RAM, the slots in GPU
// memory): a miss is one asynchronous copy in stream order, and a prediction is copied on the
// copy queue while the current layer computes (Backend::CopyAhead / WaitCopy), so the host never
// waits for an expert. Otherwise a miss preads into a host staging buffer that is copied to the
// slot and waited for.
//
// Not thread-safe for Acquire (one forward pass at a time, like Model); the reader threads
// synchronize with it internally.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kernels/backend.h"

namespace tq {

class Checkpoint;
struct ModelWeights;
struct GatedMlp;

enum class ExpertCachePolicy { kLru, kLfu };

struct ExpertCacheOptions {
  int64_t budget_bytes = 0;  // slots = budget / slot bytes (at least one expert must fit)
  ExpertCachePolicy policy = ExpertCachePolicy::kLru;
  int reader_threads = 2;  // prefetch readers (0: no prefetch)
  // Device backends: keep the experts in pinned host memory when it fits (see above); false
  // reads every miss from the checkpoint (tests of that path).
  bool host_copy = true;
};

struct ExpertCacheStats {
  int64_t slots = 0, slot_bytes = 0, experts = 0;  // experts: in all MoE layers
  int64_t lookups = 0, hits = 0, misses = 0;       // a hit includes a prefetched slot
  int64_t prefetch_hits = 0;                       // hits on a slot a prefetch filled
  int64_t bytes_read = 0;                          // from the checkpoint, misses + prefetches
  int64_t prefetches = 0;                          // slots filled by prefetch
  int64_t predicted = 0, predicted_used = 0;       // predicted experts, and those then used
  double stall_seconds = 0;                        // forward pass waiting for expert bytes
  int64_t host_copy_bytes = 0;  // device backends: the experts' pinned host copy (0: none)
  double hit_rate() const { return lookups ? double(hits) / double(lookups) : 0.0; }
};

class ExpertCache {
 public:
  // `w` holds every MoE layer's experts as loaded (views into `ckpt`'s mapping, never read by
  // compute once streamed); call before UploadWeights, which then uploads only their resident
  // parts. Throws when one expert is larger than the budget (naming both) or a span is not in a
  // shard file.
  ExpertCache(const Checkpoint& ckpt, ModelWeights& w, kernels::Backend& be,
              const ExpertCacheOptions& opts);
  ~ExpertCache();
  ExpertCache(const ExpertCache&) = delete;
  ExpertCache& operator=(const ExpertCache&) = delete;

  // Expert `expert` of layer `layer`, loaded (waiting for or doing the read on a miss). Valid
  // until the next Acquire: the forward pass runs one expert at a time.
  const GatedMlp& Acquire(int64_t layer, int64_t expert);
  // Starts reading these experts of `layer` (a prediction) into free or least recently used
  // slots, never evicting what this layer's computation still needs (`protect`: experts of
  // `protect_layer`). At most half the slots are filled by one call.
  void Prefetch(int64_t layer, std::span<const int32_t> experts, int64_t protect_layer,
                std::span<const int32_t> protect);

  // This layer's experts (ascending: the order Acquire will ask for them) that are not cached
  // are queued for the reader threads ahead of any prefetch, so several misses of one layer are
  // read in parallel; they still count as misses. The first missing one is left to Acquire.
  void ReadAhead(int64_t layer, std::span<const int32_t> experts);

  ExpertCacheStats stats() const;
  void ResetStats();
  // Bytes one expert occupies in its slot, and the slot count.
  int64_t slot_bytes() const;
  int64_t slots() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// "4GiB", "512MiB", "1.5G", "300M", "4096" (bytes); binary units (K/M/G/T = 2^10 ...). Throws
// tq::UsageError naming `flag` on anything else.
int64_t ParseByteSize(const std::string& text, const std::string& flag);

}  // namespace tq
