// Secrets: random tokens, their hashes, and constant-time comparison (OpenSSL).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace hotrow {

// A fresh secret of `bytes` random bytes from the OS CSPRNG, hex-encoded.
std::string RandomToken(size_t bytes);

// SHA-256 of `text`, as 32 raw bytes.
std::string Sha256(std::string_view text);

// SHA-1 of `text` in lowercase hex: how Redis names a cached Lua script.
std::string Sha1Hex(std::string_view text);

// HMAC-SHA256 of `message` under `key`, as 32 raw bytes.
std::string HmacSha256(std::string_view key, std::string_view message);

// Secrets the server must read back (a board's HMAC secret), kept
// encrypted at rest: AES-256-GCM under a 32-byte key, a fresh random
// 12-byte nonce each time; the sealed text is hex of nonce, ciphertext and
// the 16-byte tag.
inline constexpr size_t kSealKeyBytes = 32;
std::string Seal(std::string_view key, std::string_view plaintext);
// The plaintext; nullopt when `sealed` was not made by Seal under `key`
// (another key, altered, or not hex).
std::optional<std::string> Unseal(std::string_view key, std::string_view sealed);

// Compares in time that depends only on the lengths, not on the contents.
bool ConstantTimeEquals(std::string_view a, std::string_view b);

}  // namespace hotrow
