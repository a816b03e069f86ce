#include "core/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace tq {

ProgressBar::ProgressBar(std::string label, int64_t total, bool enabled)
    : label_(std::move(label)),
      total_(std::max<int64_t>(1, total)),
      enabled_(enabled),
      tty_(::isatty(STDERR_FILENO) != 0),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

ProgressBar::~ProgressBar() {
  if (!finished_) Finish(detail_);
}

void ProgressBar::Update(int64_t done, const std::string& detail) {
  done_ = std::clamp<int64_t>(done, 0, total_);
  if (!detail.empty()) detail_ = detail;
  Draw(false);
}

void ProgressBar::Finish(const std::string& detail) {
  if (finished_) return;
  if (!detail.empty()) detail_ = detail;
  done_ = total_;
  Draw(true);
  if (enabled_ && tty_) std::fputc('\n', stderr);
  finished_ = true;
}

void ProgressBar::Draw(bool force) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  const double secs = std::chrono::duration<double>(now - start_).count();
  const double frac = double(done_) / double(total_);
  if (tty_) {
    if (!force && now - last_draw_ < std::chrono::milliseconds(100)) return;
    last_draw_ = now;
    constexpr int kWidth = 30;
    const int filled = int(frac * kWidth);
    std::string bar(size_t(filled), '#');
    bar.resize(kWidth, '.');
    const double eta = frac > 0 ? secs / frac - secs : 0;
    std::fprintf(stderr, "\r%s [%s] %3d%% %lld/%lld %.1fs eta %.1fs %s\x1b[K", label_.c_str(),
                 bar.c_str(), int(frac * 100), (long long)done_, (long long)total_, secs, eta,
                 detail_.c_str());
  } else {
    const int decile = int(frac * 10);
    // A forced draw (Finish) repeats nothing the last line already said.
    if (decile == last_decile_ && (!force || (done_ == last_done_ && detail_ == last_detail_)))
      return;
    last_decile_ = decile;
    last_done_ = done_;
    last_detail_ = detail_;
    std::fprintf(stderr, "%s %3d%% %lld/%lld %.1fs %s\n", label_.c_str(), int(frac * 100),
                 (long long)done_, (long long)total_, secs, detail_.c_str());
  }
  std::fflush(stderr);
}

}  // namespace tq
