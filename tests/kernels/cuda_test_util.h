// Shared by the CUDA conformance tests: the GPU backend (or the reason there is none), host <->
// device copies, and the results table (op, case, nmse, bound, pass) printed once at exit, in
// the style of llama.cpp's test-backend-ops.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/backend.h"
#if defined(TQ_WITH_CUDA)
#include "kernels/cuda/cuda_backend.h"
#endif

namespace tq::kernels::test {

// The cuda:0 backend, or null with the reason in *why (a CPU-only build, no GPU).
inline Backend* CudaOrWhy(std::string* why) {
#if defined(TQ_WITH_CUDA)
  static std::unique_ptr<Backend> gpu;
  static std::string reason;
  static std::once_flag once;
  std::call_once(once, [] {
    if (CudaDeviceCountImpl() == 0) {
      reason = "no CUDA device visible (the GPU conformance suite runs on the GPU machine)";
      return;
    }
    try {
      gpu = MakeCudaBackend(0);
    } catch (const std::exception& e) {
      reason = std::string("cuda:0 cannot be used: ") + e.what();
    }
  });
  *why = reason;
  return gpu.get();
#else
  *why = "this build has no CUDA backend (configure with --preset cuda)";
  return nullptr;
#endif
}

#define TQ_REQUIRE_CUDA(var)                                                \
  std::string var##_why;                                                    \
  ::tq::kernels::Backend* var = ::tq::kernels::test::CudaOrWhy(&var##_why); \
  if (!var) GTEST_SKIP() << var##_why

template <typename T>
DeviceBuffer Up(Backend& b, const std::vector<T>& v) {
  return b.Upload(v.data(), v.size() * sizeof(T), "test input");
}
template <typename T>
std::vector<T> Down(Backend& b, const DeviceBuffer& d, size_t count) {
  std::vector<T> v(count);
  if (count) b.Download(v.data(), d.data(), count * sizeof(T));
  return v;
}
// A device buffer of `count` elements, filled with NaN bytes (0xff) so unwritten outputs show.
template <typename T>
DeviceBuffer Poisoned(Backend& b, size_t count) {
  std::vector<uint8_t> ff(count * sizeof(T), 0xff);
  return b.Upload(ff.data(), ff.size(), "test output");
}

// Σ (got - want)² / Σ want² (∞ when got has a non-finite value; 0/0 = 0).
inline double Nmse(const std::vector<float>& got, const std::vector<float>& want) {
  double err = 0, norm = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    err += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    norm += double(want[i]) * want[i];
  }
  if (got.size() != want.size()) return INFINITY;
  return norm > 0 ? err / norm : err;
}

struct ResultRow {
  std::string op, what;
  double nmse, bound;
  bool pass;
};

class ResultTable : public ::testing::Environment {
 public:
  static ResultTable& Get() {
    static ResultTable* t = [] {
      auto* env = new ResultTable;
      ::testing::AddGlobalTestEnvironment(env);  // gtest owns it
      return env;
    }();
    return *t;
  }
  void Add(ResultRow r) {
    std::lock_guard lock(mu_);
    rows_.push_back(std::move(r));
  }
  void TearDown() override {
    if (rows_.empty()) return;
    int fails = 0;
    std::printf("\n%-22s %-58s %12s %10s %s\n", "op", "case", "nmse", "bound", "pass");
    for (const ResultRow& r : rows_) {
      std::printf("%-22s %-58s %12.3e %10.1e %s\n", r.op.c_str(), r.what.c_str(), r.nmse, r.bound,
                  r.pass ? "ok" : "FAIL");
      fails += !r.pass;
    }
    std::printf("%zu cases, %d failed\n", rows_.size(), fails);
  }

 private:
  std::mutex mu_;
  std::vector<ResultRow> rows_;
};

// Records one comparison in the table and fails the test when nmse > bound.
inline void Expect(const std::string& op, const std::string& what, const std::vector<float>& got,
                   const std::vector<float>& want, double bound) {
  const double e = Nmse(got, want);
  const bool pass = e <= bound;
  ResultTable::Get().Add({op, what, e, bound, pass});
  EXPECT_LE(e, bound) << op << " " << what;
}
inline void ExpectExact(const std::string& op, const std::string& what, bool equal) {
  ResultTable::Get().Add({op, what, equal ? 0.0 : INFINITY, 0.0, equal});
  EXPECT_TRUE(equal) << op << " " << what << ": not bit-exact";
}

}  // namespace tq::kernels::test
