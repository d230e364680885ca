// Seasons: which season of a board an instant falls in, when it began and
// when the next one begins. No reset job: every instance computes the season
// from its clock and the board's schedule, the same way, so a server that
// was down across a boundary is right when it starts.
//
// Boundaries are 00:00 local time in the board's IANA time zone: every day
// (daily), every Monday (weekly, ISO weeks), the first of every month
// (monthly). A local midnight that does not exist (a DST gap) is the first
// instant after the gap; one that happens twice, its first occurrence
// (CCTZ's lookup: `trans` for a skipped time, `pre` for a repeated one). A
// test-hooks board resets every `every_s` seconds from its epoch instead.
//
// The schedule counts from its epoch: season epoch_season begins at
// epoch_us, and every boundary after it begins the next. Before epoch_us the
// board is in season epoch_season - 1, which began at pre_epoch_started_us:
// a board made at T has epoch (1, T); a schedule changed at T in season s
// takes effect at the next boundary B, as epoch (s + 1, B), season s running
// on until B.
//
// Cost: O(1) per call (civil-day arithmetic, one or two zone lookups); the
// zone is loaded once per name and cached.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"
#include "leaderboard/model.h"

namespace hotrow::leaderboard {

struct SeasonSchedule {
  Reset reset = Reset::kNone;
  std::string timezone = "UTC";
  int64_t every_s = 0;  // > 0: a test-hooks board, a season every every_s seconds
  int64_t epoch_season = 1;
  int64_t epoch_us = 0;
  int64_t pre_epoch_started_us = 0;  // when season epoch_season - 1 began (epoch_season > 1)
  bool operator==(const SeasonSchedule&) const = default;
};

struct SeasonAt {
  int64_t season = 1;
  int64_t started_us = 0;
  std::optional<int64_t> next_us;  // when the next season begins; none without resets
};

// The first season of every board (there is no season 0).
inline constexpr int64_t kFirstSeasonOfAll = 1;

// A board's schedule, from its settings and epoch.
SeasonSchedule ScheduleOf(const BoardInfo& board);

// What a store of record compares to decide whether an instance computed a
// post's season with the schedule it holds (store.h, ScorePost):
// "<reset> <timezone> <every_s> <epoch_season> <epoch_us>".
std::string ScheduleFingerprint(const BoardInfo& board);

// invalid_field `resetTimezone` unless `name` is an IANA zone this machine's
// tzdata knows ("UTC", "Asia/Tokyo").
Status ValidateTimezone(std::string_view name);

// The season containing `t_us` (the first season for an instant before a
// new board's creation).
Result<SeasonAt> SeasonOf(const SeasonSchedule& schedule, int64_t t_us);

// When season `season` (>= epoch_season) began; none before the epoch.
Result<int64_t> SeasonStart(const SeasonSchedule& schedule, int64_t season);

// The schedule after a change of reset/zone/every at `t_us`: the new one
// counts from the current schedule's next boundary, or, without one, from
// the new schedule's first boundary after t_us (unchanged when the new
// schedule has no boundary at all and the old one had none either).
Result<SeasonSchedule> Reschedule(const SeasonSchedule& current, Reset reset, const std::string& timezone,
                                  int64_t every_s, int64_t t_us);

}  // namespace hotrow::leaderboard
