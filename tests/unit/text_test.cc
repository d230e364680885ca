#include "ops/text.h"

#include <gtest/gtest.h>

#include "http/query.h"

namespace hotrow {
namespace {

TEST(Text, Utf8Validation) {
  EXPECT_TRUE(IsValidUtf8("plain ascii"));
  EXPECT_TRUE(IsValidUtf8("インドカレー 🍛"));
  EXPECT_FALSE(IsValidUtf8("\xC0\xAF"));          // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xED\xA0\x80"));      // surrogate U+D800
  EXPECT_FALSE(IsValidUtf8("\xF4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_FALSE(IsValidUtf8("\xE3\x81"));          // truncated
  EXPECT_FALSE(IsValidUtf8("\x80"));
}

TEST(Text, CountsCodePointsNotBytes) {
  EXPECT_EQ(CountCodePoints(""), 0u);
  EXPECT_EQ(CountCodePoints("abc"), 3u);
  EXPECT_EQ(CountCodePoints("インドカレー"), 6u);
  EXPECT_EQ(CountCodePoints("🍛a"), 2u);
}

TEST(Text, ControlCharacters) {
  EXPECT_TRUE(HasControlCharacters("a\x01", true));
  EXPECT_TRUE(HasControlCharacters("a\n", false));
  EXPECT_FALSE(HasControlCharacters("a\n\tb", true));
  EXPECT_TRUE(HasControlCharacters(std::string_view("a\0b", 3), true));
  EXPECT_TRUE(HasControlCharacters("\x7f", true));
}

TEST(Text, PositiveIds) {
  EXPECT_EQ(ParsePositiveId("1"), 1);
  EXPECT_EQ(ParsePositiveId("9223372036854775807"), INT64_MAX);
  for (const char* bad : {"", "0", "-1", "+1", " 1", "1 ", "1e3", "abc", "9223372036854775808", "1.0"})
    EXPECT_FALSE(ParsePositiveId(bad).has_value()) << bad;
}

TEST(Query, DecodesPercentAndPlus) {
  auto q = http::Query::Parse("category=%E5%B1%8B%E5%86%85&x=a+b&flag&limit=5");
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(*q->Get("category"), "屋内");
  EXPECT_EQ(*q->Get("x"), "a b");
  EXPECT_EQ(*q->Get("flag"), "");
  EXPECT_FALSE(q->Get("missing").has_value());
  EXPECT_EQ(q->Int("limit", 10, 1, 100).value(), 5);
  EXPECT_EQ(q->Int("absent", 10, 1, 100).value(), 10);
}

TEST(Query, RejectsBadEscapesAndRanges) {
  EXPECT_FALSE(http::Query::Parse("a=%zz").ok());
  EXPECT_FALSE(http::Query::Parse("a=%4").ok());
  EXPECT_FALSE(http::Query::Parse("a=%ff").ok());  // not UTF-8
  auto q = http::Query::Parse("limit=0&l2=101&l3=abc&l4=1.5");
  ASSERT_TRUE(q.ok());
  for (const char* k : {"limit", "l2", "l3", "l4"}) {
    auto v = q->Int(k, 10, 1, 100);
    ASSERT_FALSE(v.ok()) << k;
    EXPECT_EQ(v.status().field(), k);
  }
}

}  // namespace
}  // namespace hotrow
