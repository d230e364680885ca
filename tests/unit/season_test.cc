// Season arithmetic (leaderboard/season.h) against dates worked out by hand
// (and by Python's zoneinfo on the same tzdata): local midnights in zones
// with offsets, DST gaps and repeats, weeks, months, long downtime, test-hook
// seconds, and schedule changes.
#include "leaderboard/season.h"

#include <gtest/gtest.h>

#include "pointcard/model.h"

namespace hotrow::leaderboard {
namespace {

int64_t At(const char* text) {
  auto t = pointcard::ParseTime(text);
  if (!t) throw std::invalid_argument(text);
  return *t;
}

SeasonSchedule Daily(const char* zone, const char* epoch, Reset reset = Reset::kDaily) {
  return SeasonSchedule{.reset = reset, .timezone = zone, .epoch_season = 1, .epoch_us = At(epoch)};
}

SeasonAt Of(const SeasonSchedule& s, const char* t) {
  auto at = SeasonOf(s, At(t));
  if (!at.ok()) throw std::runtime_error(at.status().ToString());
  return *at;
}

TEST(Season, ANoResetBoardStaysInSeasonOne) {
  auto s = Daily("UTC", "2026-01-01T10:00:00Z", Reset::kNone);
  auto at = Of(s, "2030-06-01T00:00:00Z");
  EXPECT_EQ(at.season, 1);
  EXPECT_EQ(at.started_us, At("2026-01-01T10:00:00Z"));
  EXPECT_FALSE(at.next_us);
}

// A clock a little behind the one that made the board (another instance,
// a database server) is in season 1 too: there is no season 0. (Before,
// such a clock computed season 0, where a score was stored and never read.)
TEST(Season, BeforeABoardsCreationIsItsFirstSeason) {
  auto s = Daily("UTC", "2026-01-01T10:00:00Z");
  auto at = Of(s, "2026-01-01T09:59:59Z");
  EXPECT_EQ(at.season, 1);
  EXPECT_EQ(at.started_us, At("2026-01-01T10:00:00Z"));
  EXPECT_EQ(*at.next_us, At("2026-01-02T00:00:00Z"));
}

TEST(Season, DailyAtMidnightAndAfterLongDowntime) {
  auto s = Daily("UTC", "2026-01-01T10:00:00Z");
  auto first = Of(s, "2026-01-01T23:59:59Z");
  EXPECT_EQ(first.season, 1);
  EXPECT_EQ(*first.next_us, At("2026-01-02T00:00:00Z"));
  auto later = Of(s, "2026-12-03T08:00:00Z");  // a server down for months is right when it starts
  EXPECT_EQ(later.season, 1 + 336);
  EXPECT_EQ(later.started_us, At("2026-12-03T00:00:00Z"));
  EXPECT_EQ(*later.next_us, At("2026-12-04T00:00:00Z"));
  EXPECT_EQ(*SeasonStart(s, 3), At("2026-01-03T00:00:00Z"));
  EXPECT_EQ(Of(s, "2026-01-02T00:00:00Z").season, 2) << "a boundary belongs to the season it starts";
}

TEST(Season, MidnightIsLocal) {
  auto tokyo = Daily("Asia/Tokyo", "2026-12-02T16:00:00Z");  // 01:00 on the 3rd in Tokyo
  auto at = Of(tokyo, "2026-12-03T14:59:59Z");
  EXPECT_EQ(at.season, 1);
  EXPECT_EQ(*at.next_us, At("2026-12-03T15:00:00Z"));
  EXPECT_EQ(Of(tokyo, "2026-12-03T15:00:00Z").season, 2);
}

TEST(Season, AMidnightADstGapSkipsIsTheFirstInstantAfterIt) {
  // Havana springs forward at 00:00 on 2026-03-08 (-05 to -04); Santiago on
  // 2026-09-06 (-04 to -03).
  EXPECT_EQ(*Of(Daily("America/Havana", "2026-03-07T12:00:00Z"), "2026-03-07T12:00:00Z").next_us,
            At("2026-03-08T05:00:00Z"));
  EXPECT_EQ(*Of(Daily("America/Santiago", "2026-09-05T12:00:00Z"), "2026-09-05T12:00:00Z").next_us,
            At("2026-09-06T04:00:00Z"));
}

TEST(Season, AMidnightThatHappensTwiceIsItsFirst) {
  // Havana falls back at 01:00 on 2026-11-01 (-04 to -05): 00:00-01:00 twice.
  auto s = Daily("America/Havana", "2026-10-31T12:00:00Z");
  EXPECT_EQ(*Of(s, "2026-10-31T12:00:00Z").next_us, At("2026-11-01T04:00:00Z"));
  EXPECT_EQ(Of(s, "2026-11-01T04:30:00Z").season, 2);
  EXPECT_EQ(Of(s, "2026-11-01T05:30:00Z").season, 2) << "the second 00:30 is still the same day";
  EXPECT_EQ(*Of(s, "2026-11-01T05:30:00Z").next_us, At("2026-11-02T05:00:00Z"));
}

TEST(Season, WeeklyOnMondays) {
  auto s = Daily("UTC", "2026-12-02T12:00:00Z", Reset::kWeekly);  // a Wednesday
  auto first = Of(s, "2026-12-06T23:00:00Z");
  EXPECT_EQ(first.season, 1);
  EXPECT_EQ(*first.next_us, At("2026-12-07T00:00:00Z"));
  auto third = Of(s, "2026-12-20T10:00:00Z");  // a Sunday
  EXPECT_EQ(third.season, 3);
  EXPECT_EQ(third.started_us, At("2026-12-14T00:00:00Z"));
  EXPECT_EQ(*third.next_us, At("2026-12-21T00:00:00Z"));
  auto monday = Daily("UTC", "2026-12-07T00:00:00Z", Reset::kWeekly);  // made on a Monday at midnight
  EXPECT_EQ(*Of(monday, "2026-12-07T00:00:00Z").next_us, At("2026-12-14T00:00:00Z"));
}

TEST(Season, MonthlyOnTheFirst) {
  auto s = Daily("UTC", "2026-01-31T20:00:00Z", Reset::kMonthly);
  EXPECT_EQ(*Of(s, "2026-01-31T21:00:00Z").next_us, At("2026-02-01T00:00:00Z"));
  auto march = Of(s, "2026-03-15T00:00:00Z");
  EXPECT_EQ(march.season, 3);
  EXPECT_EQ(march.started_us, At("2026-03-01T00:00:00Z"));
  EXPECT_EQ(*march.next_us, At("2026-04-01T00:00:00Z"));
  auto year = Of(s, "2027-01-01T00:00:00Z");
  EXPECT_EQ(year.season, 13);
}

TEST(Season, TestHooksResetEverySoManySeconds) {
  SeasonSchedule s{.every_s = 2, .epoch_season = 1, .epoch_us = At("2026-01-01T00:00:00Z")};
  auto at = Of(s, "2026-01-01T00:00:05Z");
  EXPECT_EQ(at.season, 3);
  EXPECT_EQ(at.started_us, At("2026-01-01T00:00:04Z"));
  EXPECT_EQ(*at.next_us, At("2026-01-01T00:00:06Z"));
}

TEST(Season, AChangedScheduleStartsAtTheNextBoundary) {
  // Daily, changed to weekly on Wednesday 2026-12-02 in season 5: season 5
  // runs to Thursday's midnight, 6 from then to Monday, 7 from Monday.
  auto daily = Daily("UTC", "2026-11-28T00:00:00Z");
  auto weekly = Reschedule(daily, Reset::kWeekly, "UTC", 0, At("2026-12-02T12:00:00Z"));
  ASSERT_TRUE(weekly.ok()) << weekly.status().ToString();
  EXPECT_EQ(weekly->epoch_season, 6);
  EXPECT_EQ(weekly->epoch_us, At("2026-12-03T00:00:00Z"));
  EXPECT_EQ(Of(*weekly, "2026-12-02T23:00:00Z").season, 5);
  EXPECT_EQ(Of(*weekly, "2026-12-02T23:00:00Z").started_us, At("2026-12-02T00:00:00Z"));
  EXPECT_EQ(Of(*weekly, "2026-12-05T00:00:00Z").season, 6);
  EXPECT_EQ(*Of(*weekly, "2026-12-05T00:00:00Z").next_us, At("2026-12-07T00:00:00Z"));
  EXPECT_EQ(Of(*weekly, "2026-12-08T00:00:00Z").season, 7);
  // A board that never reset, given a schedule: season 2 at its first boundary.
  auto none = Daily("Asia/Tokyo", "2026-12-01T00:00:00Z", Reset::kNone);
  auto daily_now = Reschedule(none, Reset::kDaily, "Asia/Tokyo", 0, At("2026-12-03T10:00:00Z"));
  ASSERT_TRUE(daily_now.ok());
  EXPECT_EQ(daily_now->epoch_season, 2);
  EXPECT_EQ(daily_now->epoch_us, At("2026-12-03T15:00:00Z"));
  EXPECT_EQ(Of(*daily_now, "2026-12-03T14:00:00Z").season, 1);
  // Both without resets: nothing moves.
  auto still = Reschedule(none, Reset::kNone, "UTC", 0, At("2026-12-03T10:00:00Z"));
  ASSERT_TRUE(still.ok());
  EXPECT_EQ(still->epoch_us, none.epoch_us);
  EXPECT_EQ(Of(*still, "2027-01-01T00:00:00Z").season, 1);
}

TEST(Season, AnUnknownZoneIsRefused) {
  EXPECT_EQ(ValidateTimezone("Mars/Olympus_Mons").code(), ErrorCode::kInvalidField);
  EXPECT_EQ(ValidateTimezone("").code(), ErrorCode::kInvalidField);
  EXPECT_TRUE(ValidateTimezone("Europe/Berlin").ok());
  EXPECT_TRUE(ValidateTimezone("UTC").ok());
  EXPECT_TRUE(ValidateTimezone("America/Argentina/Buenos_Aires").ok());
  EXPECT_TRUE(ValidateTimezone("Etc/GMT+5").ok());
}

// A zone is a tzdata name, never a path or a name whose meaning depends on
// the host: cctz would read any file it is given (a FIFO blocks the loop
// that asked), and instances would disagree. (Before, "/etc/localtime",
// "../../etc/localtime", "localtime" and "Asia/Tokyo\0x" were accepted.)
TEST(Season, AZoneIsANameNeverAPath) {
  for (std::string_view bad : std::initializer_list<std::string_view>{
           "/etc/localtime", "../../../../etc/localtime", "Asia/../Asia/Tokyo", "./UTC", "localtime", "posixrules",
           "file:/usr/share/zoneinfo/UTC", "utc", "EST5EDT,M3.2.0,M11.1.0", "Asia//Tokyo", "Asia/Tokyo/",
           std::string_view("Asia/Tokyo\0x", 12), "/tmp/fifo"})
    EXPECT_EQ(ValidateTimezone(bad).code(), ErrorCode::kInvalidField) << bad;
  // Long names never reach the zone loader (which keeps each name it sees).
  EXPECT_EQ(ValidateTimezone(std::string(65, 'A')).code(), ErrorCode::kInvalidField);
}

}  // namespace
}  // namespace hotrow::leaderboard
