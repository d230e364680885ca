#include "base/auth.h"

#include <algorithm>

#include <boost/asio/ip/address_v6.hpp>

#include "base/crypto.h"

namespace hotrow {

AdminAuth::AdminAuth(std::string_view token, std::string_view what) : what_(what) {
  if (!token.empty()) digest_ = Sha256(token);
}

bool AdminAuth::Matches(std::optional<std::string_view> bearer) const {
  return enabled() && bearer && ConstantTimeEquals(Sha256(*bearer), digest_);
}

Status AdminAuth::Check(std::optional<std::string_view> bearer) const {
  if (!enabled()) return Status::Forbidden("admin actions are disabled: start the server with --admin-token");
  if (!bearer) return Status::Unauthorized("this action needs 'Authorization: Bearer <" + what_ + ">'");
  if (!Matches(bearer)) return Status::Forbidden("the " + what_ + " is wrong");
  return Status::Ok();
}

std::optional<std::string_view> NamedCredentialId(std::string_view bearer) {
  auto lower_hex = [](std::string_view t) {
    return std::all_of(t.begin(), t.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
  };
  if (bearer.size() != kCredentialIdLength + 1 + kCredentialSecretLength || bearer[kCredentialIdLength] != '.')
    return std::nullopt;
  std::string_view id = bearer.substr(0, kCredentialIdLength);
  if (!lower_hex(id) || !lower_hex(bearer.substr(kCredentialIdLength + 1))) return std::nullopt;
  return id;
}

std::string AuthFailureThrottle::ClientOf(std::string_view peer, std::optional<std::string_view> bearer) {
  std::string client;
  if (!peer.empty() && peer[0] == '[') {
    // IPv6: its first four groups (the /64), as written.
    size_t end = peer.find(']');
    std::string_view address = peer.substr(1, end == std::string_view::npos ? std::string_view::npos : end - 1);
    boost::system::error_code ec;
    auto v6 = boost::asio::ip::make_address_v6(std::string(address), ec);
    if (!ec) {
      auto bytes = v6.to_bytes();
      std::fill(bytes.begin() + 8, bytes.end(), 0);
      client = boost::asio::ip::address_v6(bytes).to_string() + "/64";
    } else {
      client = std::string(address);
    }
  } else {
    size_t colon = peer.rfind(':');
    client = std::string(colon == std::string_view::npos ? peer : peer.substr(0, colon));
  }
  if (bearer) {
    if (auto id = NamedCredentialId(*bearer)) client.append("#").append(*id);
  }
  return client;
}

int64_t AuthFailureThrottle::RetryAfterSeconds(std::string_view client, Clock::time_point now) {
  if (max_ <= 0 || tracked_.load(std::memory_order_relaxed) == 0) return 0;
  std::lock_guard lock(mutex_);
  auto it = clients_.find(std::string(client));
  if (it == clients_.end() || it->second.failures < max_) return 0;
  auto left = it->second.start + window_ - now;
  if (left <= Clock::duration::zero()) return 0;
  return std::max<int64_t>(1, std::chrono::ceil<std::chrono::seconds>(left).count());
}

bool AuthFailureThrottle::Failed(std::string_view client, Clock::time_point now) {
  if (max_ <= 0) return false;
  std::lock_guard lock(mutex_);
  auto it = clients_.find(std::string(client));
  if (it == clients_.end()) {
    if (clients_.size() >= kClientsMax && now - last_sweep_ >= std::chrono::seconds(1)) {
      last_sweep_ = now;
      std::erase_if(clients_, [&](const auto& e) { return e.second.start + window_ <= now; });
    }
    if (clients_.size() >= kClientsMax) return false;
    it = clients_.emplace(std::string(client), Window{now, 0}).first;
    tracked_.store(clients_.size(), std::memory_order_relaxed);
  } else if (it->second.start + window_ <= now) {
    it->second = Window{now, 0};
  }
  return ++it->second.failures == max_;
}

}  // namespace hotrow
