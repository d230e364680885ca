#include "base/crypto.h"

#include <gtest/gtest.h>

#include "base/text.h"

namespace hotrow {
namespace {

// RFC 4231, test cases 1 and 2.
TEST(Crypto, HmacSha256MatchesRfc4231) {
  EXPECT_EQ(HexEncode(HmacSha256(std::string(20, '\x0b'), "Hi There")),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  EXPECT_EQ(HexEncode(HmacSha256("Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST(Crypto, ASealedSecretOpensUnderItsKeyOnly) {
  const std::string key(32, 'k'), other(32, 'o');
  std::string sealed = Seal(key, "the board's secret");
  EXPECT_NE(sealed.find_first_not_of("0123456789abcdef"), 0u) << "hex";
  EXPECT_EQ(sealed.find("secret"), std::string::npos) << "not the plaintext";
  EXPECT_NE(Seal(key, "the board's secret"), sealed) << "a fresh nonce each time";
  EXPECT_EQ(Unseal(key, sealed).value_or("?"), "the board's secret");
  EXPECT_FALSE(Unseal(other, sealed)) << "another key";
  std::string altered = sealed;
  altered[30] = altered[30] == '0' ? '1' : '0';
  EXPECT_FALSE(Unseal(key, altered)) << "the tag catches a changed byte";
  EXPECT_FALSE(Unseal(key, "zz"));
  EXPECT_FALSE(Unseal(key, sealed.substr(0, 20)));
  EXPECT_FALSE(Unseal(std::string(16, 'k'), sealed)) << "a key of the wrong size";
}

TEST(Text, HexDecodeTakesEitherCaseAndRefusesTheRest) {
  EXPECT_EQ(HexDecode("00ff7F").value_or("?"), std::string("\x00\xff\x7f", 3));
  EXPECT_FALSE(HexDecode("abc"));
  EXPECT_FALSE(HexDecode("zz"));
  EXPECT_EQ(HexDecode("").value_or("?"), "");
}

}  // namespace
}  // namespace hotrow
