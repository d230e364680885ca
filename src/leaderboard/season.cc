#include "leaderboard/season.h"

#include <cctype>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>

#include <cctz/civil_time.h>
#include <cctz/time_zone.h>

namespace hotrow::leaderboard {

namespace {

using Clock = std::chrono::system_clock;
using Micros = std::chrono::microseconds;
using TimePoint = std::chrono::time_point<Clock, Micros>;

// An IANA zone name as tzdata spells them ("UTC", "Asia/Tokyo",
// "America/Argentina/Buenos_Aires", "Etc/GMT+5"): segments that begin with a
// capital letter, of letters, digits, '_', '+' and '-'. So never a path
// ("/etc/localtime", "../x"), a host-dependent name ("localtime"), or a
// POSIX TZ string, which would make instances disagree.
bool IsZoneName(std::string_view name) {
  constexpr size_t kNameMax = 64;
  if (name.empty() || name.size() > kNameMax) return false;
  size_t start = 0;
  while (true) {
    size_t slash = name.find('/', start);
    std::string_view seg = name.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    if (seg.empty() || !std::isupper(static_cast<unsigned char>(seg[0]))) return false;
    for (char c : seg)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '+' && c != '-') return false;
    if (slash == std::string_view::npos) return true;
    start = slash + 1;
  }
}

// The machine's zone files (cctz reads $TZDIR, else this).
std::string ZoneDir() {
  const char* dir = std::getenv("TZDIR");
  return dir && *dir ? dir : "/usr/share/zoneinfo";
}

// Zones by name, loaded once (a load reads a tzdata file).
Result<cctz::time_zone> Zone(std::string_view name) {
  static std::mutex mutex;
  static std::map<std::string, cctz::time_zone, std::less<>> zones;
  auto refused = [&] {
    return Status::InvalidField("resetTimezone",
                                "resetTimezone must be an IANA time zone such as UTC or Asia/Tokyo, "
                                "not '" +
                                    std::string(name) + "'");
  };
  if (!IsZoneName(name)) return refused();
  std::lock_guard lock(mutex);
  auto it = zones.find(name);
  if (it != zones.end()) return it->second;
  // Only names with a zone file reach cctz (it keeps every name it is asked
  // for, found or not), and only regular files (never a FIFO that blocks).
  std::error_code ec;
  if (name != "UTC" && !std::filesystem::is_regular_file(ZoneDir() + "/" + std::string(name), ec)) return refused();
  cctz::time_zone tz;
  if (!cctz::load_time_zone(std::string(name), &tz)) return refused();
  return zones.emplace(std::string(name), tz).first->second;
}

int64_t FloorDiv(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

// Days since 1970-01-01 of a civil day; 1970-01-05 was a Monday.
int64_t DayNumber(const cctz::civil_day& d) { return d - cctz::civil_day(1970, 1, 1); }
int64_t WeekNumber(const cctz::civil_day& d) { return FloorDiv(DayNumber(d) - 4, 7); }
int64_t MonthNumber(const cctz::civil_day& d) { return d.year() * 12 + (d.month() - 1); }

cctz::civil_day DayOf(int64_t t_us, const cctz::time_zone& tz) {
  return cctz::civil_day(cctz::convert(TimePoint(Micros(t_us)), tz));
}

// 00:00 of `day` in `tz`: the first instant after a gap that skips it, the
// first of two when it happens twice.
int64_t MidnightOf(const cctz::civil_day& day, const cctz::time_zone& tz) {
  const auto lookup = tz.lookup(cctz::civil_second(day));
  auto at = lookup.kind == cctz::time_zone::civil_lookup::SKIPPED ? lookup.trans : lookup.pre;
  return std::chrono::duration_cast<Micros>(at.time_since_epoch()).count();
}

// The number of boundaries after the epoch up to and including t (t >= epoch).
int64_t BoundariesSince(const SeasonSchedule& s, const cctz::time_zone& tz, int64_t t_us) {
  if (s.every_s > 0) return (t_us - s.epoch_us) / (s.every_s * 1000000);
  cctz::civil_day from = DayOf(s.epoch_us, tz), to = DayOf(t_us, tz);
  switch (s.reset) {
    case Reset::kNone:
      return 0;
    case Reset::kDaily:
      return DayNumber(to) - DayNumber(from);
    case Reset::kWeekly:
      return WeekNumber(to) - WeekNumber(from);
    case Reset::kMonthly:
      return MonthNumber(to) - MonthNumber(from);
  }
  return 0;
}

// The instant of the n-th boundary after the epoch (n >= 1).
int64_t NthBoundary(const SeasonSchedule& s, const cctz::time_zone& tz, int64_t n) {
  if (s.every_s > 0) return s.epoch_us + n * s.every_s * 1000000;
  cctz::civil_day from = DayOf(s.epoch_us, tz);
  switch (s.reset) {
    case Reset::kDaily:
      return MidnightOf(from + n, tz);
    case Reset::kWeekly: {
      // The first Monday after `from`, then every seventh day.
      cctz::civil_day monday = from + (7 - (DayNumber(from) - 4 - WeekNumber(from) * 7));
      return MidnightOf(monday + 7 * (n - 1), tz);
    }
    case Reset::kMonthly: {
      cctz::civil_month month = cctz::civil_month(from) + n;
      return MidnightOf(cctz::civil_day(month), tz);
    }
    case Reset::kNone:
      break;
  }
  return INT64_MAX;
}

bool Resets(const SeasonSchedule& s) { return s.every_s > 0 || s.reset != Reset::kNone; }

}  // namespace

Status ValidateTimezone(std::string_view name) { return Zone(name).status(); }

std::string ScheduleFingerprint(const BoardInfo& b) {
  const SeasonSchedule s = ScheduleOf(b);
  return std::string(Name(s.reset)) + " " + s.timezone + " " + std::to_string(s.every_s) + " " +
         std::to_string(s.epoch_season) + " " + std::to_string(s.epoch_us);
}

SeasonSchedule ScheduleOf(const BoardInfo& b) {
  return SeasonSchedule{.reset = b.settings.reset,
                        .timezone = b.settings.reset_timezone,
                        .every_s = b.settings.reset_every_s,
                        .epoch_season = b.epoch_season,
                        .epoch_us = b.epoch_us != 0 ? b.epoch_us : b.created_us,
                        .pre_epoch_started_us = b.pre_epoch_started_us};
}

Result<SeasonAt> SeasonOf(const SeasonSchedule& s, int64_t t_us) {
  // Before a board's creation (another clock, a little behind) is its
  // first season: there is no season 0.
  if (t_us < s.epoch_us && s.epoch_season <= kFirstSeasonOfAll) t_us = s.epoch_us;
  if (t_us < s.epoch_us) return SeasonAt{s.epoch_season - 1, s.pre_epoch_started_us, s.epoch_us};
  auto tz = Zone(s.timezone);
  if (!tz.ok()) return tz.status();
  int64_t n = BoundariesSince(s, *tz, t_us);
  SeasonAt at{s.epoch_season + n, n == 0 ? s.epoch_us : NthBoundary(s, *tz, n), std::nullopt};
  if (Resets(s)) at.next_us = NthBoundary(s, *tz, n + 1);
  return at;
}

Result<int64_t> SeasonStart(const SeasonSchedule& s, int64_t season) {
  if (season < s.epoch_season)
    return Status::NotFound("season " + std::to_string(season) + " began before the schedule");
  if (season == s.epoch_season) return s.epoch_us;
  if (!Resets(s)) return Status::NotFound("season " + std::to_string(season) + " never begins");
  auto tz = Zone(s.timezone);
  if (!tz.ok()) return tz.status();
  return NthBoundary(s, *tz, season - s.epoch_season);
}

Result<SeasonSchedule> Reschedule(const SeasonSchedule& current, Reset reset, const std::string& timezone,
                                  int64_t every_s, int64_t t_us) {
  if (Status s = ValidateTimezone(timezone); !s.ok()) return s;
  auto at = SeasonOf(current, t_us);
  if (!at.ok()) return at.status();
  SeasonSchedule next = current;
  next.reset = reset;
  next.timezone = timezone;
  next.every_s = every_s;
  if (at->next_us) {
    // From the current schedule's next boundary (the one already pending,
    // when t is before a change that has not taken effect yet).
    next.epoch_season = at->season + 1;
    next.epoch_us = *at->next_us;
    next.pre_epoch_started_us = at->started_us;
    return next;
  }
  // The current schedule never resets: the new one's first boundary after t.
  SeasonSchedule probe = next;
  probe.epoch_season = at->season;
  probe.epoch_us = t_us;
  auto first = SeasonOf(probe, t_us);
  if (!first.ok()) return first.status();
  if (!first->next_us) return next;  // neither resets: season and epoch stay
  next.epoch_season = at->season + 1;
  next.epoch_us = *first->next_us;
  next.pre_epoch_started_us = at->started_us;
  return next;
}

}  // namespace hotrow::leaderboard
