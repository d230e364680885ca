// libFuzzer target: the --db and --redis URL parsers, and the redaction
// that every printed URL goes through: a password must never survive it.
// The oracle: for SCHEME://USER:PASSWORD@REST, with a password of 4 or
// more bytes that occurs once in the input and holds no '*' or '@' (so that
// the redacted text cannot spell it by accident), what follows the scheme
// in the redacted text must not contain the password.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "db/store_url.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  (void)hotrow::db::ParseStoreUrl(text);
  std::string redacted = hotrow::db::RedactUrl(text);
  size_t scheme = text.find("://");
  size_t at = text.rfind('@');
  if (scheme == std::string::npos || at == std::string::npos || at < scheme + 3) return 0;
  if (text.find("password=") != std::string::npos) return 0;  // redacted too, and may move the rest
  size_t colon = text.find(':', scheme + 3);
  if (colon == std::string::npos || colon > at) return 0;
  std::string password = text.substr(colon + 1, at - colon - 1);
  if (password.size() < 4 || text.find(password) != text.rfind(password)) return 0;
  if (password.find_first_of("*@") != std::string::npos) return 0;
  size_t redacted_scheme = redacted.find("://");
  if (redacted_scheme != scheme) std::abort();  // redaction keeps the scheme as it is
  if (redacted.find(password, scheme + 3) != std::string::npos) std::abort();
  return 0;
}
