#include "base/time.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>

namespace hotrow {

std::string FormatTime(int64_t us) {
  char buf[kTimeTextMax];
  return std::string(buf, FormatTimeTo(us, buf));
}

size_t FormatTimeTo(int64_t us, char* out) {
  int64_t seconds = us >= 0 ? us / 1000000 : (us - 999999) / 1000000;
  int64_t micros = us - seconds * 1000000;
  std::time_t t = static_cast<std::time_t>(seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  int n = std::snprintf(out, kTimeTextMax, "%04d-%02d-%02dT%02d:%02d:%02d.%06lldZ", tm.tm_year + 1900, tm.tm_mon + 1,
                        tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<long long>(micros));
  return n > 0 ? std::min(static_cast<size_t>(n), kTimeTextMax - 1) : 0;
}

int64_t NowMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace hotrow
