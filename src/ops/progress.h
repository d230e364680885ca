// A progress bar on stderr, drawn only when stderr is a terminal.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace hotrow {

class ProgressBar {
 public:
  ProgressBar(std::string label, int64_t total);
  // Redraws (at most every 100 ms, and always at the end).
  void Update(int64_t done);
  // Ends the line.
  void Finish();

 private:
  std::string label_;
  int64_t total_;
  bool tty_;
  std::chrono::steady_clock::time_point last_draw_{};
};

}  // namespace hotrow
