// Redis through hiredis, without blocking event-loop threads.
//
// Client owns one connection and one thread. Commands queue up (bounded;
// a full queue answers overloaded); the thread takes everything waiting,
// writes it as one pipeline, reads the replies in order and runs each
// command's callback on its own thread. Pipelining is Redis's group commit:
// with appendfsync always, Redis fsyncs its AOF once per event-loop turn, so
// one pipeline of N scripts costs one fsync, not N. If the connection breaks,
// the commands in flight fail with unavailable (they may or may not have
// run), new ones fail fast while the thread reconnects with backoff.
// hiredis writes with write(2), not send(MSG_NOSIGNAL), so the client
// ignores SIGPIPE process-wide: Redis closing or restarting under a pipeline
// is an EPIPE that the reconnect handles, not a signal that kills the
// server (tests/unit/redis_client_test.cc feeds it a peer that closes).
//
// Subscriber owns a second connection in SUBSCRIBE mode and calls back
// for every message on one channel (cache invalidation between instances),
// plus once after every (re)connect, since messages may have been missed.
//
// Only this file and redis.cc include hiredis.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "base/batch_queue.h"
#include "base/inline_function.h"
#include "base/status.h"
#include "db/migration.h"
#include "ops/metrics.h"

struct redisContext;

namespace hotrow::db::redis {

struct Url {
  std::string host = "127.0.0.1";
  int port = 6379;
  std::string password;
  int database = 0;
};

// "redis://[:password@]host[:port][/db]".
Result<Url> ParseUrl(const std::string& url);

struct Reply {
  enum class Type { kNil, kInteger, kString, kArray, kStatus, kError };
  Type type = Type::kNil;
  int64_t integer = 0;
  std::string str;  // kString, kStatus, kError
  std::vector<Reply> elements;

  bool is_nil() const { return type == Type::kNil; }
};

struct Options {
  size_t queue_commands_max = 11024;
  size_t pipeline_commands_max = 1024;
  int timeout_ms = 5000;
};

// A Lua script, sent by its SHA-1 (EVALSHA) so that a request carries 40
// bytes instead of the body and Redis does not hash the body per call.
class Script {
 public:
  explicit Script(std::string body);
  const std::string& body() const { return body_; }
  const std::string& sha() const { return sha_; }

 private:
  std::string body_, sha_;
};

// The Status of an error reply: the transient refusals (LOADING, BUSY,
// MISCONF, OOM, READONLY, ...) are 503 unavailable, definite (Redis ran
// nothing); any other error is internal, with the reply in the message.
Status ErrorReplyStatus(std::string_view reply);

class Client {
 public:
  // Connects once up front (so a wrong URL fails at start-up) and starts
  // the thread.
  static Result<std::unique_ptr<Client>> Connect(const std::string& url, Options options = {});
  ~Client();

  using Callback = InlineFunction<void(Result<Reply>), 384>;
  // Queues a command given as its arguments. `done` runs on the client
  // thread with the reply; an error reply becomes an internal Status.
  void Command(std::vector<std::string> argv, Callback done);
  // Blocks for the reply; for start-up, seeding and tests.
  Result<Reply> CommandSync(std::vector<std::string> argv);
  // Runs `script` with `numkeys_keys_args` ("2", key, key, arg, ...) as
  // EVALSHA. Redis forgets its scripts when it restarts (and on SCRIPT
  // FLUSH): a NOSCRIPT answer is resent once as EVAL, which caches the
  // script again. `script` must outlive the call.
  void Eval(const Script& script, std::vector<std::string> numkeys_keys_args, Callback done);

  void Stop();

  // False from a lost connection until the client reconnects (GET /readyz).
  bool connected() const { return connected_.load(std::memory_order_relaxed); }
  // Which connection this is: one more at each reconnect. Read in a
  // command's callback (on the client thread), it names the connection the
  // command ran on.
  uint64_t generation() const { return generation_.load(std::memory_order_relaxed); }

 private:
  Client(Url url, Options options);
  void Loop();
  struct Pending {
    std::vector<std::string> argv;
    Callback done;
    const Script* script = nullptr;  // EVALSHA of this script, until resent as EVAL
  };
  void Enqueue(Pending p);
  void RunPipeline(std::vector<Pending>& batch);

  Url url_;
  Options options_;
  redisContext* ctx_ = nullptr;  // only the client thread touches it after Connect
  BatchQueue<Pending> queue_;    // paused while the client thread reconnects: commands fail at once
  std::atomic<bool> connected_{false};
  std::atomic<uint64_t> generation_{0};
  metrics::Histogram* round_trip_;
  metrics::Counter* reconnects_;
  metrics::Counter* noscript_;
  std::thread thread_;
};

// Key-layout migrations on Redis (the rules: db/migration.h). The hash
// kSchemaKey holds `version` (steps applied), and after a contract step
// `oldest_schema` and `oldest_binary`. Each step is a Lua script run with
// EVAL, atomically with its record; a step already recorded (another
// instance got there first) is skipped inside the script.
inline constexpr const char* kSchemaKey = "hotrow:schema";
Status Migrate(Client& client, const std::vector<MigrationStep>& steps);

class Subscriber {
 public:
  using OnMessage = std::function<void(const std::string& payload)>;
  using OnConnect = std::function<void()>;
  static Result<std::unique_ptr<Subscriber>> Start(const std::string& url, std::string channel, OnMessage on_message,
                                                   OnConnect on_connect);
  ~Subscriber();

 private:
  Subscriber() = default;
  void Loop();
  Url url_;
  std::string channel_;
  OnMessage on_message_;
  OnConnect on_connect_;
  std::mutex mutex_;
  bool stopping_ = false;
  redisContext* ctx_ = nullptr;
  std::thread thread_;
};

}  // namespace hotrow::db::redis
