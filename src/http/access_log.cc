#include "http/access_log.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <ctime>

#include "http/json.h"

namespace hotrow::http {

std::atomic<AccessLog*> AccessLog::active_{nullptr};

struct AccessLog::Slot {
  std::atomic<size_t> sequence{0};
  int64_t time_us = 0;  // since the epoch
  int status = 0;
  uint64_t duration_us = 0, bytes_in = 0, bytes_out = 0;
  uint8_t id_size = 0, method_size = 0, peer_size = 0;
  uint16_t target_size = 0;
  bool target_cut = false;
  std::array<char, 64> id;
  std::array<char, 16> method;
  std::array<char, 64> peer;
  std::array<char, kTargetMax> target;
};

namespace {

template <size_t N>
size_t CopyInto(std::array<char, N>& to, std::string_view from) {
  size_t n = std::min(from.size(), N);
  std::memcpy(to.data(), from.data(), n);
  return n;
}

// Bytes outside printable ASCII, and the quote and backslash, as \xNN: a
// text line stays one line whatever the target holds.
void AppendEscaped(std::string& out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (unsigned char c : s) {
    if (c < 0x21 || c > 0x7e || c == '"' || c == '\\') {
      out.append("\\x");
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
}

// "2026-12-01T20:30:00.123456Z" into `out` (40 bytes); its length.
size_t FormatTime(char* out, int64_t time_us) {
  std::time_t seconds = static_cast<std::time_t>(time_us / 1'000'000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  size_t n = std::strftime(out, 40, "%Y-%m-%dT%H:%M:%S", &tm);
  n += static_cast<size_t>(std::snprintf(out + n, 40 - n, ".%06lldZ", static_cast<long long>(time_us % 1'000'000)));
  return n;
}

}  // namespace

Result<std::unique_ptr<AccessLog>> AccessLog::Open(const std::string& where, Format format, size_t capacity) {
  std::FILE* out = stdout;
  bool owned = false;
  if (where != "-") {
    out = std::fopen(where.c_str(), "ae");
    if (!out) return Status::BadRequest("cannot open the access log " + where + ": " + std::strerror(errno));
    owned = true;
  }
  size_t rounded = 2;  // the queue needs two slots at least
  while (rounded < capacity) rounded <<= 1;
  return std::unique_ptr<AccessLog>(new AccessLog(out, owned, format, rounded));
}

AccessLog::AccessLog(std::FILE* out, bool owned, Format format, size_t capacity)
    : out_(out),
      owned_(owned),
      format_(format),
      mask_(capacity - 1),
      slots_(new Slot[capacity]),
      dropped_(&metrics::Registry::Default().GetCounter("hotrow_access_log_dropped_total",
                                                        "Access log lines dropped because the log's ring was full.")),
      written_(&metrics::Registry::Default().GetCounter("hotrow_access_log_lines_total", "Access log lines written.")) {
  for (size_t i = 0; i < capacity; ++i) slots_[i].sequence.store(i, std::memory_order_relaxed);
  thread_ = std::thread([this] { Run(); });
}

AccessLog::~AccessLog() {
  if (Active() == this) SetActive(nullptr);
  stop_.store(true, std::memory_order_release);
  if (thread_.joinable()) thread_.join();
  std::fflush(out_);
  if (owned_) std::fclose(out_);
}

bool AccessLog::Close(std::chrono::milliseconds bound) {
  if (Active() == this) SetActive(nullptr);
  stop_.store(true, std::memory_order_release);
  auto deadline = std::chrono::steady_clock::now() + bound;
  while (!finished_.load(std::memory_order_acquire)) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  thread_.join();
  return true;
}

void AccessLog::Push(const Line& line) {
  size_t pos = head_.load(std::memory_order_relaxed);
  Slot* slot;
  for (;;) {
    slot = &slots_[pos & mask_];
    size_t seq = slot->sequence.load(std::memory_order_acquire);
    auto diff = static_cast<intptr_t>(seq) - static_cast<intptr_t>(pos);
    if (diff == 0) {
      if (head_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) break;
    } else if (diff < 0) {
      dropped_->Add();
      return;
    } else {
      pos = head_.load(std::memory_order_relaxed);
    }
  }
  slot->time_us =
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  slot->status = line.status;
  slot->duration_us = line.duration_us;
  slot->bytes_in = line.bytes_in;
  slot->bytes_out = line.bytes_out;
  slot->id_size = static_cast<uint8_t>(CopyInto(slot->id, line.request_id));
  slot->method_size = static_cast<uint8_t>(CopyInto(slot->method, line.method));
  slot->peer_size = static_cast<uint8_t>(CopyInto(slot->peer, line.peer));
  slot->target_size = static_cast<uint16_t>(CopyInto(slot->target, line.target));
  slot->target_cut = line.target.size() > kTargetMax;
  slot->sequence.store(pos + 1, std::memory_order_release);
}

bool AccessLog::Pop(std::string& out) {
  size_t pos = tail_.load(std::memory_order_relaxed);
  Slot& slot = slots_[pos & mask_];
  size_t seq = slot.sequence.load(std::memory_order_acquire);
  if (seq != pos + 1) return false;  // empty, or the next line is still being copied in
  tail_.store(pos + 1, std::memory_order_relaxed);
  FormatLine(slot, out);
  slot.sequence.store(pos + mask_ + 1, std::memory_order_release);
  return true;
}

void AccessLog::FormatLine(const Slot& s, std::string& out) const {
  // Into `out` only, no temporaries: the drain thread allocates nothing per
  // line once its buffer has grown.
  std::string_view id(s.id.data(), s.id_size), method(s.method.data(), s.method_size), peer(s.peer.data(), s.peer_size),
      target(s.target.data(), s.target_size);
  char time[40];
  size_t time_size = FormatTime(time, s.time_us);
  auto number = [&out](uint64_t v) {
    char buf[24];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
    out.append(buf, static_cast<size_t>(end - buf));
  };
  if (format_ == Format::kJson) {
    JsonWriter w(out);
    w.StartObject();
    w.Field("time", std::string_view(time, time_size));
    w.Field("requestId", id);
    w.Field("client", peer);
    w.Field("method", method);
    if (s.target_cut) {
      char cut[kTargetMax + 3];
      std::memcpy(cut, target.data(), target.size());
      std::memcpy(cut + target.size(), "...", 3);
      w.Field("target", std::string_view(cut, target.size() + 3));
    } else {
      w.Field("target", target);
    }
    w.Field("status", static_cast<int64_t>(s.status));
    w.Field("durationUs", static_cast<int64_t>(s.duration_us));
    w.Field("bytesIn", static_cast<int64_t>(s.bytes_in));
    w.Field("bytesOut", static_cast<int64_t>(s.bytes_out));
    w.EndObject();
    out.push_back('\n');
    return;
  }
  out.append(time, time_size);
  out.push_back(' ');
  out.append(id);
  out.push_back(' ');
  AppendEscaped(out, peer);
  out.push_back(' ');
  AppendEscaped(out, method);
  out.push_back(' ');
  AppendEscaped(out, target);
  if (s.target_cut) out.append("...");
  out.push_back(' ');
  number(static_cast<uint64_t>(s.status));
  out.push_back(' ');
  number(s.duration_us);
  out.append("us in=");
  number(s.bytes_in);
  out.append(" out=");
  number(s.bytes_out);
  out.push_back('\n');
}

void AccessLog::Run() {
  std::string buffer;
  for (;;) {
    bool stopping = stop_.load(std::memory_order_acquire);
    size_t lines = 0;
    buffer.clear();
    while (lines < 4096 && Pop(buffer)) ++lines;
    if (lines > 0) {
      bool ok = std::fwrite(buffer.data(), 1, buffer.size(), out_) == buffer.size();
      ok = std::fflush(out_) == 0 && ok;
      (ok ? written_ : dropped_)->Add(lines);  // lines the file refused are lost, and counted so
      continue;
    }
    if (stopping) {  // drained after the stop was seen
      finished_.store(true, std::memory_order_release);
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace hotrow::http
