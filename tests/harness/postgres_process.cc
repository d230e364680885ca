#include "harness/postgres_process.h"

#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <gtest/gtest.h>

#include "harness/redis_process.h"

namespace hotrow::testing {

namespace {

std::string Bin(const std::string& name) {
  const char* env = std::getenv("HOTROW_PG_BIN");
  return std::string(env && *env ? env : "/usr/lib/postgresql/15/bin") + "/" + name;
}

// Drops root for the postgres user when we are root; no-op otherwise.
void BecomeUnprivileged() {
  if (geteuid() != 0) return;
  passwd* pw = getpwnam("postgres");
  if (!pw) _exit(126);
  if (setgid(pw->pw_gid) != 0 || setuid(pw->pw_uid) != 0) _exit(126);
}

// Runs a command as the unprivileged user, waits, returns its status.
int RunAs(const std::vector<std::string>& argv, const std::string& log, bool die_with_parent, pid_t* background) {
  pid_t pid = fork();
  if (pid == 0) {
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0666);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
      close(fd);
    }
    BecomeUnprivileged();
    if (die_with_parent) prctl(PR_SET_PDEATHSIG, SIGKILL);  // after setuid, which clears it
    std::vector<char*> args;
    std::vector<std::string> copy = argv;
    for (auto& a : copy) args.push_back(a.data());
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  if (background) {
    *background = pid;
    return 0;
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

std::unique_ptr<PostgresProcess> PostgresProcess::Start() {
  std::unique_ptr<PostgresProcess> p(new PostgresProcess());
  if (geteuid() == 0) {
    passwd* pw = getpwnam("postgres");
    if (!pw || chown(p->dir_.path().c_str(), pw->pw_uid, pw->pw_gid) != 0) {
      ADD_FAILURE() << "running as root needs the postgres user (Debian's postgresql package)";
      return nullptr;
    }
  }
  chmod(p->dir_.path().c_str(), 0777);
  p->data_ = p->dir_.File("data");
  int rc = RunAs(
      {Bin("initdb"), "-D", p->data_, "-A", "trust", "-U", "hotrow", "-E", "UTF8", "--no-sync", "--no-instructions"},
      p->dir_.File("initdb.log"), false, nullptr);
  if (rc != 0) {
    std::ifstream in(p->dir_.File("initdb.log"));
    std::stringstream ss;
    ss << in.rdbuf();
    ADD_FAILURE() << "initdb failed (" << rc << "):\n" << ss.str();
    return nullptr;
  }
  for (int attempt = 0; attempt < 5; ++attempt) {
    p->port_ = FreePort();
    if (p->Launch()) return p;
  }
  ADD_FAILURE() << "postgres did not start";
  return nullptr;
}

bool PostgresProcess::Launch() {
  RunAs(
      {Bin("postgres"), "-D", data_, "-p", std::to_string(port_), "-k", dir_.path(), "-c", "listen_addresses=127.0.0.1",
       "-c", "max_connections=200", "-c", "shared_buffers=128MB", "-c", "track_commit_timestamp=on"},
      dir_.File("postgres.log"), true, &pid_);
  for (int i = 0; i < 600; ++i) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return false;
    }
    std::string out;
    if (Psql("postgres", "SELECT 1", &out) == 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  Kill();
  return false;
}

PostgresProcess* PostgresProcess::Shared() {
  static std::unique_ptr<PostgresProcess> shared;
  static std::once_flag once;
  std::call_once(once, [] { shared = Start(); });
  return shared.get();
}

PostgresProcess::~PostgresProcess() {
  if (pid_ <= 0) return;
  kill(pid_, SIGINT);  // fast shutdown
  int status = 0;
  for (int i = 0; i < 200 && waitpid(pid_, &status, WNOHANG) == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  Kill();
}

void PostgresProcess::Kill() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
}

bool PostgresProcess::Restart() {
  Kill();
  // After a SIGKILL the postmaster's children linger until they notice, and
  // a new postmaster refuses to start while they hold the shared memory:
  // retry for a while (each failed attempt exits at once).
  for (int attempt = 0; attempt < 100; ++attempt) {
    if (Launch()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return false;
}

std::string PostgresProcess::Url(const std::string& database) const {
  return "postgresql://hotrow@127.0.0.1:" + std::to_string(port_) + "/" + database;
}

std::string PostgresProcess::CreateDatabase() {
  std::string name = "test_" + std::to_string(getpid()) + "_" + std::to_string(++databases_);
  std::string out;
  if (Psql("postgres", "CREATE DATABASE " + name, &out) != 0) ADD_FAILURE() << "CREATE DATABASE failed: " << out;
  return Url(name);
}

int PostgresProcess::Psql(const std::string& database, const std::string& sql, std::string* output) const {
  TempDir tmp;
  std::string log = tmp.File("psql.out");
  pid_t pid = fork();
  if (pid == 0) {
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0666);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
      close(fd);
    }
    std::string url = Url(database);
    execl(Bin("psql").c_str(), "psql", url.c_str(), "-v", "ON_ERROR_STOP=1", "-XAtqc", sql.c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (output) {
    std::ifstream in(log);
    std::stringstream ss;
    ss << in.rdbuf();
    *output = ss.str();
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string FreshDatabase() {
  PostgresProcess* pg = PostgresProcess::Shared();
  if (!pg) throw std::runtime_error("no PostgreSQL cluster");
  return pg->CreateDatabase();
}

std::unique_ptr<db::pg::Pool> OpenPool(const std::string& url) {
  db::pg::PoolOptions options;
  options.url = url;
  options.size = 4;
  auto pool = db::pg::Pool::Open(options);
  if (!pool.ok()) throw std::runtime_error(pool.status().ToString());
  return std::move(*pool);
}

}  // namespace hotrow::testing
