// InProcessConnection: a request through the connection's codec and the
// router without a socket (see server.h).
#include <condition_variable>
#include <mutex>
#include <stdexcept>

#include "http/codec.h"
#include "http/errors.h"
#include "http/server.h"

namespace hotrow::http {

namespace {
// Receives the response, from whichever thread answers.
class WaitingSink final : public ResponseSink {
 public:
  void Deliver(Response&& r) override {
    std::lock_guard lock(mutex_);
    response_ = std::move(r);
    ready_ = true;
    cv_.notify_one();
  }
  Response Wait() {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [this] { return ready_; });
    ready_ = false;
    return std::move(response_);
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool ready_ = false;
  Response response_;
};
}  // namespace

struct InProcessConnection::Impl {
  Handler handler;
  ServerOptions options;
  Codec codec;
  std::shared_ptr<WaitingSink> sink = std::make_shared<WaitingSink>();
};

InProcessConnection::InProcessConnection(Handler handler, ServerOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->handler = std::move(handler);
  impl_->options = std::move(options);
}

InProcessConnection::~InProcessConnection() = default;

int InProcessConnection::Exchange(std::string_view raw, std::string* out, size_t* used, bool* close) {
  auto& impl = *impl_;
  Parser& parser = impl.codec.Begin(impl.options);
  boost::system::error_code ec;
  boost::asio::const_buffer input(raw.data(), raw.size());
  bool too_large = false;
  auto parse = [&](bool eager) {
    parser.eager(eager);
    while (input.size() > 0 && !(eager ? parser.is_done() : parser.is_header_done())) {
      size_t n = 0;
      try {
        n = parser.put(input, ec);
      } catch (const std::length_error&) {
        // A trailer field past what Beast's fields can hold (64 KiB). A
        // connection never gets here: its read buffer is smaller (server.cc).
        too_large = true;
        return false;
      }
      if (ec) return false;
      input += n;
    }
    return true;
  };
  auto answer = [&](Response response, bool must_close) {
    int status = response.status;
    bool closing = must_close || !impl.codec.keep_alive();
    auto buffers = impl.codec.Serialize(std::move(response), closing);
    out->clear();
    for (const auto& b : buffers) out->append(static_cast<const char*>(b.data()), b.size());
    impl.codec.Written();
    if (used) *used = raw.size() - input.size();
    if (close) *close = closing;
    return status;
  };
  // As a connection does: the header first, then hotrow's framing rules,
  // then the body.
  if (!parse(false) || !parser.is_header_done()) return 0;
  if (Status s = impl.codec.CheckHeader(); !s.ok()) return answer(ErrorResponse(s), true);
  if (!parse(true) || !parser.is_done()) {
    if (too_large) return answer(ErrorResponse({ErrorCode::kHeadersTooLarge, "the trailer is too large"}), true);
    return 0;
  }
  Request& request = impl.codec.BuildRequest();
  impl.handler(request, Responder(impl.sink, impl.sink->BeginRequest()));
  return answer(impl.sink->Wait(), false);
}

}  // namespace hotrow::http
