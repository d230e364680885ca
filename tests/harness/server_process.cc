#include "harness/server_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "harness/http_client.h"

namespace hotrow::testing {

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/hotrow-test-XXXXXX";
  char* made = mkdtemp(tmpl.data());
  if (!made) std::abort();
  path_ = made;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string HotrowBinary() {
  const char* env = std::getenv("HOTROW_BIN");
  return env && *env ? env : HOTROW_BINARY;
}

namespace {

pid_t Spawn(const std::vector<std::string>& args, const std::string& output_path,
            const std::vector<std::pair<std::string, std::string>>& env = {}) {
  std::vector<char*> argv;
  std::string bin = HotrowBinary();
  argv.push_back(bin.data());
  std::vector<std::string> copy = args;
  for (auto& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    int fd = open(output_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
      close(fd);
    }
    for (const auto& [name, value] : env) setenv(name.c_str(), value.c_str(), 1);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int DecodeStatus(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return -WTERMSIG(status);
  return -1000;
}

}  // namespace

CommandResult RunHotrow(const std::vector<std::string>& args, std::chrono::seconds timeout,
                        const std::vector<std::pair<std::string, std::string>>& env) {
  TempDir dir;
  std::string out = dir.File("output.txt");
  pid_t pid = Spawn(args, out, env);
  int status = 0;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      ADD_FAILURE() << "hotrow did not finish in time; killed it:\n" << ReadFile(out);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return {DecodeStatus(status), ReadFile(out)};
}

std::unique_ptr<ServerProcess> ServerProcess::Start(const std::vector<std::string>& args, const std::string& log_path,
                                                    std::chrono::seconds timeout,
                                                    const std::vector<std::pair<std::string, std::string>>& env) {
  std::unique_ptr<ServerProcess> p(new ServerProcess());
  p->log_path_ = log_path;
  // No drain delay unless the test asks for one: a test's SIGTERM should
  // stop the server at once.
  std::vector<std::string> full = {"serve", "--host", "127.0.0.1", "--port", "0"};
  full.insert(full.end(), args.begin(), args.end());
  if (std::find(args.begin(), args.end(), "--drain-delay-ms") == args.end()) {
    full.push_back("--drain-delay-ms");
    full.push_back("0");
  }
  size_t log_offset = std::filesystem::exists(log_path) ? std::filesystem::file_size(log_path) : 0;
  p->pid_ = Spawn(full, log_path, env);
  static const std::regex kListening(R"(listening on http://127\.0\.0\.1:(\d+))");
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    std::string log = ReadFile(log_path).substr(log_offset);
    std::smatch m;
    if (std::regex_search(log, m, kListening)) {
      p->port_ = static_cast<uint16_t>(std::stoi(m[1]));
      break;
    }
    if (!p->running()) {
      ADD_FAILURE() << "hotrow exited during start-up (status " << p->exit_status_ << "):\n" << log;
      return nullptr;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (p->port_ == 0) {
    ADD_FAILURE() << "hotrow did not start listening in time:\n" << p->Log();
    p->Kill();
    return nullptr;
  }
  while (std::chrono::steady_clock::now() < deadline) {
    try {
      HttpClient client(p->port_);
      if (client.Get("/healthz").status == 200) return p;
    } catch (const std::exception&) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ADD_FAILURE() << "hotrow did not answer /healthz in time:\n" << p->Log();
  p->Kill();
  return nullptr;
}

ServerProcess::~ServerProcess() {
  if (running()) Kill();
}

bool ServerProcess::running() {
  if (exited_) return false;
  int status = 0;
  pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    exited_ = true;
    exit_status_ = DecodeStatus(status);
    return false;
  }
  return r == 0;
}

int ServerProcess::WaitExit(std::chrono::seconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (running()) {
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << "hotrow (pid " << pid_ << ") did not exit in time; killing it";
      kill(pid_, SIGKILL);
      int status = 0;
      waitpid(pid_, &status, 0);
      exited_ = true;
      exit_status_ = DecodeStatus(status);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return exit_status_;
}

int ServerProcess::Stop(std::chrono::seconds timeout) {
  if (!exited_) kill(pid_, SIGTERM);
  return WaitExit(timeout);
}

void ServerProcess::Kill() {
  if (!exited_) kill(pid_, SIGKILL);
  WaitExit(std::chrono::seconds(30));
}

std::string ServerProcess::Log() const { return ReadFile(log_path_); }

}  // namespace hotrow::testing

namespace hotrow::testing {

TestServer::TestServer(TestServerOptions options)
    : db_url_(options.db_url.empty() ? "sqlite:" + dir_.File("hotrow.db") : options.db_url),
      options_(std::move(options)) {
  if (options_.seed_plans > 0) {
    auto r = RunHotrow({"seed", "dateplans", "--count", std::to_string(options_.seed_plans), "--db", db_url_});
    if (r.exit_code != 0) {
      ADD_FAILURE() << "seed failed: " << r.output;
      return;
    }
  }
  if (options_.seed_pointcard) {
    auto r = RunHotrow(
        {"seed", "pointcard", "--cards", "200", "--stores", "20", "--history", "1000", "--seed", "7", "--db", db_url_});
    if (r.exit_code != 0) {
      ADD_FAILURE() << "seed failed: " << r.output;
      return;
    }
  }
  Start();
}

TestServer::~TestServer() {
  if (process_ && process_->running()) process_->Stop();
}

bool TestServer::Start() { return Start(options_.env); }

bool TestServer::Start(const std::vector<std::pair<std::string, std::string>>& env) {
  std::vector<std::string> args = {"--db", db_url_, "--admin-token", kTestAdminToken, "--threads", "2"};
  args.insert(args.end(), options_.args.begin(), options_.args.end());
  process_ = ServerProcess::Start(args, dir_.File("server.log"), std::chrono::seconds(60), env);
  return process_ != nullptr;
}

}  // namespace hotrow::testing
