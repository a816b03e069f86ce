#include "model/expert_cache.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>

#include "core/error.h"
#include "core/sysinfo.h"
#include "core/thread_pool.h"
#include "io/checkpoint.h"
#include "model/weights.h"

namespace tq {
namespace {

constexpr size_t kSpanAlign = 64;  // each span's offset in a slot (SIMD loads, cache lines)

size_t AlignUp(size_t v) { return (v + kSpanAlign - 1) / kSpanAlign * kSpanAlign; }

using Clock = std::chrono::steady_clock;

// Host memory the pinned copy of the experts must leave free (the runtime, the page cache of
// the mapped non-expert weights).
constexpr int64_t kHostCopyHeadroom = int64_t(2) << 30;

}  // namespace

struct ExpertCache::Impl {
  // One storage span of one expert projection: where it is in the file and in the slot.
  struct Span {
    int shard = -1;       // index into fds (-1: an in-memory tensor, copied from `mem`)
    uint64_t offset = 0;  // in the shard file
    const uint8_t* mem = nullptr;
    size_t bytes = 0;
    size_t slot_offset = 0;
  };
  struct Expert {
    int64_t layer = 0, index = 0;
    const GatedMlp* tmpl = nullptr;  // as loaded: shapes, codebooks, rotations, bias
    std::vector<Span> spans;         // gate's, then up's, then down's
    size_t per_proj[3] = {0, 0, 0};  // spans per projection
    int32_t slot = -1;
    bool predicted = false;
  };
  enum class State { kEmpty, kLoading, kReady };
  struct Slot {
    int64_t owner = -1;  // index into experts
    State state = State::kEmpty;
    uint64_t last_use = 0, freq = 0;
    bool prefetched = false;  // filled by a prefetch, not yet used
    bool demanded = false;    // being filled by a reader for this layer (ReadAhead): a miss
    uint64_t prefetch_epoch = 0;
    uint64_t ticket = 0;  // a CopyAhead into the slot the compute stream has not yet waited for
    GatedMlp view;
  };
  struct Job {
    int32_t slot;
    int64_t expert;
    bool demand;
  };

  kernels::Backend* be = nullptr;
  ExpertCacheOptions opts;
  std::vector<int> fds;
  std::vector<int64_t> layer_base;  // layer -> index of its expert 0 (-1: not MoE)
  std::vector<Expert> experts;
  std::vector<Slot> slots;
  size_t slot_bytes = 0;
  DeviceBuffer arena;
  uint8_t* arena_base = nullptr;
  // Device backends with a copy queue, when host memory allows: every expert's slot image in
  // pinned host memory (read from the checkpoint once, at construction). A miss is then one
  // asynchronous copy on the compute stream and a prediction one on the copy queue that
  // overlaps compute; the host never waits for an expert.
  bool async = false;
  DeviceBuffer host_copy;

  std::mutex mu;
  std::condition_variable cv;  // a slot finished loading / a job was queued
  std::deque<Job> jobs;
  std::vector<std::thread> readers;
  bool stop = false;
  uint64_t tick = 0, epoch = 0;
  int64_t misses_since_aging = 0;
  int32_t in_use = -1;
  ExpertCacheStats st;

  ~Impl() {
    {
      std::lock_guard<std::mutex> lock(mu);
      stop = true;
    }
    cv.notify_all();
    for (std::thread& t : readers) t.join();
    for (int fd : fds)
      if (fd >= 0) ::close(fd);
  }

  uint8_t* SlotData(int32_t s) { return arena_base + size_t(s) * slot_bytes; }
  uint8_t* HostCopy(int64_t e) { return host_copy.as<uint8_t>() + size_t(e) * slot_bytes; }
  // Bytes of an expert's slot image: up to the end of its last span.
  size_t Extent(int64_t e) const {
    const Span& last = experts[size_t(e)].spans.back();
    return last.slot_offset + last.bytes;
  }

  // Span sp of expert x from the checkpoint (or memory) into dst.
  void ReadSpan(const Expert& x, const Span& sp, uint8_t* dst) {
    if (sp.shard < 0) {
      std::memcpy(dst, sp.mem, sp.bytes);
      return;
    }
    size_t done = 0;
    while (done < sp.bytes) {
      const ssize_t r =
          ::pread(fds[size_t(sp.shard)], dst + done, sp.bytes - done, off_t(sp.offset + done));
      if (r < 0 && errno == EINTR) continue;
      TQ_CHECK(r > 0, "expert cache",
               "reading layer {} expert {} ({} bytes at offset {} of shard {}): {}", x.layer,
               x.index, sp.bytes, sp.offset + done, sp.shard,
               r == 0 ? std::string("unexpected end of file") : std::strerror(errno));
      done += size_t(r);
    }
  }

  // Expert e's slot image into host_copy (spans at their slot offsets, the gaps zeroed).
  void ReadHostCopy(int64_t e) {
    const Expert& x = experts[size_t(e)];
    uint8_t* base = HostCopy(e);
    size_t end = 0;
    for (const Span& sp : x.spans) {
      std::memset(base + end, 0, sp.slot_offset - end);
      ReadSpan(x, sp, base + sp.slot_offset);
      end = sp.slot_offset + sp.bytes;
    }
  }

  // Reads expert e's spans into slot s and builds its linears there (no lock held: the slot is
  // kLoading, so nobody else touches it).
  void Fill(int32_t s, int64_t e) {
    const Expert& x = experts[size_t(e)];
    uint8_t* base = SlotData(s);
    if (async) {
      // In stream order: after the kernels that read the slot's last expert, and after a copy
      // into it still on the copy queue.
      Slot& sl = slots[size_t(s)];
      be->WaitCopy(std::exchange(sl.ticket, 0));
      be->CopyToDevice(base, HostCopy(e), Extent(e));
    } else {
      std::vector<uint8_t> staging;
      const bool host = be->memory_space() == MemorySpace::kHost;
      for (const Span& sp : x.spans) {
        uint8_t* dst = base + sp.slot_offset;
        if (!host) {
          staging.resize(sp.bytes);
          dst = staging.data();
        }
        ReadSpan(x, sp, dst);
        if (!host) {
          be->CopyToDevice(base + sp.slot_offset, dst, sp.bytes);
          be->Synchronize();  // the staging buffer is reused
        }
      }
    }
    BuildViews(s, e);
  }

  // Expert e's linears on slot s's storage.
  void BuildViews(int32_t s, int64_t e) {
    const Expert& x = experts[size_t(e)];
    uint8_t* base = SlotData(s);
    GatedMlp& v = slots[size_t(s)].view;
    size_t k = 0;
    const Linear* projs[3] = {x.tmpl->gate.get(), x.tmpl->up.get(), x.tmpl->down.get()};
    std::unique_ptr<Linear>* outs[3] = {&v.gate, &v.up, &v.down};
    for (int p = 0; p < 3; ++p) {
      std::vector<const void*> at;
      for (size_t i = 0; i < x.per_proj[p]; ++i, ++k) at.push_back(base + x.spans[k].slot_offset);
      *outs[p] = projs[p]->OnStorage(at);
    }
  }

  int64_t SpanBytes(int64_t e) const {
    int64_t b = 0;
    for (const Span& sp : experts[size_t(e)].spans) b += int64_t(sp.bytes);
    return b;
  }

  // The slot to (re)fill: an empty one, else the least valuable unpinned ready one; -1 if none.
  // `keep(slot)` vetoes a slot (prefetch: what the current layer still needs).
  template <typename Keep>
  int32_t Victim(Keep keep) {
    int32_t best = -1;
    for (int32_t s = 0; s < int32_t(slots.size()); ++s) {
      const Slot& sl = slots[size_t(s)];
      if (sl.state == State::kEmpty) return s;
      if (sl.state != State::kReady || keep(s)) continue;
      if (best < 0) {
        best = s;
        continue;
      }
      const Slot& b = slots[size_t(best)];
      const bool better =
          opts.policy == ExpertCachePolicy::kLfu
              ? (sl.freq < b.freq || (sl.freq == b.freq && sl.last_use < b.last_use))
              : sl.last_use < b.last_use;
      if (better) best = s;
    }
    return best;
  }

  // Makes slot s belong to expert e (kLoading). Lock held.
  void Claim(int32_t s, int64_t e) {
    Slot& sl = slots[size_t(s)];
    if (sl.owner >= 0) experts[size_t(sl.owner)].slot = -1;
    sl.owner = e;
    sl.state = State::kLoading;
    sl.prefetched = false;
    sl.demanded = false;
    sl.freq = 0;
    sl.view = GatedMlp{};
    experts[size_t(e)].slot = s;
  }

  void Touch(int32_t s) {
    Slot& sl = slots[size_t(s)];
    sl.last_use = ++tick;
    ++sl.freq;
  }

  void CountMiss() {
    ++st.misses;
    if (opts.policy == ExpertCachePolicy::kLfu && ++misses_since_aging >= int64_t(slots.size())) {
      misses_since_aging = 0;
      for (Slot& sl : slots) sl.freq /= 2;
    }
  }

  void ReaderLoop() {
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      cv.wait(lock, [&] { return stop || !jobs.empty(); });
      if (stop) return;
      const Job j = jobs.front();
      jobs.pop_front();
      lock.unlock();
      bool ok = true;
      try {
        Fill(j.slot, j.expert);
      } catch (const std::exception&) {
        ok = false;  // Acquire then reads it itself and reports the error
      }
      lock.lock();
      Slot& sl = slots[size_t(j.slot)];
      if (ok) {
        sl.state = State::kReady;
        sl.prefetched = !j.demand;
        sl.last_use = ++tick;
        if (!j.demand) ++st.prefetches;
        st.bytes_read += SpanBytes(j.expert);
      } else {
        experts[size_t(j.expert)].slot = -1;
        sl.owner = -1;
        sl.state = State::kEmpty;
        sl.view = GatedMlp{};
      }
      cv.notify_all();
    }
  }
};

ExpertCache::ExpertCache(const Checkpoint& ckpt, ModelWeights& w, kernels::Backend& be,
                         const ExpertCacheOptions& opts)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.be = &be;
  m.opts = opts;
  const auto& shards = ckpt.shards();
  for (const auto& sh : shards) {
    const int fd = ::open(sh->path().c_str(), O_RDONLY | O_CLOEXEC);
    TQ_CHECK(fd >= 0, "expert cache", "cannot open '{}' for reading experts: {}", sh->path(),
             std::strerror(errno));
    m.fds.push_back(fd);
  }
  // Where a host view points: a shard file offset, or (an imported tensor held in memory) itself.
  auto locate = [&](const void* p, size_t bytes, Impl::Span* sp) {
    const uint8_t* q = static_cast<const uint8_t*>(p);
    for (size_t i = 0; i < shards.size(); ++i) {
      const MappedFile& f = shards[i]->mapping();
      if (q >= f.data() && q + bytes <= f.data() + f.size()) {
        sp->shard = int(i);
        sp->offset = uint64_t(q - f.data());
        return;
      }
    }
    sp->mem = q;
  };
  size_t slot_bytes = 0;
  for (int64_t l = 0; l < int64_t(w.layers.size()); ++l) {
    MoeBlock* moe = w.layers[size_t(l)].moe.get();
    if (!moe) {
      m.layer_base.push_back(-1);
      continue;
    }
    moe->streamed = true;
    m.layer_base.push_back(int64_t(m.experts.size()));
    for (int64_t e = 0; e < int64_t(moe->experts.size()); ++e) {
      Impl::Expert x;
      x.layer = l;
      x.index = e;
      x.tmpl = &moe->experts[size_t(e)];
      size_t off = 0;
      const Linear* projs[3] = {x.tmpl->gate.get(), x.tmpl->up.get(), x.tmpl->down.get()};
      for (int p = 0; p < 3; ++p) {
        for (const Linear::StorageSpan& s : projs[p]->StorageSpans()) {
          Impl::Span sp;
          locate(s.host, s.bytes, &sp);
          sp.bytes = s.bytes;
          sp.slot_offset = off;
          off = AlignUp(off + s.bytes);
          x.spans.push_back(sp);
          ++x.per_proj[p];
        }
      }
      slot_bytes = std::max(slot_bytes, off);
      m.experts.push_back(std::move(x));
    }
  }
  TQ_CHECK(!m.experts.empty(), "expert cache", "--expert-cache: the model has no MoE experts");
  m.slot_bytes = slot_bytes;
  const int64_t n_slots =
      std::min<int64_t>(opts.budget_bytes / int64_t(slot_bytes), int64_t(m.experts.size()));
  TQ_CHECK(n_slots >= 1, "expert cache",
           "--expert-cache {} bytes holds no expert: one expert takes {} bytes ({:.1f} MiB)",
           opts.budget_bytes, slot_bytes, double(slot_bytes) / double(1 << 20));
  m.slots.resize(size_t(n_slots));
  m.arena = be.Allocate(size_t(n_slots) * slot_bytes, "the expert cache");
  m.arena_base = m.arena.as<uint8_t>();
  const int64_t copy_bytes = int64_t(m.experts.size()) * int64_t(slot_bytes);
  if (be.memory_space() != MemorySpace::kHost && be.HasCopyQueue() && opts.host_copy &&
      copy_bytes + kHostCopyHeadroom <= AvailableRamBytes()) {
    m.host_copy = be.AllocatePinnedHost(size_t(copy_bytes), "the experts' host copy");
    // Read by the process's thread pool (page cache or disk); it rethrows the first error.
    ThreadPool::Global().Run(int64_t(m.experts.size()),
                             [&m](int64_t e, int) { m.ReadHostCopy(e); });
    m.async = true;
    m.st.host_copy_bytes = copy_bytes;
  }
  m.st.slots = n_slots;
  m.st.slot_bytes = int64_t(slot_bytes);
  m.st.experts = int64_t(m.experts.size());
  // Prefetch needs room beside what a layer uses, and a host backend (a device one copies on
  // its stream from the forward pass's thread only).
  const int readers = n_slots >= 2 && be.memory_space() == MemorySpace::kHost
                          ? std::max(0, opts.reader_threads)
                          : 0;
  for (int i = 0; i < readers; ++i) m.readers.emplace_back([&m] { m.ReaderLoop(); });
}

ExpertCache::~ExpertCache() = default;

int64_t ExpertCache::slot_bytes() const { return int64_t(impl_->slot_bytes); }
int64_t ExpertCache::slots() const { return int64_t(impl_->slots.size()); }

const GatedMlp& ExpertCache::Acquire(int64_t layer, int64_t expert) {
  Impl& m = *impl_;
  TQ_CHECK(layer >= 0 && layer < int64_t(m.layer_base.size()) && m.layer_base[size_t(layer)] >= 0,
           "expert cache", "layer {} has no experts", layer);
  const int64_t id = m.layer_base[size_t(layer)] + expert;
  std::unique_lock<std::mutex> lock(m.mu);
  ++m.st.lookups;
  Impl::Expert& x = m.experts[size_t(id)];
  if (x.predicted) {
    ++m.st.predicted_used;
    x.predicted = false;
  }
  const auto t0 = Clock::now();
  bool waited = false;
  for (;;) {
    const int32_t s = x.slot;
    if (s >= 0) {
      Impl::Slot& sl = m.slots[size_t(s)];
      if (sl.state == Impl::State::kReady) {
        if (sl.demanded) {  // read by ReadAhead for this use: a miss read in parallel
          m.CountMiss();
          sl.demanded = false;
        } else {
          ++m.st.hits;
        }
        if (sl.prefetched) ++m.st.prefetch_hits;
        sl.prefetched = false;
        m.be->WaitCopy(std::exchange(sl.ticket, 0));  // (async) its copy ahead, if pending
        m.Touch(s);
        m.in_use = s;
        if (waited) m.st.stall_seconds += std::chrono::duration<double>(Clock::now() - t0).count();
        return sl.view;
      }
      waited = true;  // a prefetch is reading it
      m.cv.wait(lock);
      continue;
    }
    const int32_t v = m.Victim([](int32_t) { return false; });
    if (v < 0) {  // every slot is being read: wait for one
      waited = true;
      m.cv.wait(lock);
      continue;
    }
    m.Claim(v, id);
    lock.unlock();
    try {
      m.Fill(v, id);
    } catch (...) {
      lock.lock();
      m.slots[size_t(v)] = Impl::Slot{};
      x.slot = -1;
      m.cv.notify_all();
      throw;
    }
    lock.lock();
    Impl::Slot& sl = m.slots[size_t(v)];
    sl.state = Impl::State::kReady;
    m.Touch(v);
    m.in_use = v;
    m.CountMiss();
    m.st.bytes_read += m.SpanBytes(id);
    m.st.stall_seconds += std::chrono::duration<double>(Clock::now() - t0).count();
    m.cv.notify_all();
    return sl.view;
  }
}

void ExpertCache::Prefetch(int64_t layer, std::span<const int32_t> experts, int64_t protect_layer,
                           std::span<const int32_t> protect) {
  Impl& m = *impl_;
  if (m.readers.empty() && !(m.async && m.opts.reader_threads > 0)) return;
  const int64_t base = m.layer_base[size_t(layer)];
  const int64_t pbase = protect_layer >= 0 ? m.layer_base[size_t(protect_layer)] : -1;
  std::lock_guard<std::mutex> lock(m.mu);
  const uint64_t epoch = ++m.epoch;
  const int64_t n_layer =
      layer + 1 < int64_t(m.layer_base.size()) && m.layer_base[size_t(layer) + 1] >= 0
          ? m.layer_base[size_t(layer) + 1] - base
          : int64_t(m.experts.size()) - base;
  for (int64_t i = 0; i < n_layer; ++i) m.experts[size_t(base + i)].predicted = false;
  std::vector<bool> protected_slot(m.slots.size(), false);
  if (pbase >= 0) {
    for (int32_t e : protect) {
      const int32_t s = m.experts[size_t(pbase + e)].slot;
      if (s >= 0) protected_slot[size_t(s)] = true;
    }
  }
  if (m.in_use >= 0) protected_slot[size_t(m.in_use)] = true;
  int64_t budget = int64_t(m.slots.size()) / 2;
  for (int32_t e : experts) {
    Impl::Expert& x = m.experts[size_t(base + e)];
    if (x.predicted) continue;  // listed twice
    x.predicted = true;
    ++m.st.predicted;
    if (x.slot >= 0) {
      protected_slot[size_t(x.slot)] = true;  // already there (or on its way): keep it
      continue;
    }
    if (budget <= 0) continue;
    const int32_t v = m.Victim([&](int32_t s) {
      const Impl::Slot& sl = m.slots[size_t(s)];
      return protected_slot[size_t(s)] || (sl.prefetched && sl.prefetch_epoch + 1 >= epoch);
    });
    if (v < 0) break;
    --budget;
    m.Claim(v, base + e);
    m.slots[size_t(v)].prefetch_epoch = epoch;
    protected_slot[size_t(v)] = true;
    if (m.async) {
      // On the copy queue, overlapping this layer's compute; Acquire makes the compute stream
      // wait for it.
      Impl::Slot& sl = m.slots[size_t(v)];
      sl.ticket = m.be->CopyAhead(m.SlotData(v), m.HostCopy(base + e), m.Extent(base + e));
      m.BuildViews(v, base + e);
      sl.state = Impl::State::kReady;
      sl.prefetched = true;
      sl.last_use = ++m.tick;
      ++m.st.prefetches;
      m.st.bytes_read += m.SpanBytes(base + e);
      continue;
    }
    for (const Impl::Span& sp : x.spans)
      if (sp.shard >= 0)
        ::posix_fadvise(m.fds[size_t(sp.shard)], off_t(sp.offset), off_t(sp.bytes),
                        POSIX_FADV_WILLNEED);
    m.jobs.push_back({v, base + e, false});
  }
  m.cv.notify_all();
}

void ExpertCache::ReadAhead(int64_t layer, std::span<const int32_t> experts) {
  Impl& m = *impl_;
  if (m.readers.empty()) return;
  const int64_t base = m.layer_base[size_t(layer)];
  std::lock_guard<std::mutex> lock(m.mu);
  std::vector<bool> keep(m.slots.size(), false);
  for (int32_t e : experts) {
    const int32_t s = m.experts[size_t(base + e)].slot;
    if (s >= 0) keep[size_t(s)] = true;
  }
  if (m.in_use >= 0) keep[size_t(m.in_use)] = true;
  // Leave the first missing expert to Acquire (the forward thread reads it itself) and at least
  // one slot free of claims, so the loop always makes progress.
  int64_t budget = int64_t(m.slots.size()) - 1;
  std::vector<Impl::Job> queued;
  bool first = true;
  for (int32_t e : experts) {
    Impl::Expert& x = m.experts[size_t(base + e)];
    if (x.slot >= 0) continue;
    if (first) {
      first = false;
      continue;
    }
    if (budget-- <= 0) break;
    const int32_t v = m.Victim([&](int32_t s) { return keep[size_t(s)]; });
    if (v < 0) break;
    m.Claim(v, base + e);
    m.slots[size_t(v)].demanded = true;
    keep[size_t(v)] = true;
    queued.push_back({v, base + e, true});
  }
  // Ahead of any prefetch of the next layer, in the order the forward pass uses them.
  for (auto it = queued.rbegin(); it != queued.rend(); ++it) m.jobs.push_front(*it);
  m.cv.notify_all();
}

ExpertCacheStats ExpertCache::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->st;
}

void ExpertCache::ResetStats() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  ExpertCacheStats& s = impl_->st;
  s = ExpertCacheStats{.slots = s.slots,
                       .slot_bytes = s.slot_bytes,
                       .experts = s.experts,
                       .host_copy_bytes = s.host_copy_bytes};
}

int64_t ParseByteSize(const std::string& text, const std::string& flag) {
  auto bad = [&]() -> UsageError {
    return UsageError(flag, fmt::format("'{}' is not a size (examples: 4GiB, 512MiB, 1.5G, 300M, "
                                        "4096)",
                                        text));
  };
  size_t pos = 0;
  double v = 0;
  try {
    v = std::stod(text, &pos);
  } catch (const std::exception&) {
    throw bad();
  }
  if (!std::isfinite(v) || v < 0) throw bad();
  std::string unit = text.substr(pos);
  for (char& c : unit) c = char(std::tolower(static_cast<unsigned char>(c)));
  double mul = 0;
  if (unit.empty() || unit == "b") mul = 1;
  for (auto [names, m] : {std::pair{"k", 1.0}, {"m", 2.0}, {"g", 3.0}, {"t", 4.0}}) {
    const std::string n(names);
    if (unit == n || unit == n + "b" || unit == n + "ib") mul = std::pow(1024.0, m);
  }
  if (mul == 0) throw bad();
  const double bytes = v * mul;
  if (bytes > 9.0e18) throw bad();
  return int64_t(bytes);
}

}  // namespace tq
