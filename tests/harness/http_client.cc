#include "harness/http_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <functional>
#include <regex>
#include <stdexcept>
#include <thread>

namespace hotrow::testing {

RawConnection::RawConnection(uint16_t port) {
  fd_ = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  if (connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
    throw std::runtime_error("connect to port " + std::to_string(port) + " failed");
}

RawConnection::~RawConnection() {
  if (fd_ >= 0) close(fd_);
}

bool RawConnection::Send(std::string_view bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    ssize_t n = send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

std::string RawConnection::ReadUntil(std::chrono::milliseconds timeout,
                                     const std::function<bool(const std::string&)>& done) {
  std::string out;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  char buf[8192];
  while (!closed_ && !done(out)) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
    ssize_t n = recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) {
      closed_ = true;
      break;
    }
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

std::string RawConnection::ReadUntilClose(std::chrono::milliseconds timeout) {
  return ReadUntil(timeout, [](const std::string&) { return false; });
}

std::string RawConnection::ReadResponse(std::chrono::milliseconds timeout) {
  return ReadUntil(timeout, [](const std::string& out) {
    size_t end = out.find("\r\n\r\n");
    if (end == std::string::npos) return false;
    size_t length = 0;
    std::smatch m;
    std::string head = out.substr(0, end + 2);
    if (std::regex_search(head, m, std::regex("\r\n[Cc]ontent-[Ll]ength: *([0-9]+)\r\n")))
      length = std::stoul(m[1].str());
    return out.size() >= end + 4 + length;
  });
}

bool RawConnection::ClosedWithin(std::chrono::milliseconds timeout) {
  ReadUntilClose(timeout);
  return closed_;
}

int64_t JsonInt(const std::string& body, const std::string& key) {
  std::smatch m;
  std::regex re("\"" + key + "\":(-?[0-9]+)");
  return std::regex_search(body, m, re) ? std::stoll(m[1].str()) : -1;
}

std::string JsonString(const std::string& body, const std::string& key) {
  std::smatch m;
  std::regex re("\"" + key + "\":\"([^\"]*)\"");
  return std::regex_search(body, m, re) ? m[1].str() : "";
}

bool Eventually(const std::function<bool()>& fn, std::chrono::milliseconds bound) {
  auto deadline = std::chrono::steady_clock::now() + bound;
  while (std::chrono::steady_clock::now() < deadline) {
    if (fn()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return fn();
}

int StatusOf(std::string_view raw) {
  if (raw.size() < 12 || raw.substr(0, 5) != "HTTP/") return 0;
  return std::atoi(std::string(raw.substr(9, 3)).c_str());
}

}  // namespace hotrow::testing
