// InProcessConnection: a request through the connection's codec and the
// router without a socket (see server.h).
#include <condition_variable>
#include <mutex>

#include "http/codec.h"
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

int InProcessConnection::Exchange(std::string_view raw, std::string* out, size_t* used) {
  auto& impl = *impl_;
  Parser& parser = impl.codec.Begin(impl.options);
  parser.eager(true);
  boost::system::error_code ec;
  boost::asio::const_buffer input(raw.data(), raw.size());
  while (input.size() > 0 && !parser.is_done()) {
    size_t n = parser.put(input, ec);
    if (ec) return 0;
    input += n;
  }
  if (!parser.is_done()) return 0;
  if (used) *used = raw.size() - input.size();
  Request& request = impl.codec.BuildRequest();
  impl.handler(request, Responder(impl.sink, impl.sink->BeginRequest()));
  Response response = impl.sink->Wait();
  int status = response.status;
  auto buffers = impl.codec.Serialize(std::move(response), false);
  out->clear();
  for (const auto& b : buffers) out->append(static_cast<const char*>(b.data()), b.size());
  impl.codec.Written();
  return status;
}

}  // namespace hotrow::http
