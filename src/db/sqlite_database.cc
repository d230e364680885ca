#include "db/sqlite_database.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace hotrow::db {

Result<std::unique_ptr<SqliteDatabase>> SqliteDatabase::Open(const std::string& path, WriterOptions options) {
  std::unique_ptr<SqliteDatabase> db(new SqliteDatabase());
  db->path_ = path;
  std::error_code ec;
  auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);

  std::string lock_path = path + ".lock";
  db->lock_fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (db->lock_fd_ < 0)
    return Status::Unavailable("cannot open " + lock_path + ": " + std::strerror(errno));
  if (::flock(db->lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    char pid[32] = {0};
    ssize_t n = ::pread(db->lock_fd_, pid, sizeof pid - 1, 0);
    std::string holder = n > 0 ? std::string(pid, static_cast<size_t>(n)) : "another process";
    while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
    return Status::Unavailable(path + " is in use by a running hotrow server (pid " + holder +
                               "); stop it first or use another --db");
  }
  std::string me = std::to_string(::getpid()) + "\n";
  if (::ftruncate(db->lock_fd_, 0) != 0 || ::pwrite(db->lock_fd_, me.data(), me.size(), 0) < 0) {
    // The pid is informational only; the lock itself is what counts.
  }

  auto conn = sqlite::Connection::Open(path, sqlite::OpenMode::kReadWrite);
  if (!conn.ok()) return conn.status();
  db->writer_ = std::make_unique<Writer>(std::move(conn).value(), options);
  return db;
}

SqliteDatabase::~SqliteDatabase() {
  writer_.reset();  // stops the writer and closes the connection first
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

Result<std::unique_ptr<sqlite::Connection>> SqliteDatabase::OpenReader() const {
  return sqlite::Connection::Open(path_, sqlite::OpenMode::kReadOnly);
}

}  // namespace hotrow::db
