// The Redis client against a peer that resets the connection. hiredis writes
// with write(2), so without SIGPIPE ignored this test's process dies (it did,
// once, in CI, when a suite's redis-server went away under a pipeline).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <future>
#include <stdexcept>
#include <thread>

#include <gtest/gtest.h>

#include "db/redis.h"

namespace hotrow::testing {
namespace {

// A listener on a loopback port that accepts one connection and closes it,
// as a Redis that restarts does.
class ClosingPeer {
 public:
  ClosingPeer() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    if (bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(fd_, 8) != 0)
      throw std::runtime_error("cannot listen on loopback");
    socklen_t len = sizeof addr;
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
  }
  ~ClosingPeer() { close(fd_); }

  uint16_t port() const { return port_; }

  void AcceptAndClose() {
    int c = accept(fd_, nullptr, nullptr);
    ASSERT_GE(c, 0);
    close(c);
  }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
};

TEST(RedisClient, APeerThatClosesTheConnectionFailsCommandsInsteadOfKillingTheProcess) {
  ClosingPeer peer;
  auto client = db::RedisClient::Connect("redis://127.0.0.1:" + std::to_string(peer.port()));
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  peer.AcceptAndClose();
  // A pipeline of large commands: the first write lands in the closed
  // socket's buffer and draws an RST, the next one gets EPIPE.
  std::string big(1 << 20, 'x');
  std::vector<std::future<Status>> answers;
  for (int i = 0; i < 4; ++i) {
    auto done = std::make_shared<std::promise<Status>>();
    answers.push_back(done->get_future());
    (*client)->Command({"SET", "k", big}, [done](Result<db::RedisReply> r) { done->set_value(r.status()); });
  }
  for (auto& a : answers) {
    ASSERT_EQ(a.wait_for(std::chrono::seconds(10)), std::future_status::ready);
    EXPECT_EQ(a.get().code(), ErrorCode::kUnavailable);
  }
}

}  // namespace
}  // namespace hotrow::testing
