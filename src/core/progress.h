// A progress bar on stderr for long work (convert, perplexity). Redraws at most ~10 times a
// second; on a non-terminal stderr it prints a plain line every 10% instead.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace tq {

class ProgressBar {
 public:
  ProgressBar(std::string label, int64_t total, bool enabled = true);
  ~ProgressBar();  // finishes the line
  // Sets progress to `done` (of total); `detail` is shown after the bar (e.g. "ppl 13.02").
  void Update(int64_t done, const std::string& detail = "");
  void Finish(const std::string& detail = "");

 private:
  void Draw(bool force);
  std::string label_;
  int64_t total_, done_ = 0;
  bool enabled_, tty_, finished_ = false;
  int last_decile_ = -1;
  int64_t last_done_ = -1;  // what the last non-terminal line showed
  std::string last_detail_;
  std::string detail_;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace tq
