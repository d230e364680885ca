#include "base/crypto.h"

#include <cstdlib>
#include <cstring>
#include <vector>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include "base/text.h"

namespace hotrow {

std::string RandomToken(size_t bytes) {
  std::string raw(bytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(raw.data()), static_cast<int>(bytes)) != 1) {
    // Without randomness no secret can be issued safely; this is not a
    // condition a request can recover from.
    std::abort();
  }
  return HexEncode(raw);
}

std::string Sha256(std::string_view text) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(), digest);
  return std::string(reinterpret_cast<const char*>(digest), sizeof digest);
}

std::string Sha1Hex(std::string_view text) {
  unsigned char digest[SHA_DIGEST_LENGTH];
  SHA1(reinterpret_cast<const unsigned char*>(text.data()), text.size(), digest);
  return HexEncode(std::string_view(reinterpret_cast<const char*>(digest), sizeof digest));
}

std::string HmacSha256(std::string_view key, std::string_view message) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(message.data()),
       message.size(), digest, &length);
  return std::string(reinterpret_cast<const char*>(digest), length);
}

namespace {
constexpr int kNonceBytes = 12, kTagBytes = 16;
struct CipherContext {
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  ~CipherContext() { EVP_CIPHER_CTX_free(ctx); }
};
}  // namespace

std::string Seal(std::string_view key, std::string_view plaintext) {
  if (key.size() != kSealKeyBytes) std::abort();  // a caller's bug: keys are checked where they are read
  unsigned char nonce[kNonceBytes];
  if (RAND_bytes(nonce, kNonceBytes) != 1) std::abort();  // as RandomToken
  CipherContext c;
  std::string out(reinterpret_cast<const char*>(nonce), kNonceBytes);
  out.resize(kNonceBytes + plaintext.size() + kTagBytes);
  auto* ct = reinterpret_cast<unsigned char*>(out.data()) + kNonceBytes;
  int n = 0, tail = 0;
  if (!c.ctx || EVP_EncryptInit_ex(c.ctx, EVP_aes_256_gcm(), nullptr, nullptr, nullptr) != 1 ||
      EVP_CIPHER_CTX_ctrl(c.ctx, EVP_CTRL_GCM_SET_IVLEN, kNonceBytes, nullptr) != 1 ||
      EVP_EncryptInit_ex(c.ctx, nullptr, nullptr, reinterpret_cast<const unsigned char*>(key.data()), nonce) != 1 ||
      EVP_EncryptUpdate(c.ctx, ct, &n, reinterpret_cast<const unsigned char*>(plaintext.data()),
                        static_cast<int>(plaintext.size())) != 1 ||
      EVP_EncryptFinal_ex(c.ctx, ct + n, &tail) != 1 ||
      EVP_CIPHER_CTX_ctrl(c.ctx, EVP_CTRL_GCM_GET_TAG, kTagBytes, ct + plaintext.size()) != 1)
    std::abort();  // OpenSSL cannot fail here but for memory
  return HexEncode(out);
}

std::optional<std::string> Unseal(std::string_view key, std::string_view sealed) {
  auto raw = HexDecode(sealed);
  if (key.size() != kSealKeyBytes || !raw || raw->size() < static_cast<size_t>(kNonceBytes + kTagBytes))
    return std::nullopt;
  const auto* bytes = reinterpret_cast<const unsigned char*>(raw->data());
  const size_t length = raw->size() - kNonceBytes - kTagBytes;
  std::string plain(length, '\0');
  unsigned char tag[kTagBytes];
  std::memcpy(tag, bytes + kNonceBytes + length, kTagBytes);
  CipherContext c;
  int n = 0, tail = 0;
  if (!c.ctx || EVP_DecryptInit_ex(c.ctx, EVP_aes_256_gcm(), nullptr, nullptr, nullptr) != 1 ||
      EVP_CIPHER_CTX_ctrl(c.ctx, EVP_CTRL_GCM_SET_IVLEN, kNonceBytes, nullptr) != 1 ||
      EVP_DecryptInit_ex(c.ctx, nullptr, nullptr, reinterpret_cast<const unsigned char*>(key.data()), bytes) != 1 ||
      EVP_DecryptUpdate(c.ctx, reinterpret_cast<unsigned char*>(plain.data()), &n, bytes + kNonceBytes,
                        static_cast<int>(length)) != 1 ||
      EVP_CIPHER_CTX_ctrl(c.ctx, EVP_CTRL_GCM_SET_TAG, kTagBytes, tag) != 1 ||
      EVP_DecryptFinal_ex(c.ctx, reinterpret_cast<unsigned char*>(plain.data()) + n, &tail) != 1)
    return std::nullopt;  // the tag does not match: another key, or altered
  return plain;
}

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace hotrow
