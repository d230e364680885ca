#include "harness/redis_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

#include <gtest/gtest.h>

#include "harness/http_client.h"

namespace hotrow::testing {

uint16_t FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = 0;
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

std::unique_ptr<RedisProcess> RedisProcess::Start() {
  std::unique_ptr<RedisProcess> r(new RedisProcess());
  for (int attempt = 0; attempt < 5; ++attempt) {
    r->port_ = FreePort();
    if (r->Launch()) return r;
  }
  ADD_FAILURE() << "redis-server did not start (is the redis-server package installed?)";
  return nullptr;
}

bool RedisProcess::Launch() {
  std::string port = std::to_string(port_);
  std::string log = dir_.File("redis.log");
  pid_ = fork();
  if (pid_ == 0) {
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
      close(fd);
    }
    execlp("redis-server", "redis-server", "--port", port.c_str(), "--bind", "127.0.0.1", "--dir", dir_.path().c_str(),
           "--appendonly", "yes", "--appendfsync", "always", "--save", "", "--daemonize", "no",
           // DEBUG SLEEP stalls the server on purpose in fault tests.
           "--enable-debug-command", "local", static_cast<char*>(nullptr));
    _exit(127);
  }
  for (int i = 0; i < 500; ++i) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return false;
    }
    try {
      // Ask for the process id, not just a PONG: under ctest -j2 another
      // test's redis-server may hold the port this one failed to bind, and a
      // suite talking to a server someone else kills fails for no reason.
      RawConnection c(port_);
      c.Send("INFO server\r\n");
      std::string info = c.ReadUntilClose(std::chrono::milliseconds(200));
      if (info.find("\r\nprocess_id:" + std::to_string(pid_) + "\r\n") != std::string::npos) return true;
    } catch (const std::exception&) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  Kill();
  return false;
}

RedisProcess::~RedisProcess() { Kill(); }

void RedisProcess::Kill() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
}

void RedisProcess::Pause() {
  if (pid_ > 0) kill(pid_, SIGSTOP);
}

void RedisProcess::Resume() {
  if (pid_ > 0) kill(pid_, SIGCONT);
}

bool RedisProcess::Restart() {
  Kill();
  return Launch();
}

}  // namespace hotrow::testing
