#include "pointcard/model.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <ctime>

#include "ops/metrics.h"

namespace hotrow::pointcard {

std::optional<int64_t> ParseTime(std::string_view s) {
  auto digits = [&](size_t pos, size_t n) -> std::optional<int> {
    if (pos + n > s.size()) return std::nullopt;
    int v = 0;
    for (size_t i = pos; i < pos + n; ++i) {
      if (s[i] < '0' || s[i] > '9') return std::nullopt;
      v = v * 10 + (s[i] - '0');
    }
    return v;
  };
  // YYYY-MM-DDTHH:MM:SS
  if (s.size() < 20 || s[4] != '-' || s[7] != '-' || (s[10] != 'T' && s[10] != 't') || s[13] != ':' || s[16] != ':')
    return std::nullopt;
  auto year = digits(0, 4), month = digits(5, 2), day = digits(8, 2), hour = digits(11, 2), minute = digits(14, 2),
       second = digits(17, 2);
  if (!year || !month || !day || !hour || !minute || !second) return std::nullopt;
  if (*month < 1 || *month > 12 || *day < 1 || *hour > 23 || *minute > 59 || *second > 60) return std::nullopt;
  // The calendar, checked here: timegm would move 31 February into March.
  static constexpr int kDaysInMonth[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  bool leap_year = (*year % 4 == 0 && *year % 100 != 0) || *year % 400 == 0;
  if (*day > kDaysInMonth[*month - 1] + (*month == 2 && leap_year ? 1 : 0)) return std::nullopt;
  size_t pos = 19;
  int64_t micros = 0;
  if (pos < s.size() && s[pos] == '.') {
    size_t start = ++pos;
    while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') ++pos;
    size_t n = pos - start;
    if (n == 0 || n > 6) return std::nullopt;
    for (size_t i = 0; i < 6; ++i) micros = micros * 10 + (i < n ? s[start + i] - '0' : 0);
  }
  int64_t offset_seconds = 0;
  if (pos < s.size() && (s[pos] == 'Z' || s[pos] == 'z')) {
    ++pos;
  } else if (pos + 6 == s.size() && (s[pos] == '+' || s[pos] == '-') && s[pos + 3] == ':') {
    auto oh = digits(pos + 1, 2), om = digits(pos + 4, 2);
    if (!oh || !om || *oh > 23 || *om > 59) return std::nullopt;
    offset_seconds = (s[pos] == '+' ? 1 : -1) * (*oh * 3600 + *om * 60);
    pos += 6;
  } else {
    return std::nullopt;
  }
  if (pos != s.size()) return std::nullopt;
  // A leap second ends a UTC day (23:59:60Z, or 05:29:60+05:30): the
  // minute, in UTC, must be the day's last.
  if (*second == 60 && ((*hour * 60 + *minute - offset_seconds / 60) % 1440 + 1440) % 1440 != 1439) return std::nullopt;
  std::tm tm{};
  tm.tm_year = *year - 1900;
  tm.tm_mon = *month - 1;
  tm.tm_mday = *day;
  tm.tm_hour = *hour;
  tm.tm_min = *minute;
  tm.tm_sec = *second;
  std::time_t t = timegm(&tm);  // :60 becomes the next minute's :00
  int64_t us = (static_cast<int64_t>(t) - offset_seconds) * 1000000 + micros;
  // Years 0000-9999 in UTC, what FormatTime can print: an offset or a leap
  // second must not carry an instant outside them.
  static constexpr int64_t kYearZeroUs = -62167219200LL * 1000000;
  if (us < kYearZeroUs || us > kHistoryCursorMaxUs) return std::nullopt;
  return us;
}

int64_t NowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

const std::vector<Region>& Prefectures() {
  static const std::vector<Region> kRegions = [] {
    const char* names[] = {"北海道", "青森県", "岩手県", "宮城県", "秋田県", "山形県",   "福島県", "茨城県",
                           "栃木県", "群馬県", "埼玉県", "千葉県", "東京都", "神奈川県", "新潟県", "富山県",
                           "石川県", "福井県", "山梨県", "長野県", "岐阜県", "静岡県",   "愛知県", "三重県",
                           "滋賀県", "京都府", "大阪府", "兵庫県", "奈良県", "和歌山県", "鳥取県", "島根県",
                           "岡山県", "広島県", "山口県", "徳島県", "香川県", "愛媛県",   "高知県", "福岡県",
                           "佐賀県", "長崎県", "熊本県", "大分県", "宮崎県", "鹿児島県", "沖縄県"};
    std::vector<Region> out;
    out.reserve(47);
    for (int i = 0; i < 47; ++i) out.push_back({i + 1, names[i]});
    return out;
  }();
  return kRegions;
}

Status PeriodAlreadyGranted(int64_t grant_id, int64_t from_us, int64_t to_us) {
  char from[kTimeTextMax], to[kTimeTextMax];
  return {ErrorCode::kPeriodAlreadyGranted, "the period overlaps grant " + std::to_string(grant_id) + " of [" +
                                                std::string(from, FormatTimeTo(from_us, from)) + ", " +
                                                std::string(to, FormatTimeTo(to_us, to)) +
                                                "); send \"allowOverlap\": true to grant it again"};
}

Status PeriodNotEnded() {
  return Status::InvalidField("to", "the period must have ended: to must not be in the future");
}

metrics::Histogram& GrantFoldSeconds() {
  static metrics::Histogram& h = metrics::Registry::Default().GetHistogram(
      "hotrow_pointcard_grant_phase_seconds", kGrantPhaseHelp, {{"phase", "fold"}}, metrics::LatencyBuckets(), 1e9);
  return h;
}

Result<std::optional<int64_t>> LotExpiry(const GrantRequest& r, int64_t grant_us) {
  constexpr int64_t kDayUs = 86'400'000'000;
  if (r.expires_in_days) return std::optional<int64_t>(grant_us + *r.expires_in_days * kDayUs);
  if (!r.expires_at_us) return std::optional<int64_t>();
  if (*r.expires_at_us <= grant_us)
    return Status::InvalidField("expiresAt", "expiresAt must be after the grant's time, " + FormatTime(grant_us));
  if (*r.expires_at_us - grant_us > kLotDaysMax * kDayUs)
    return Status::InvalidField("expiresAt", "expiresAt must be within " + std::to_string(kLotDaysMax) +
                                                 " days of the grant's time, " + FormatTime(grant_us));
  return std::optional<int64_t>(*r.expires_at_us);
}

}  // namespace hotrow::pointcard
