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

#include "cuda_emu/cuda_emu.h"
#include "kernels/backend.h"
#if defined(TQ_WITH_CUDA)
#include "kernels/cuda/cuda_backend.h"
#endif

namespace tq::kernels::test {

// The backend a CUDA test runs on: "cuda" (cuda:0) or "emu" (the same kernels on the host
// emulator); null with the reason in *why when it cannot be had (a CPU-only build, no GPU, the
// emulator under ASan, whose stack checks do not follow ucontext fibers).
inline Backend* BackendOrWhy(const std::string& kind, std::string* why) {
  if (kind == "emu") {
#if defined(__SANITIZE_ADDRESS__)
    *why = "the CUDA emulator's fibers (ucontext) are not run under ASan";
    return nullptr;
#else
    static std::unique_ptr<Backend> emu = MakeEmulatedCudaBackend(0);
    return emu.get();
#endif
  }
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

// A new backend of `kind` (it reads the environment, TURBOQUANT_CUDA_GEMM, as it is now); null when
// BackendOrWhy gives none.
inline std::unique_ptr<Backend> FreshBackend(const std::string& kind) {
  std::string why;
  if (!BackendOrWhy(kind, &why)) return nullptr;
  if (kind == "emu") return MakeEmulatedCudaBackend(0);
#if defined(TQ_WITH_CUDA)
  return MakeCudaBackend(0);
#else
  return nullptr;
#endif
}

// Both backends: a CUDA test suite is instantiated once per kind.
inline const std::vector<std::string> kCudaKinds = {"cuda", "emu"};

// In a test whose parameter's backend kind is `kind`: `var` = the backend, or skip with why.
// The kind of the running test (the table's backend column).
inline std::string& CurrentKind() {
  static std::string kind;
  return kind;
}
#define TQ_REQUIRE_BACKEND(var, kind)                                                \
  std::string var##_why;                                                             \
  ::tq::kernels::Backend* var = ::tq::kernels::test::BackendOrWhy(kind, &var##_why); \
  if (!var) GTEST_SKIP() << var##_why;                                               \
  ::tq::kernels::test::CurrentKind() = kind

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
  std::string backend, op, what;
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
    std::printf("\n%-7s %-20s %-60s %12s %10s %s\n", "backend", "op", "case", "nmse", "bound",
                "pass");
    for (const ResultRow& r : rows_) {
      std::printf("%-7s %-20s %-60s %12.3e %10.1e %s\n", r.backend.c_str(), r.op.c_str(),
                  r.what.c_str(), r.nmse, r.bound, r.pass ? "ok" : "FAIL");
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
  ResultTable::Get().Add({CurrentKind(), op, what, e, bound, pass});
  EXPECT_LE(e, bound) << op << " " << what;
}
inline void ExpectExact(const std::string& op, const std::string& what, bool equal) {
  ResultTable::Get().Add({CurrentKind(), op, what, equal ? 0.0 : INFINITY, 0.0, equal});
  EXPECT_TRUE(equal) << op << " " << what << ": not bit-exact";
}

}  // namespace tq::kernels::test
