// Secrets: random tokens, their hashes, and constant-time comparison (OpenSSL).
#pragma once

#include <string>
#include <string_view>

namespace hotrow {

// A fresh secret of `bytes` random bytes from the OS CSPRNG, hex-encoded.
std::string RandomToken(size_t bytes);

// SHA-256 of `text`, as 32 raw bytes.
std::string Sha256(std::string_view text);

// SHA-1 of `text` in lowercase hex: how Redis names a cached Lua script.
std::string Sha1Hex(std::string_view text);

// Compares in time that depends only on the lengths, not on the contents.
bool ConstantTimeEquals(std::string_view a, std::string_view b);

}  // namespace hotrow
