// UTC times as the API writes them: microseconds since the Unix epoch,
// shown as "2026-11-30T06:00:00.123456Z".
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace hotrow {

// "2026-11-30T06:00:00.123456Z".
std::string FormatTime(int64_t us);
// The same into `out` (at least kTimeTextMax bytes); returns its length.
inline constexpr size_t kTimeTextMax = 40;
size_t FormatTimeTo(int64_t us, char* out);
// Now, from the system clock.
int64_t NowMicros();

}  // namespace hotrow
