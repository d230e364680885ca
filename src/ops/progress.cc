#include "ops/progress.h"

#include <unistd.h>

#include <cstdio>

namespace hotrow {

ProgressBar::ProgressBar(std::string label, int64_t total)
    : label_(std::move(label)), total_(total > 0 ? total : 1), tty_(isatty(STDERR_FILENO) != 0) {}

void ProgressBar::Update(int64_t done) {
  if (!tty_) return;
  auto now = std::chrono::steady_clock::now();
  if (done < total_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  constexpr int kWidth = 30;
  int filled = static_cast<int>(done * kWidth / total_);
  std::string bar(static_cast<size_t>(filled), '#');
  bar.append(static_cast<size_t>(kWidth - filled), '.');
  std::fprintf(stderr, "\r%s [%s] %3d%% %lld/%lld", label_.c_str(), bar.c_str(), static_cast<int>(done * 100 / total_),
               static_cast<long long>(done), static_cast<long long>(total_));
  std::fflush(stderr);
}

void ProgressBar::Finish() {
  if (tty_) std::fputc('\n', stderr);
}

}  // namespace hotrow
