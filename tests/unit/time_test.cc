// RFC 3339 times as the point card reads them (grant periods).
#include <gtest/gtest.h>

#include "pointcard/model.h"

namespace hotrow::pointcard {
namespace {

TEST(ParseTime, ReadsUtcOffsetsAndFractions) {
  EXPECT_EQ(ParseTime("1970-01-01T00:00:00Z"), 0);
  EXPECT_EQ(ParseTime("1970-01-01T09:00:00.5+09:00"), 500000);
  EXPECT_EQ(ParseTime("2024-02-29T00:00:00Z"), int64_t{1709164800} * 1000000);
}

// A second of 60 used to switch the calendar check off, so 30 February was
// accepted (and a grant ran over that period: the hostile-client review of
// issue 11, seen failing with a 201).
TEST(ParseTime, NoDayPastTheEndOfItsMonthLeapSecondOrNot) {
  for (const char* bad : {"2026-02-30T10:00:60Z", "2026-02-31T23:59:60Z", "2026-02-29T00:00:00Z",
                          "2026-04-31T00:00:00Z", "2100-02-29T00:00:00Z", "2026-02-29T23:59:60Z"})
    EXPECT_FALSE(ParseTime(bad).has_value()) << bad;
  EXPECT_TRUE(ParseTime("2000-02-29T00:00:00Z").has_value());
  EXPECT_TRUE(ParseTime("2024-02-29T12:00:00Z").has_value());
}

// A leap second is the last second of a minute (23:59:60Z, or 08:59:60+09:00
// for the same instant); it reads as the first second of the next minute.
TEST(ParseTime, ALeapSecondEndsAUtcDayOnly) {
  EXPECT_EQ(ParseTime("2016-12-31T23:59:60Z"), ParseTime("2017-01-01T00:00:00Z"));
  EXPECT_EQ(ParseTime("2017-01-01T08:59:60+09:00"), ParseTime("2017-01-01T00:00:00Z"));
  EXPECT_EQ(ParseTime("2017-01-01T05:29:60+05:30"), ParseTime("2017-01-01T00:00:00Z"));
  EXPECT_FALSE(ParseTime("2016-12-31T10:30:60Z").has_value());
  EXPECT_FALSE(ParseTime("2026-01-01T10:59:60Z").has_value());
}

// An offset or a leap second must not carry an instant outside years
// 0000-9999, which FormatTime could not print back (the re-review).
TEST(ParseTime, InstantsStayWithinYearsZeroToNineThousandNineHundredNinetyNine) {
  EXPECT_FALSE(ParseTime("0000-01-01T00:00:00+01:00").has_value());
  EXPECT_FALSE(ParseTime("9999-12-31T23:59:60Z").has_value());
  EXPECT_TRUE(ParseTime("0000-01-01T00:00:00Z").has_value());
  EXPECT_TRUE(ParseTime("9999-12-31T23:59:59.999999Z").has_value());
}

}  // namespace
}  // namespace hotrow::pointcard
