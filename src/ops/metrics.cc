#include "ops/metrics.h"

#include <cassert>
#include <charconv>
#include <cmath>

namespace hotrow::metrics {

Histogram::Histogram(std::vector<uint64_t> bounds, double divisor)
    : bounds_(std::move(bounds)), divisor_(divisor), counts_(new std::atomic<uint64_t>[bounds_.size() + 1]) {
  for (size_t i = 0; i <= bounds_.size(); ++i) counts_[i].store(0, std::memory_order_relaxed);
}

std::vector<uint64_t> LatencyBuckets() {
  // 100 µs, 250 µs, 500 µs, 1 ms, ... 5 s, 10 s.
  std::vector<uint64_t> b;
  for (uint64_t decade = 100'000; decade < 10'000'000'000; decade *= 10)
    for (uint64_t tenths : {10, 25, 50}) b.push_back(decade * tenths / 10);
  b.push_back(10'000'000'000);
  return b;
}

std::vector<uint64_t> CountBuckets() {
  std::vector<uint64_t> b;
  for (uint64_t v = 1; v <= 4096; v *= 2) b.push_back(v);
  return b;
}

namespace {

void AppendNumber(std::string& out, double v) {
  if (std::isnan(v)) return out.append("NaN"), void();
  if (std::isinf(v)) return out.append(v > 0 ? "+Inf" : "-Inf"), void();
  char buf[400];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed);
  out.append(buf, static_cast<size_t>(end - buf));
}

void AppendUint(std::string& out, uint64_t v) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, static_cast<size_t>(end - buf));
}

}  // namespace

void AppendLabelValue(std::string& out, std::string_view value) {
  for (char c : value) {
    if (c == '\\')
      out.append("\\\\");
    else if (c == '"')
      out.append("\\\"");
    else if (c == '\n')
      out.append("\\n");
    else
      out.push_back(c);
  }
}

void AppendLabels(std::string& out, const Labels& labels, std::string_view extra) {
  if (labels.empty() && extra.empty()) return;
  out.push_back('{');
  bool first = true;
  for (const auto& [k, v] : labels) {
    if (!first) out.push_back(',');
    first = false;
    out.append(k);
    out.append("=\"");
    AppendLabelValue(out, v);
    out.push_back('"');
  }
  if (!extra.empty()) {
    if (!first) out.push_back(',');
    out.append(extra);
  }
  out.push_back('}');
}

void AppendHistogram(std::string& out, std::string_view name, const Labels& labels, const Histogram& h) {
  uint64_t cumulative = 0;
  std::string le;
  for (size_t i = 0; i <= h.bounds().size(); ++i) {
    cumulative += h.bucket(i);
    le = "le=\"";
    if (i < h.bounds().size())
      AppendNumber(le, static_cast<double>(h.bounds()[i]) / h.divisor());
    else
      le.append("+Inf");
    le.push_back('"');
    out.append(name);
    out.append("_bucket");
    AppendLabels(out, labels, le);
    out.push_back(' ');
    AppendUint(out, cumulative);
    out.push_back('\n');
  }
  out.append(name);
  out.append("_sum");
  AppendLabels(out, labels);
  out.push_back(' ');
  AppendNumber(out, static_cast<double>(h.sum()) / h.divisor());
  out.push_back('\n');
  out.append(name);
  out.append("_count");
  AppendLabels(out, labels);
  out.push_back(' ');
  AppendUint(out, cumulative);
  out.push_back('\n');
}

Registration& Registration::operator=(Registration&& o) noexcept {
  if (this != &o) {
    if (registry_) registry_->Remove(id_);
    registry_ = std::exchange(o.registry_, nullptr);
    id_ = o.id_;
  }
  return *this;
}

Registration::~Registration() {
  if (registry_) registry_->Remove(id_);
}

Registry& Registry::Default() {
  static Registry* registry = new Registry();  // never destroyed: series outlive every owner
  return *registry;
}

Registry::Family& Registry::FamilyOf(std::string_view name, std::string_view help, std::string_view type, Kind kind) {
  for (auto& f : families_)
    if (f.name == name) {
      assert(f.type == type && "one metric name, two types");
      return f;
    }
  families_.push_back({std::string(name), std::string(help), std::string(type), kind, {}});
  return families_.back();
}

Registry::Series* Registry::Find(Family& f, const Labels& labels) {
  for (auto& s : f.series)
    if (s.labels == labels) return &s;
  return nullptr;
}

Counter& Registry::GetCounter(std::string_view name, std::string_view help, const Labels& labels) {
  std::lock_guard lock(mutex_);
  Family& f = FamilyOf(name, help, "counter", Kind::kCounter);
  if (Series* s = Find(f, labels)) return *s->counter;
  Series s;
  s.labels = labels;
  s.counter = &counters_.emplace_back();
  f.series.push_back(std::move(s));
  return *f.series.back().counter;
}

Gauge& Registry::GetGauge(std::string_view name, std::string_view help, const Labels& labels) {
  std::lock_guard lock(mutex_);
  Family& f = FamilyOf(name, help, "gauge", Kind::kGauge);
  if (Series* s = Find(f, labels)) return *s->gauge;
  Series s;
  s.labels = labels;
  s.gauge = &gauges_.emplace_back();
  f.series.push_back(std::move(s));
  return *f.series.back().gauge;
}

Histogram& Registry::GetHistogram(std::string_view name, std::string_view help, const Labels& labels,
                                  const std::vector<uint64_t>& bounds, double divisor) {
  std::lock_guard lock(mutex_);
  Family& f = FamilyOf(name, help, "histogram", Kind::kHistogram);
  if (Series* s = Find(f, labels)) return *s->histogram;
  Series s;
  s.labels = labels;
  s.histogram = &histograms_.emplace_back(bounds, divisor);
  f.series.push_back(std::move(s));
  return *f.series.back().histogram;
}

Registration Registry::AddCallback(std::string_view name, std::string_view help, std::string_view type,
                                   const Labels& labels, std::function<double()> read) {
  std::lock_guard lock(mutex_);
  Family& f = FamilyOf(name, help, type, Kind::kCallback);
  Series s;
  s.labels = labels;
  s.read = std::move(read);
  s.id = next_id_++;
  f.series.push_back(std::move(s));
  return Registration(this, f.series.back().id);
}

Registration Registry::AddCollector(std::function<void(std::string&)> write) {
  std::lock_guard lock(mutex_);
  collectors_.emplace_back(next_id_, std::move(write));
  return Registration(this, next_id_++);
}

void Registry::Remove(uint64_t id) {
  std::lock_guard lock(mutex_);
  for (auto& f : families_)
    for (auto it = f.series.begin(); it != f.series.end(); ++it)
      if (it->id == id) {
        f.series.erase(it);
        return;
      }
  for (auto it = collectors_.begin(); it != collectors_.end(); ++it)
    if (it->first == id) {
      collectors_.erase(it);
      return;
    }
}

std::string Registry::Expose() const {
  std::lock_guard lock(mutex_);
  std::string out;
  out.reserve(64 * 1024);
  for (const auto& f : families_) {
    if (f.series.empty()) continue;
    out.append("# HELP ").append(f.name).append(" ").append(f.help).append("\n");
    out.append("# TYPE ").append(f.name).append(" ").append(f.type).append("\n");
    for (const auto& s : f.series) {
      if (s.histogram) {
        AppendHistogram(out, f.name, s.labels, *s.histogram);
        continue;
      }
      out.append(f.name);
      AppendLabels(out, s.labels);
      out.push_back(' ');
      if (s.counter)
        AppendUint(out, s.counter->value());
      else if (s.gauge)
        AppendNumber(out, static_cast<double>(s.gauge->value()));
      else
        AppendNumber(out, s.read());
      out.push_back('\n');
    }
  }
  for (const auto& [id, write] : collectors_) write(out);
  return out;
}

}  // namespace hotrow::metrics
