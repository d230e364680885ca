#include "base/text.h"

#include <gtest/gtest.h>

#include "db/store_url.h"
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

// The one definition of acceptable user text (issue 9, item 19): every
// case here was stored before CheckUserText.
TEST(Text, UserTextRules) {
  const TextRule title{.field = "title", .code_points_max = 100};
  const TextRule content{.field = "content", .code_points_min = 0, .code_points_max = 2000, .multiline = true};
  const TextRule category{.field = "category", .code_points_max = 50, .trimmed = true};
  EXPECT_TRUE(CheckUserText("水族館に行く", title).ok());
  EXPECT_TRUE(CheckUserText("שלום\u200F עולם", title).ok()) << "RLM stays: right-to-left text needs it";
  EXPECT_TRUE(CheckUserText("line one\nline two\tend", content).ok());
  EXPECT_TRUE(CheckUserText("", content).ok());
  EXPECT_TRUE(CheckUserText("e\u0301", title).ok()) << "a combining mark after a letter";
  for (std::string bad :
       {std::string("a\x01"), std::string("a\nb"), std::string("\x7f"), std::string("a\u0085b"), std::string("   "),
        std::string("\ufeff"), std::string("\u200b\u200b"), std::string("\u0301"), std::string("abc\u202Edef"),
        std::string("x\u2066y"), std::string("a\0b", 3), std::string("\xff")}) {
    Status s = CheckUserText(bad, title);
    EXPECT_FALSE(s.ok()) << "accepted: " << bad;
    EXPECT_EQ(s.field(), "title");
  }
  EXPECT_FALSE(CheckUserText("a\rb", content).ok()) << "CR is not a newline here";
  EXPECT_FALSE(CheckUserText("   ", content).ok()) << "non-empty content must show something";
  EXPECT_TRUE(CheckUserText("Indoor", category).ok());
  EXPECT_TRUE(CheckUserText("Day trip", category).ok());
  for (std::string bad : {"Indoor ", " Indoor", "Indoor\u3000", "\u200bIndoor", "Indoor\u200b"})
    EXPECT_FALSE(CheckUserText(bad, category).ok()) << bad;
  // A mark at the end belongs to the character before it.
  for (std::string good : {"Cafe\u0301", "\u2764\uFE0F", "\u30AB\u3099"})
    EXPECT_TRUE(CheckUserText(good, category).ok()) << good;
  // One-line fields refuse Unicode's line and paragraph separators too.
  EXPECT_FALSE(CheckUserText("a\u2028b", title).ok());
  EXPECT_FALSE(CheckUserText("a\u2029b", category).ok());
  EXPECT_TRUE(CheckUserText("a\u2028b", content).ok()) << "multiline";
  // Hangul fillers are letters that show nothing: no text of them alone.
  EXPECT_FALSE(CheckUserText("\u3164", title).ok());
  EXPECT_FALSE(CheckUserText("\u115F\u1160", title).ok());
  EXPECT_TRUE(CheckUserText("\uD55C\uAE00", title).ok()) << "Hangul itself";
  EXPECT_FALSE(CheckUserText("abc\u3164", category).ok()) << "nor at the end of a trimmed field";
  // Marks that draw nothing are not part of the letter before them.
  for (std::string bad : {"Indoor\uFE0F", "Indoor\u034F", "Indoor\u180B", "Indoor\U000E0100"})
    EXPECT_FALSE(CheckUserText(bad, category).ok()) << bad;
  EXPECT_NE(CheckUserText(std::string(101, 'a'), title).message().find("1-100"), std::string::npos);
}

TEST(Text, InvalidUtf8IsReplacedForOutput) {
  EXPECT_EQ(ToValidUtf8("ok"), "ok");
  EXPECT_EQ(ToValidUtf8("a\xff"
                        "b"),
            "a\uFFFD"
            "b");
  EXPECT_EQ(ToValidUtf8("\xE3\x81"), "\uFFFD\uFFFD");
  EXPECT_TRUE(IsValidUtf8(ToValidUtf8("\xC0\xAF/\xED\xA0\x80")));
}

TEST(Text, UrlsAreRedacted) {
  EXPECT_EQ(db::RedactUrl("redis://:s3cret@h:6379"), "redis://:***@h:6379");
  EXPECT_EQ(db::RedactUrl("postgresql://u:pw@h:5432/db"), "postgresql://u:***@h:5432/db");
  EXPECT_EQ(db::RedactUrl("postgresql://u@h/db"), "postgresql://u@h/db");
  EXPECT_EQ(db::RedactUrl("postgresql://h/db?user=u&password=pw&x=1"), "postgresql://h/db?user=u&password=***&x=1");
  EXPECT_EQ(db::RedactUrl("redis://h:6379"), "redis://h:6379");
  // A password with '?', '#' or '/' in it used to print whole (the
  // hostile-client review of issue 11).
  EXPECT_EQ(db::RedactUrl("redis://:pa?ss@127.0.0.1:1"), "redis://:***@127.0.0.1:1");
  EXPECT_EQ(db::RedactUrl("postgresql://u:a/b#c@h/db"), "postgresql://u:***@h/db");
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

TEST(Query, ARepeatedParameterIsRefusedNamingIt) {
  auto q = http::Query::Parse("limit=5&limit=6");
  ASSERT_FALSE(q.ok());
  EXPECT_EQ(q.status().field(), "limit");
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
