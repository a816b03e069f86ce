#include "convert/calibration.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>
#include <span>
#include <utility>

#include "convert/convert.h"
#include "convert/self_text.h"
#include "convert/sensitivity.h"
#include "core/error.h"
#include "core/progress.h"
#include "core/sysinfo.h"
#include "io/crc32c.h"
#include "kernels/backend.h"
#include "model/model.h"

namespace tq {
namespace {

constexpr const char* kDevice = "tq-self-calibration";

// Running Σ x xᵀ of one input (the lower triangle; mirrored when read out): whole, or with
// block > 0 the diagonal blocks of Σ (R x)(R x)ᵀ.
struct Accumulator {
  int64_t dim = 0;
  int64_t count = 0;
  int64_t block = 0;                             // 0: whole
  const quant::HadamardRotation* rot = nullptr;  // per-block: R (null: the identity)
  std::vector<double> s;                         // [dim, dim], or [dim / block][block, block]
  std::vector<std::string> names;
  std::mutex mu;
};

// How one linear's input is accumulated (per-block moments: in its rotated basis).
struct Basis {
  int64_t block = 0;
  const quant::HadamardRotation* rot = nullptr;
};

// What the recording backend records into: weights known by (bytes, CRC-32C) of their data.
class Recorder {
 public:
  explicit Recorder(kernels::Backend& gemm) : gemm_(&gemm) {}
  void Expect(const std::string& name, const std::vector<uint8_t>& bytes) {
    by_print_[{bytes.size(), Crc32c(0, bytes.data(), bytes.size())}].push_back(name);
    sizes_.insert(bytes.size());
  }
  // A buffer the model uploaded: if its bytes are one expected weight's, remember where it is.
  void Identify(const void* at, const void* host, size_t bytes) {
    if (!at || !sizes_.count(bytes)) return;
    const auto it = by_print_.find({bytes, Crc32c(0, host, bytes)});
    if (it == by_print_.end() || it->second.size() != 1) return;  // unknown or ambiguous
    std::lock_guard<std::mutex> lock(mu_);
    name_of_[at] = it->second[0];
  }
  int64_t identified() const { return int64_t(name_of_.size()); }
  void set_enabled(bool on) { enabled_ = on; }
  void SetBasis(const std::string& name, Basis b) { basis_[name] = b; }

  // x [n, dim] went into the weights at `ptrs`.
  void Record(const float* x, int64_t n, int64_t dim, std::span<const void* const> ptrs) {
    if (!enabled_ || n <= 0) return;
    std::vector<std::string> names;
    for (const void* p : ptrs) {
      const auto it = name_of_.find(p);
      if (it != name_of_.end()) names.push_back(it->second);
    }
    if (names.empty()) return;
    std::string key;
    for (const std::string& s : names) key += s + "|";
    Accumulator* acc = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto& slot = accs_[key];
      if (!slot) {
        slot = std::make_unique<Accumulator>();
        slot->dim = dim;
        const auto b = basis_.find(names[0]);
        if (b != basis_.end()) {
          slot->block = b->second.block;
          slot->rot = b->second.rot;
        }
        for (const std::string& n : names) {
          const auto o = basis_.find(n);
          TQ_CHECK(o != basis_.end() ? o->second.block == slot->block && o->second.rot == slot->rot
                                     : slot->block == 0,
                   "self-calibrate", "linears {} read one input in different bases", key);
        }
        TQ_CHECK(slot->block == 0 || dim % slot->block == 0, "self-calibrate",
                 "blocks of {} for an input of {}", slot->block, dim);
        TQ_CHECK(!slot->rot || slot->rot->dim() == dim, "self-calibrate",
                 "rotation of {} for an input of {}", slot->rot ? slot->rot->dim() : 0, dim);
        slot->s.assign(size_t(dim * (slot->block > 0 ? slot->block : dim)), 0.0);
        slot->names = names;
      }
      acc = slot.get();
    }
    TQ_CHECK(acc->dim == dim, "self-calibrate", "input of {} has {} features, then {}", key,
             acc->dim, dim);
    if (acc->block > 0) {
      AddBlocks(acc, x, n);
      return;
    }
    // xᵀ x [dim, dim] with the backend's own float GEMM (y = a · bᵀ with a = b = xᵀ [dim, n]),
    // then added to the double sums (float over one call's <= 512 tokens, double across calls).
    thread_local std::vector<float> xt, y;
    xt.resize(size_t(dim * n));
    y.resize(size_t(dim * dim));
    for (int64_t t = 0; t < n; ++t)
      for (int64_t i = 0; i < dim; ++i) xt[size_t(i * n + t)] = x[t * dim + i];
    gemm_->MatMul(xt.data(), dim, TensorView{xt.data(), DType::F32, {dim, n}}, nullptr, y.data());
    std::lock_guard<std::mutex> lock(acc->mu);
    for (int64_t i = 0; i < dim; ++i) {
      double* si = acc->s.data() + i * dim;
      const float* yi = y.data() + i * dim;
      for (int64_t j = 0; j <= i; ++j) si[j] += double(yi[j]);
    }
    acc->count += n;
  }

  const std::map<std::string, std::unique_ptr<Accumulator>>& accumulators() const { return accs_; }

 private:
  // Per-block: x' = R x [n, dim], then for each block k of b columns Σ x'_k x'_kᵀ [b, b] with the
  // float GEMM (n · dim · b multiply-adds instead of n · dim²).
  void AddBlocks(Accumulator* acc, const float* x, int64_t n) {
    const int64_t dim = acc->dim, b = acc->block;
    thread_local std::vector<float> xr, xt, y;
    xr.assign(x, x + n * dim);
    if (acc->rot) acc->rot->ForwardRows(xr.data(), n);
    xt.resize(size_t(b * n));
    y.resize(size_t(b * b));
    for (int64_t k = 0; k < dim / b; ++k) {
      for (int64_t t = 0; t < n; ++t)
        for (int64_t i = 0; i < b; ++i) xt[size_t(i * n + t)] = xr[size_t(t * dim + k * b + i)];
      gemm_->MatMul(xt.data(), b, TensorView{xt.data(), DType::F32, {b, n}}, nullptr, y.data());
      std::lock_guard<std::mutex> lock(acc->mu);
      double* sk = acc->s.data() + k * b * b;
      for (int64_t i = 0; i < b; ++i)
        for (int64_t j = 0; j <= i; ++j) sk[i * b + j] += double(y[size_t(i * b + j)]);
    }
    std::lock_guard<std::mutex> lock(acc->mu);
    acc->count += n;
  }

  std::map<std::pair<size_t, uint32_t>, std::vector<std::string>> by_print_;
  std::set<size_t> sizes_;
  std::map<const void*, std::string> name_of_;
  std::map<std::string, std::unique_ptr<Accumulator>> accs_;
  std::map<std::string, Basis> basis_;  // by linear name; absent: whole
  std::mutex mu_;
  bool enabled_ = false;
  kernels::Backend* gemm_;  // computes xᵀ x
};

// The cpu backend, with MatMul / MatMulGroup also handing their input to the recorder.
class RecordingBackend final : public kernels::Backend {
 public:
  explicit RecordingBackend(kernels::Backend& inner) : in_(inner) {}
  void set_recorder(Recorder* r) { rec_ = r; }

  std::string_view name() const override { return kDevice; }
  MemorySpace memory_space() const override { return in_.memory_space(); }
  bool Supports(kernels::Op op) const override { return in_.Supports(op); }
  std::string Describe() const override { return "self-calibration over " + in_.Describe(); }
  DeviceBuffer Allocate(size_t bytes, std::string_view what) override {
    return in_.Allocate(bytes, what);
  }
  int64_t AllocatedBytes() const override { return in_.AllocatedBytes(); }
  DeviceBuffer Upload(const void* host, size_t bytes, std::string_view what) override {
    DeviceBuffer b = in_.Upload(host, bytes, what);
    if (rec_) rec_->Identify(b.data(), host, bytes);
    return b;
  }
  void CopyToDevice(void* dst, const void* src, size_t bytes) override {
    in_.CopyToDevice(dst, src, bytes);
  }
  void Download(void* dst, const void* src, size_t bytes) override {
    in_.Download(dst, src, bytes);
  }
  void Synchronize() override { in_.Synchronize(); }
  void MemoryInfo(size_t* free_bytes, size_t* total_bytes) const override {
    in_.MemoryInfo(free_bytes, total_bytes);
  }
  void EmbedRows(const TensorView& table, const int32_t* ids, int64_t n, float* out) override {
    in_.EmbedRows(table, ids, n, out);
  }
  void PackedEmbedRows(const kernels::PackedMatrix& w, const int32_t* ids, int64_t n,
                       float* out) override {
    in_.PackedEmbedRows(w, ids, n, out);
  }
  void Add(float* y, const float* x, int64_t n) override { in_.Add(y, x, n); }
  void RmsNorm(const float* x, int64_t rows, int64_t dim, const float* weight, float eps,
               float* out) override {
    in_.RmsNorm(x, rows, dim, weight, eps, out);
  }
  void AddRmsNorm(float* x, const float* y, int64_t rows, int64_t dim, const float* weight,
                  float eps, float* out) override {
    in_.AddRmsNorm(x, y, rows, dim, weight, eps, out);
  }
  void Rotate(const kernels::RotationView& r, const float* x, int64_t rows, float* out) override {
    in_.Rotate(r, x, rows, out);
  }
  void MatMul(const float* x, int64_t n, const TensorView& w, const float* bias,
              float* y) override {
    in_.MatMul(x, n, w, bias, y);
    if (rec_) {
      const void* p = w.data;
      rec_->Record(x, n, w.dim(1), {&p, 1});
    }
  }
  void MatMulGroup(const float* x, int64_t n,
                   std::span<const kernels::MatMulOutput> outs) override {
    in_.MatMulGroup(x, n, outs);
    if (rec_ && !outs.empty()) {
      std::vector<const void*> ptrs;
      for (const kernels::MatMulOutput& o : outs) ptrs.push_back(o.w->data);
      rec_->Record(x, n, outs[0].w->dim(1), ptrs);
    }
  }
  void PackedMatMul(const float* x, int64_t n, const kernels::PackedMatrix& w, const float* bias,
                    float* y) override {
    in_.PackedMatMul(x, n, w, bias, y);
  }
  void PackedMatMulGroup(const float* x, int64_t n,
                         std::span<const kernels::PackedMatMulOutput> outs) override {
    in_.PackedMatMulGroup(x, n, outs);
  }
  void RotatedPackedMatMulGroup(const kernels::RotationView& r, const float* x, int64_t n,
                                std::span<const kernels::PackedMatMulOutput> outs) override {
    in_.RotatedPackedMatMulGroup(r, x, n, outs);
  }
  void Rope(float* x, int64_t rows, int64_t heads, int64_t head_dim, const int64_t* positions,
            const float* inv_freq, float attn_factor) override {
    in_.Rope(x, rows, heads, head_dim, positions, inv_freq, attn_factor);
  }
  void SiluMul(const float* gate, const float* up, int64_t n, float* out) override {
    in_.SiluMul(gate, up, n, out);
  }
  void SiluMulRotate(const float* gate, const float* up, int64_t rows,
                     const kernels::RotationView& r, float* out) override {
    in_.SiluMulRotate(gate, up, rows, r, out);
  }
  void Attention(const float* q, int64_t n, int64_t pos0, const kernels::KvView& kv,
                 const kernels::AttentionParams& p, float* out) override {
    in_.Attention(q, n, pos0, kv, p, out);
  }
  void CompressedAttention(const float* q, int64_t n, int64_t pos0,
                           const kernels::CompressedKvView& kv, const kernels::AttentionParams& p,
                           float* out) override {
    in_.CompressedAttention(q, n, pos0, kv, p, out);
  }
  void KvStore(const float* src, int64_t n, int64_t heads, int64_t head_dim, void* dst, DType dtype,
               int64_t head_stride, int64_t slot0) override {
    in_.KvStore(src, n, heads, head_dim, dst, dtype, head_stride, slot0);
  }
  void KvStorePair(const float* k, const float* v, int64_t n, int64_t heads, int64_t head_dim,
                   void* k_dst, void* v_dst, DType dtype, int64_t head_stride,
                   int64_t slot0) override {
    in_.KvStorePair(k, v, n, heads, head_dim, k_dst, v_dst, dtype, head_stride, slot0);
  }
  void KvEncode(const kernels::KvEncodeParams& p, const void* src, DType src_dtype, int64_t n,
                int64_t heads, int64_t pos_stride, int64_t head_stride,
                const kernels::KvCodeSlots& dst, int64_t slot0) override {
    in_.KvEncode(p, src, src_dtype, n, heads, pos_stride, head_stride, dst, slot0);
  }
  void CenterRows(float* x, int64_t rows, int64_t width, float* mean, int64_t mean_rows) override {
    in_.CenterRows(x, rows, width, mean, mean_rows);
  }
  void GatherColumns(const float* x, int64_t rows, int64_t dim, const int32_t* order,
                     int64_t period, float* out) override {
    in_.GatherColumns(x, rows, dim, order, period, out);
  }
  void MoeRoute(const float* logits, int64_t n, const kernels::MoeRouting& r, int32_t* chosen,
                float* weight) override {
    in_.MoeRoute(logits, n, r, chosen, weight);
  }
  void GatherRows(const float* src, const int32_t* rows, int64_t count, int64_t dim,
                  float* dst) override {
    in_.GatherRows(src, rows, count, dim, dst);
  }
  void ScatterAddRows(const float* src, const int32_t* rows, const float* weight, int64_t count,
                      int64_t dim, float* dst) override {
    in_.ScatterAddRows(src, rows, weight, count, dim, dst);
  }
  void Argmax(const float* x, int64_t rows, int64_t n, int32_t* out) override {
    in_.Argmax(x, rows, n, out);
  }
  void Copy(void* dst, const void* src, size_t bytes) override { in_.Copy(dst, src, bytes); }
  bool SupportsFamilyOp(kernels::FamilyOp op) const override { return in_.SupportsFamilyOp(op); }
  void Scale(float* x, int64_t n, float s) override { in_.Scale(x, n, s); }
  void GeluTanhMul(const float* gate, const float* up, int64_t n, float* out) override {
    in_.GeluTanhMul(gate, up, n, out);
  }
  void ClampedSwiglu(const float* gate, const float* up, int64_t n,
                     const kernels::ClampedSwigluParams& p, float* out) override {
    in_.ClampedSwiglu(gate, up, n, p, out);
  }
  void Softcap(float* x, int64_t n, float cap) override { in_.Softcap(x, n, cap); }
  void SigmoidGateRows(float* x, const float* g, int64_t rows, int64_t dim) override {
    in_.SigmoidGateRows(x, g, rows, dim);
  }
  void AttentionVariant(const float* q, int64_t n, int64_t pos0, const kernels::KvView& kv,
                        const kernels::SinkAttentionParams& p, float* out) override {
    in_.AttentionVariant(q, n, pos0, kv, p, out);
  }
  void CausalConv1d(const float* x, int64_t n, int64_t x_stride, const float* w, const float* bias,
                    float* state, const kernels::Conv1dParams& p, float* y) override {
    in_.CausalConv1d(x, n, x_stride, w, bias, state, p, y);
  }
  void GatedDeltaNet(const float* q, const float* k, const float* v, const float* g,
                     const float* beta, int64_t n, float* state, const kernels::DeltaNetParams& p,
                     float* out) override {
    in_.GatedDeltaNet(q, k, v, g, beta, n, state, p, out);
  }
  void Ssd(const float* x, const float* B, const float* C, const float* dt, const float* A,
           const float* D, int64_t n, float* state, const kernels::SsdParams& p,
           float* y) override {
    in_.Ssd(x, B, C, dt, A, D, n, state, p, y);
  }
  void DeltaNetGates(const float* b, const float* a, int64_t stride, int64_t n, int64_t heads,
                     const float* a_log, const float* dt_bias, float* g, float* beta) override {
    in_.DeltaNetGates(b, a, stride, n, heads, a_log, dt_bias, g, beta);
  }
  void GatedRmsNorm(const float* x, int64_t rows, int64_t dim, int64_t group, const float* z,
                    const float* weight, float eps, bool gate_first, float* out) override {
    in_.GatedRmsNorm(x, rows, dim, group, z, weight, eps, gate_first, out);
  }
  void SsmDt(const float* dt, int64_t stride, int64_t n, int64_t heads, const float* bias, float lo,
             float hi, float* out) override {
    in_.SsmDt(dt, stride, n, heads, bias, lo, hi, out);
  }
  void Relu2(const float* x, int64_t n, float* out) override { in_.Relu2(x, n, out); }
  void PartialRope(float* x, int64_t rows, int64_t heads, int64_t head_dim, int64_t rotary_dim,
                   const int64_t* positions, const float* inv_freq, float attn_factor) override {
    in_.PartialRope(x, rows, heads, head_dim, rotary_dim, positions, inv_freq, attn_factor);
  }
  void HeadMatMul(const float* x, int64_t n, const float* w, const kernels::HeadMatMulParams& p,
                  float* y) override {
    in_.HeadMatMul(x, n, w, p, y);
  }
  float* RotationScratch(int64_t count) override { return in_.RotationScratch(count); }

 private:
  kernels::Backend& in_;
  Recorder* rec_ = nullptr;
};

// The process's recording backend (registered once as kDevice; one calibration at a time).
RecordingBackend& TheRecordingBackend() {
  static RecordingBackend* be = [] {
    auto* b = new RecordingBackend(kernels::CpuBackend());  // lives until exit (registry)
    kernels::RegisterBackend(kDevice, b);
    return b;
  }();
  return *be;
}

// The moment block to use: the option if given, else TURBOQUANT_CALIBRATION_BLOCK if set, else
// whole moments unless they would exceed kMaxWholeMomentBytes.
int64_t MomentBlockOption(int64_t option, int64_t whole_bytes) {
  if (option >= 0) return option;
  if (const char* env = std::getenv("TURBOQUANT_CALIBRATION_BLOCK"); env && *env) {
    char* end = nullptr;
    const long long v = std::strtoll(env, &end, 10);
    if (*end != 0 || v < 0 || v > (1 << 16))
      throw UsageError(fmt::format("TURBOQUANT_CALIBRATION_BLOCK={}", env),
                       "expected a block size in [0, 65536] (0 = whole moments)");
    return v;
  }
  return whole_bytes > kMaxWholeMomentBytes ? kMomentBlock : 0;
}

std::mutex& CalibrationMutex() {
  static std::mutex mu;
  return mu;
}

// Mean of the accumulators' sums (lower triangles), mirrored.
std::shared_ptr<InputMoments> MeanOf(const std::vector<const Accumulator*>& accs, bool pooled) {
  auto m = std::make_shared<InputMoments>();
  m->dim = accs.at(0)->dim;
  m->block = accs.at(0)->block;
  m->pooled = pooled;
  // Square matrices of b (whole: one of dim).
  const int64_t b = m->block > 0 ? m->block : m->dim, count = m->dim / b;
  m->h.assign(size_t(count * b * b), 0.0);
  for (const Accumulator* a : accs) {
    TQ_CHECK(a->dim == m->dim && a->block == m->block && a->rot == accs[0]->rot, "self-calibrate",
             "inputs of {} and {} features (blocks {} and {}) pooled", m->dim, a->dim, m->block,
             a->block);
    m->tokens += a->count;
    for (size_t i = 0; i < m->h.size(); ++i) m->h[i] += a->s[i];
  }
  const double inv = m->tokens > 0 ? 1.0 / double(m->tokens) : 0.0;
  for (int64_t k = 0; k < count; ++k) {
    double* hk = m->h.data() + k * b * b;
    for (int64_t i = 0; i < b; ++i) {
      for (int64_t j = 0; j <= i; ++j) {
        const double v = hk[i * b + j] * inv;
        hk[i * b + j] = v;
        hk[j * b + i] = v;
      }
    }
  }
  return m;
}

}  // namespace

CalibrationResult SelfCalibrate(const std::string& model_dir, const QuantRecipe& recipe,
                                const CalibrationOptions& o,
                                const std::function<std::vector<uint8_t>(size_t)>& read) {
  if (o.tokens < kMinCalibrationTokens || o.tokens > kMaxCalibrationTokens) {
    throw UsageError(fmt::format("--self-calibrate {}", o.tokens),
                     fmt::format("the token count must be 0 (off) or in [{}, {}]",
                                 kMinCalibrationTokens, kMaxCalibrationTokens));
  }
  TQ_CHECK(o.sequence_tokens >= 2, "self-calibrate", "sequences of {} tokens", o.sequence_tokens);
  const Timer timer;
  std::lock_guard<std::mutex> one_at_a_time(CalibrationMutex());
  RecordingBackend& be = TheRecordingBackend();
  Recorder rec(kernels::CpuBackend());
  std::vector<size_t> linears;
  int64_t whole_bytes = 0;  // of whole moments, one per linear (an upper bound: q/k/v share one)
  for (size_t i = 0; i < recipe.tensors.size(); ++i) {
    const TensorDecision& d = recipe.tensors[i];
    if (d.quantize && IsDecoderLinear(d.role) && d.shape.size() == 2) {
      linears.push_back(i);
      rec.Expect(d.name, read(i));
      whole_bytes += d.shape[1] * d.shape[1] * int64_t(sizeof(double));
    }
  }
  // Per-block moments, in each linear's rotated basis (the rotations convert applies).
  const int64_t block = MomentBlockOption(o.moment_block, whole_bytes);
  std::map<std::string, quant::HadamardRotation> rotations;  // by rotation group
  if (block > 0) {
    for (size_t i : linears) {
      const TensorDecision& d = recipe.tensors[i];
      Basis b;
      b.block = MomentBlockFor(d.shape[1], block);
      if (d.rotation_block > 0) {
        auto [it, fresh] = rotations.try_emplace(d.rotation_group);
        if (fresh)
          it->second =
              quant::HadamardRotation(quant::HadamardSigns::Generate(
                                          d.shape[1], RotationGroupSeed(o.seed, d.rotation_group)),
                                      d.rotation_block);
        b.rot = &it->second;
      }
      rec.SetBasis(d.name, b);
    }
    if (o.progress)
      std::fprintf(stderr, "self-calibrate: per-block moments (blocks of up to %lld)\n",
                   static_cast<long long>(block));
  }
  be.set_recorder(&rec);
  struct Detach {
    RecordingBackend& be;
    ~Detach() { be.set_recorder(nullptr); }
  } detach{be};
  ModelLoadOptions lo;
  lo.device = kDevice;
  const std::unique_ptr<Model> model = Model::Load(model_dir, lo);
  TQ_CHECK(rec.identified() > 0 || linears.empty(), "self-calibrate",
           "none of the {} linears of {} was found in the loaded model (were they converted at "
           "load?)",
           linears.size(), model_dir);

  // The text: S = ceil(N / L) sequences of L = sequence_tokens, sampled side by side (one batched
  // pass per step); the last one is recorded only up to N tokens in all.
  const int64_t vocab = model->vocab_size(), len = o.sequence_tokens;
  quant::SplitMix64 rng(o.seed ^ 0x63616c6962ull);  // "calib"
  std::vector<std::vector<int32_t>> seqs(size_t((o.tokens + len - 1) / len),
                                         std::vector<int32_t>(size_t(len)));
  for (auto& seq : seqs) seq[0] = int32_t(rng.Next() % uint64_t(vocab));
  rec.set_enabled(false);
  SampleContinuations(*model, seqs, kCalibrationTemperatures, rng);
  ProgressBar bar("self-calibrate: record", int64_t(seqs.size()), o.progress);
  std::vector<float> logits(static_cast<size_t>(vocab));
  rec.set_enabled(true);
  for (size_t s = 0; s < seqs.size(); ++s) {
    const int64_t n = std::min(len, o.tokens - int64_t(s) * len);
    KvCacheOptions kv;
    kv.max_tokens = n;
    kv.dtype = KvDType::kF32;
    auto cache = model->NewCache(kv);
    model->Forward(std::span<const int32_t>(seqs[s].data(), size_t(n)), *cache, logits.data());
    bar.Update(int64_t(s) + 1);
  }
  rec.set_enabled(false);
  bar.Finish();

  // Per linear: the accumulators it appeared in (one, unless calls grouped it differently).
  std::map<std::string, std::vector<const Accumulator*>> of_name;
  for (const auto& [key, acc] : rec.accumulators())
    for (const std::string& n : acc->names) of_name[n].push_back(acc.get());
  CalibrationResult res;
  res.tokens = o.tokens;
  res.moment_block = block;
  std::map<const Accumulator*, std::shared_ptr<const InputMoments>> shared;
  std::map<std::string, std::shared_ptr<const InputMoments>> pooled;  // by expert set
  for (size_t i : linears) {
    const TensorDecision& d = recipe.tensors[i];
    const auto it = of_name.find(d.name);
    // A linear the text never reached keeps nearest rounding, unless it is an expert (pooled).
    if (it == of_name.end() && !IsExpert(d.role)) continue;
    std::shared_ptr<const InputMoments> m;
    if (it == of_name.end()) {
    } else if (it->second.size() == 1) {
      auto& s = shared[it->second[0]];
      if (!s) s = MeanOf(it->second, false);
      m = s;
    } else {
      m = MeanOf(it->second, false);
    }
    if (IsExpert(d.role)) {
      ++res.expert_linears;
      const int64_t need = o.min_expert_tokens > 0 ? o.min_expert_tokens : d.shape[1];
      if (!m || m->tokens < need) {
        const std::string set = SensitivitySetKey(d);
        auto& p = pooled[set];
        if (!p) {
          std::set<const Accumulator*> members;
          for (size_t j : linears) {
            const TensorDecision& e = recipe.tensors[j];
            if (!IsExpert(e.role) || SensitivitySetKey(e) != set) continue;
            const auto f = of_name.find(e.name);
            if (f != of_name.end()) members.insert(f->second.begin(), f->second.end());
          }
          if (!members.empty()) p = MeanOf({members.begin(), members.end()}, true);
        }
        if (!p) continue;  // no expert of the set was reached
        m = p;
        ++res.pooled_experts;
      }
    }
    res.moments[d.name] = std::move(m);
  }
  res.seconds = timer.Seconds();
  return res;
}

int64_t MomentBlockFor(int64_t dim, int64_t b) {
  int64_t p = 1;
  while (p * 2 <= b && dim % (p * 2) == 0) p *= 2;
  return p;
}

std::vector<double> RotatedMoment(const InputMoments& m, const quant::HadamardRotation* rot) {
  if (m.block > 0) {  // already rotated: the blocks on the diagonal of a dense [dim, dim]
    const int64_t d = m.dim, b = m.block;
    TQ_CHECK(!rot || rot->dim() == d, "self-calibrate", "rotation of {} for an input of {}",
             rot ? rot->dim() : 0, d);
    std::vector<double> h(size_t(d * d), 0.0);
    for (int64_t k = 0; k < d / b; ++k)
      for (int64_t i = 0; i < b; ++i)
        std::copy_n(m.h.data() + (k * b + i) * b, b, h.data() + (k * b + i) * d + k * b);
    return h;
  }
  if (!rot) return m.h;
  const int64_t d = m.dim;
  TQ_CHECK(rot->dim() == d, "self-calibrate", "rotation of {} for an input of {}", rot->dim(), d);
  std::vector<float> a(m.h.begin(), m.h.end());
  rot->ForwardRows(a.data(), d);  // H Rᵀ
  std::vector<float> t(size_t(d * d));
  for (int64_t i = 0; i < d; ++i)
    for (int64_t j = 0; j < d; ++j) t[size_t(j * d + i)] = a[size_t(i * d + j)];  // R H
  rot->ForwardRows(t.data(), d);                                                  // R H Rᵀ
  std::vector<double> h(size_t(d * d));
  for (int64_t i = 0; i < d; ++i)
    for (int64_t j = 0; j < d; ++j)
      h[size_t(i * d + j)] = 0.5 * (double(t[size_t(i * d + j)]) + double(t[size_t(j * d + i)]));
  return h;
}

}  // namespace tq
