#include "db/redis.h"

#include <signal.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdlib>
#include <future>

#include <hiredis/hiredis.h>

#include "base/await.h"
#include "base/crypto.h"
#include "base/version.h"
#include "db/store_url.h"
#include "ops/log.h"

namespace hotrow::db::redis {

Result<Url> ParseUrl(const std::string& url) {
  constexpr std::string_view kScheme = "redis://";
  if (url.rfind(kScheme, 0) != 0)
    return Status::InvalidField("redis", "--redis must look like redis://host:port, not '" + RedactUrl(url) + "'");
  Url out;
  std::string rest = url.substr(kScheme.size());
  if (auto at = rest.rfind('@'); at != std::string::npos) {
    std::string auth = rest.substr(0, at);
    out.password = auth.substr(auth.find(':') == std::string::npos ? 0 : auth.find(':') + 1);
    rest = rest.substr(at + 1);
  }
  if (auto slash = rest.find('/'); slash != std::string::npos) {
    std::string db = rest.substr(slash + 1);
    rest = rest.substr(0, slash);
    if (!db.empty()) {
      try {
        out.database = std::stoi(db);
      } catch (...) {
        return Status::InvalidField("redis", "the database in " + RedactUrl(url) + " must be a number");
      }
    }
  }
  if (auto colon = rest.rfind(':'); colon != std::string::npos) {
    std::string port = rest.substr(colon + 1);
    if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos ||
        std::stoi(port) < 1 || std::stoi(port) > 65535)
      return Status::InvalidField("redis", "the port in " + RedactUrl(url) + " must be a number in 1-65535");
    out.port = std::stoi(port);
    rest = rest.substr(0, colon);
  }
  if (!rest.empty()) out.host = rest;
  return out;
}

namespace {

Reply Convert(const redisReply* r) {
  Reply out;
  switch (r->type) {
    case REDIS_REPLY_INTEGER:
      out.type = Reply::Type::kInteger;
      out.integer = r->integer;
      break;
    case REDIS_REPLY_STRING:
      out.type = Reply::Type::kString;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_STATUS:
      out.type = Reply::Type::kStatus;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_ERROR:
      out.type = Reply::Type::kError;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_ARRAY:
      out.type = Reply::Type::kArray;
      out.elements.reserve(r->elements);
      for (size_t i = 0; i < r->elements; ++i) out.elements.push_back(Convert(r->element[i]));
      break;
    default:
      out.type = Reply::Type::kNil;
  }
  return out;
}

Result<Reply> ToResult(redisReply* r) {
  if (!r) return Status::Unavailable("no reply from Redis");
  Reply out = Convert(r);
  freeReplyObject(r);
  if (out.type == Reply::Type::kError) return ErrorReplyStatus(out.str);
  return out;
}

}  // namespace

Status ErrorReplyStatus(std::string_view reply) {
  // Redis refuses these before it runs the command (or the script), and
  // they pass: 503, definite. Found by the fault rig: a Redis restarted
  // under load answers LOADING while it reads its AOF, and that was a 500.
  struct Transient {
    std::string_view prefix, says;
  };
  static constexpr Transient kTransient[] = {
      {"LOADING", "Redis is loading its data"},
      {"BUSY", "Redis is busy running a script"},
      {"MISCONF", "Redis refuses writes: it cannot save to disk"},
      {"OOM", "Redis is out of memory"},
      {"READONLY", "Redis is a read-only replica"},
      {"MASTERDOWN", "Redis has lost its primary"},
      {"TRYAGAIN", "Redis asks to try again"},
      {"CLUSTERDOWN", "the Redis cluster is down"},
  };
  std::string detail = "Redis: " + std::string(reply);
  for (const Transient& t : kTransient) {
    if (reply.starts_with(t.prefix) && (reply.size() == t.prefix.size() || reply[t.prefix.size()] == ' '))
      return Status::Unavailable(std::string(t.says) + "; nothing was written").WithDetail(std::move(detail));
  }
  return Status::Internal(std::move(detail));
}

namespace {

redisReply* Call(redisContext* ctx, const std::vector<std::string>& argv) {
  std::vector<const char*> args;
  std::vector<size_t> lengths;
  for (const auto& a : argv) {
    args.push_back(a.data());
    lengths.push_back(a.size());
  }
  return static_cast<redisReply*>(redisCommandArgv(ctx, static_cast<int>(args.size()), args.data(), lengths.data()));
}

// Connects, authenticates and selects the database; nullptr on failure.
redisContext* Open(const Url& url, int timeout_ms, std::string* error) {
  // hiredis writes with write(2), not send(MSG_NOSIGNAL): when Redis closes
  // or restarts under a pipeline, the second write would raise SIGPIPE and
  // kill the whole server. Ignored, it is the EPIPE the reconnect handles.
  static const bool sigpipe_ignored = [] { return ::signal(SIGPIPE, SIG_IGN) != SIG_ERR; }();
  (void)sigpipe_ignored;
  timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
  redisContext* ctx = redisConnectWithTimeout(url.host.c_str(), url.port, tv);
  if (!ctx || ctx->err) {
    *error = ctx ? ctx->errstr : "cannot allocate a Redis context";
    if (ctx) redisFree(ctx);
    return nullptr;
  }
  redisSetTimeout(ctx, tv);
  auto check = [&](const std::vector<std::string>& argv) {
    auto r = ToResult(Call(ctx, argv));
    if (!r.ok()) *error = r.status().message();
    return r.ok();
  };
  if ((!url.password.empty() && !check({"AUTH", url.password})) ||
      (url.database != 0 && !check({"SELECT", std::to_string(url.database)}))) {
    redisFree(ctx);
    return nullptr;
  }
  return ctx;
}

}  // namespace

Client::Client(Url url, Options options)
    : url_(std::move(url)),
      options_(options),
      queue_(options_.queue_commands_max, "the Redis command queue is full; retry later") {
  auto& r = metrics::Registry::Default();
  round_trip_ = &r.GetHistogram("hotrow_redis_round_trip_seconds",
                                "Time from sending a pipeline of commands to Redis to its last reply.", {},
                                metrics::LatencyBuckets(), 1e9);
  reconnects_ = &r.GetCounter("hotrow_redis_reconnects_total", "Reconnections to Redis after a lost connection.");
  noscript_ = &r.GetCounter("hotrow_redis_noscript_resends_total",
                            "Scripts resent as EVAL because Redis had forgotten them (NOSCRIPT).");
}

Result<std::unique_ptr<Client>> Client::Connect(const std::string& url_text, Options options) {
  auto url = ParseUrl(url_text);
  if (!url.ok()) return url.status();
  std::unique_ptr<Client> client(new Client(*url, options));
  std::string error;
  client->ctx_ = Open(*url, options.timeout_ms, &error);
  if (!client->ctx_) return Status::Unavailable("cannot connect to Redis at " + RedactUrl(url_text) + ": " + error);
  client->connected_.store(true);
  client->thread_ = std::thread([c = client.get()] { c->Loop(); });
  return client;
}

Client::~Client() {
  Stop();
  if (ctx_) redisFree(ctx_);
}

void Client::Stop() {
  queue_.Stop();  // the thread answers what is queued, then returns
  if (thread_.joinable()) thread_.join();
}

Script::Script(std::string body) : body_(std::move(body)), sha_(Sha1Hex(body_)) {}

void Client::Command(std::vector<std::string> argv, Callback done) { Enqueue({std::move(argv), std::move(done)}); }

void Client::Eval(const Script& script, std::vector<std::string> numkeys_keys_args, Callback done) {
  numkeys_keys_args.insert(numkeys_keys_args.begin(), {"EVALSHA", script.sha()});
  Enqueue({std::move(numkeys_keys_args), std::move(done), &script});
}

void Client::Enqueue(Pending p) {
  // While the client thread reconnects the queue is paused: refused at once,
  // with the pause's reason; after Stop, as the server shutting down.
  if (Status s = queue_.Push(p); !s.ok()) p.done(std::move(s));
}

Result<Reply> Client::CommandSync(std::vector<std::string> argv) {
  return Await<Result<Reply>>([&](auto done) { Command(std::move(argv), done); });
}

void Client::Loop() {
  std::vector<Pending> batch;
  auto backoff = std::chrono::milliseconds(50);
  while (true) {
    if (ctx_) {
      if (!queue_.PopBatch(batch, options_.pipeline_commands_max)) return;  // stopped, and answered
    } else if (queue_.stopped()) {
      return;
    }
    if (!ctx_) {
      std::string error;
      ctx_ = Open(url_, options_.timeout_ms, &error);
      if (ctx_) queue_.Resume();
      if (!ctx_) {
        std::this_thread::sleep_for(backoff);
        backoff = std::min(backoff * 2, std::chrono::milliseconds(2000));
      } else {
        connected_.store(true, std::memory_order_relaxed);
        generation_.fetch_add(1, std::memory_order_relaxed);
        reconnects_->Add();
        log::Info("reconnected to Redis at {}:{}", url_.host, url_.port);
        backoff = std::chrono::milliseconds(50);
      }
      continue;
    }
    RunPipeline(batch);
    batch.clear();
  }
}

void Client::RunPipeline(std::vector<Pending>& batch) {
  std::vector<const char*> args;
  std::vector<size_t> lengths;
  for (auto& p : batch) {
    args.clear();
    lengths.clear();
    for (const auto& a : p.argv) {
      args.push_back(a.data());
      lengths.push_back(a.size());
    }
    redisAppendCommandArgv(ctx_, static_cast<int>(args.size()), args.data(), lengths.data());
  }
  std::vector<Pending> resend;  // scripts Redis no longer had, as EVAL
  size_t answered = 0;
  auto sent_at = std::chrono::steady_clock::now();
  for (; answered < batch.size(); ++answered) {
    void* raw = nullptr;
    if (redisGetReply(ctx_, &raw) != REDIS_OK) break;
    auto* reply = static_cast<redisReply*>(raw);
    Pending& p = batch[answered];
    if (p.script && reply->type == REDIS_REPLY_ERROR &&
        std::string_view(reply->str, reply->len).starts_with("NOSCRIPT")) {
      freeReplyObject(reply);
      p.argv[0] = "EVAL";
      p.argv[1] = p.script->body();
      p.script = nullptr;
      noscript_->Add();
      resend.push_back(std::move(p));
      continue;
    }
    p.done(ToResult(reply));
  }
  if (answered == batch.size()) round_trip_->ObserveDuration(std::chrono::steady_clock::now() - sent_at);
  if (answered < batch.size()) {
    std::string error = ctx_->errstr;
    connected_.store(false, std::memory_order_relaxed);
    log::Error("Redis connection lost: {}", error);
    redisFree(ctx_);
    ctx_ = nullptr;
    for (size_t i = answered; i < batch.size(); ++i)
      batch[i].done(Status::Unavailable("Redis connection lost").WithDetail(error));
    // Fail what queued meanwhile, too, and refuse what comes until the
    // reconnect, in one step: nothing waits for a reconnect.
    std::vector<Pending> queued;
    queue_.Pause(Status::Unavailable("Redis is unreachable; reconnecting"), queued);
    for (auto& p : queued) p.done(Status::Unavailable("Redis is unreachable; reconnecting"));
    for (auto& p : resend) p.done(Status::Unavailable("Redis connection lost").WithDetail(error));
  } else if (!resend.empty()) {
    // After the rest of the batch, in their order: a flushed cache fails
    // every script of the batch, so scripts stay in order among themselves.
    RunPipeline(resend);
  }
}

Status Migrate(Client& client, const std::vector<MigrationStep>& steps) {
  auto known = static_cast<int64_t>(steps.size());
  auto fields = client.CommandSync({"HMGET", kSchemaKey, "version", "oldest_schema", "oldest_binary"});
  if (!fields.ok()) return fields.status();
  const auto& f = fields->elements;
  if (f.size() != 3) return Status::Internal("unexpected reply to HMGET " + std::string(kSchemaKey));
  if (!f[1].is_nil() && std::strtoll(f[1].str.c_str(), nullptr, 10) > known)
    return TooOldForDatabase(
        "Redis key layout",
        SchemaCompat{.oldest_schema = std::strtoll(f[1].str.c_str(), nullptr, 10), .oldest_binary = f[2].str}, known,
        Version());
  int64_t at = f[0].is_nil() ? 0 : std::strtoll(f[0].str.c_str(), nullptr, 10);
  if (f[0].is_nil()) {
    // The layout every release so far wrote: mark it, so a later step knows where it starts.
    auto marked = client.CommandSync({"HSETNX", kSchemaKey, "version", "0"});
    if (!marked.ok()) return marked.status();
  }
  for (int64_t step = at; step < known; ++step) {
    const MigrationStep& m = steps[static_cast<size_t>(step)];
    std::string script =
        "if tonumber(redis.call('HGET', KEYS[1], 'version') or '0') ~= tonumber(ARGV[1]) - 1 then "
        "return 0 end\n" +
        std::string(m.sql) + "\nredis.call('HSET', KEYS[1], 'version', ARGV[1])\n" +
        (m.contract ? "redis.call('HSET', KEYS[1], 'oldest_schema', ARGV[1], 'oldest_binary', ARGV[2])\n" : "") +
        "return 1";
    auto r = client.CommandSync({"EVAL", script, "1", kSchemaKey, std::to_string(step + 1), std::string(Version())});
    if (!r.ok())
      return Status::Internal("Redis layout migration " + std::to_string(step + 1) + " failed")
          .WithDetail(r.status().ToString());
  }
  return Status::Ok();
}

Result<std::unique_ptr<Subscriber>> Subscriber::Start(const std::string& url_text, std::string channel,
                                                      OnMessage on_message, OnConnect on_connect) {
  auto url = ParseUrl(url_text);
  if (!url.ok()) return url.status();
  std::unique_ptr<Subscriber> s(new Subscriber());
  s->url_ = *url;
  s->channel_ = std::move(channel);
  s->on_message_ = std::move(on_message);
  s->on_connect_ = std::move(on_connect);
  s->thread_ = std::thread([p = s.get()] { p->Loop(); });
  return s;
}

Subscriber::~Subscriber() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    // Wake a blocking read: shutting the socket down makes it return.
    if (ctx_) ::shutdown(ctx_->fd, SHUT_RDWR);
  }
  if (thread_.joinable()) thread_.join();
}

void Subscriber::Loop() {
  auto backoff = std::chrono::milliseconds(50);
  while (true) {
    std::string error;
    redisContext* ctx = Open(url_, 2000, &error);
    {
      std::lock_guard lock(mutex_);
      if (stopping_) {
        if (ctx) redisFree(ctx);
        return;
      }
      ctx_ = ctx;
    }
    if (ctx) {
      redisSetTimeout(ctx, timeval{0, 0});  // block until a message arrives
      redisReply* r = Call(ctx, {"SUBSCRIBE", channel_});
      if (r) {
        freeReplyObject(r);
        backoff = std::chrono::milliseconds(50);
        on_connect_();
        while (true) {
          void* raw = nullptr;
          if (redisGetReply(ctx, &raw) != REDIS_OK) break;
          auto* m = static_cast<redisReply*>(raw);
          if (m->type == REDIS_REPLY_ARRAY && m->elements == 3 && m->element[2]->type == REDIS_REPLY_STRING)
            on_message_(std::string(m->element[2]->str, m->element[2]->len));
          freeReplyObject(m);
        }
      }
      std::lock_guard lock(mutex_);
      ctx_ = nullptr;
      redisFree(ctx);
      if (stopping_) return;
    }
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(2000));
  }
}

}  // namespace hotrow::db::redis
