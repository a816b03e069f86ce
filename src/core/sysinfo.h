// What this process and machine have: memory use, memory available, wall time.
#pragma once

#include <chrono>
#include <cstdint>

namespace tq {

int64_t PeakRssBytes();       // high-water resident set of this process (getrusage)
int64_t CurrentRssBytes();    // from /proc/self/statm
int64_t AvailableRamBytes();  // MemAvailable from /proc/meminfo (0 when unknown)
int64_t TotalRamBytes();      // MemTotal

// Wall-clock stopwatch in seconds.
class Timer {
 public:
  Timer() : start_(std::chrono::steady_clock::now()) {}
  double Seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  void Reset() { start_ = std::chrono::steady_clock::now(); }

 private:
  std::chrono::steady_clock::time_point start_;
};

}  // namespace tq
