// Metrics in the Prometheus text exposition format (0.0.4), served at
// GET /metrics (cmd/serve.cc).
//
// Recording is a relaxed atomic add, with no lock and no allocation: a
// series (one set of label values) is resolved once, where its owner is
// built, and the owner keeps a reference. prometheus-cpp (Debian's 1.0.1)
// was the first choice and was not taken: its Histogram::Observe takes a
// std::mutex, which two event loops and the writer would contend for on
// every request, and Family::Add allocates and locks (docs/operations.md).
//
// Names follow the conventions: base units (seconds, bytes), counters end
// in _total. Series live as long as the process (the registry owns them);
// a value read from an object that may go away (a pool's size) is a
// callback whose Registration handle removes it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hotrow::metrics {

using Labels = std::vector<std::pair<std::string, std::string>>;

class Counter {
 public:
  void Add(uint64_t n = 1) { value_.fetch_add(n, std::memory_order_relaxed); }
  uint64_t value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> value_{0};
};

class Gauge {
 public:
  void Set(int64_t v) { value_.store(v, std::memory_order_relaxed); }
  void Add(int64_t n) { value_.fetch_add(n, std::memory_order_relaxed); }
  int64_t value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> value_{0};
};

// Counts observations into fixed buckets. Values are integers of a unit of
// the caller's choosing (nanoseconds, ops) and are exposed divided by
// `divisor` (1e9: nanoseconds as seconds).
class Histogram {
 public:
  Histogram(std::vector<uint64_t> bounds, double divisor);
  void Observe(uint64_t value) {
    size_t i = 0;
    while (i < bounds_.size() && value > bounds_[i]) ++i;
    counts_[i].fetch_add(1, std::memory_order_relaxed);
    sum_.fetch_add(value, std::memory_order_relaxed);
  }
  // A duration, in the nanoseconds a latency histogram counts.
  template <typename Duration>
  void ObserveDuration(Duration d) {
    auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
    Observe(ns > 0 ? static_cast<uint64_t>(ns) : 0);
  }

  const std::vector<uint64_t>& bounds() const { return bounds_; }
  double divisor() const { return divisor_; }
  // Per bucket (the last one: above every bound), not cumulative.
  uint64_t bucket(size_t i) const { return counts_[i].load(std::memory_order_relaxed); }
  uint64_t sum() const { return sum_.load(std::memory_order_relaxed); }

 private:
  std::vector<uint64_t> bounds_;
  double divisor_;
  std::unique_ptr<std::atomic<uint64_t>[]> counts_;
  std::atomic<uint64_t> sum_{0};
};

// Latencies: 100 µs to 10 s, in nanoseconds, exposed in seconds.
std::vector<uint64_t> LatencyBuckets();
// Sizes and counts: 1, 2, 4, ... 4096.
std::vector<uint64_t> CountBuckets();

// Escapes a label value for the exposition format (\\, \", \n).
void AppendLabelValue(std::string& out, std::string_view value);
// "{a="x",b="y"}" (empty when there are no labels); `extra` is appended
// inside the braces as given (the "le" of a bucket).
void AppendLabels(std::string& out, const Labels& labels, std::string_view extra = {});
void AppendHistogram(std::string& out, std::string_view name, const Labels& labels, const Histogram& h);

class Registry;

// Removes a callback or collector from its registry when destroyed.
class Registration {
 public:
  Registration() = default;
  Registration(Registry* registry, uint64_t id) : registry_(registry), id_(id) {}
  Registration(Registration&& o) noexcept : registry_(std::exchange(o.registry_, nullptr)), id_(o.id_) {}
  Registration& operator=(Registration&& o) noexcept;
  ~Registration();

 private:
  Registry* registry_ = nullptr;
  uint64_t id_ = 0;
};

class Registry {
 public:
  // The process's registry.
  static Registry& Default();

  // The series of `name` with `labels`: created on first use, the same
  // object on every later call with the same name and labels.
  Counter& GetCounter(std::string_view name, std::string_view help, const Labels& labels = {});
  Gauge& GetGauge(std::string_view name, std::string_view help, const Labels& labels = {});
  Histogram& GetHistogram(std::string_view name, std::string_view help, const Labels& labels,
                          const std::vector<uint64_t>& bounds, double divisor);

  // A value read at scrape time; "gauge" or "counter".
  [[nodiscard]] Registration AddCallback(std::string_view name, std::string_view help, std::string_view type,
                                         const Labels& labels, std::function<double()> read);
  // Writes whole families of its own at scrape time (the HTTP routes).
  [[nodiscard]] Registration AddCollector(std::function<void(std::string&)> write);

  // Every family, in the text format.
  std::string Expose() const;

 private:
  friend class Registration;
  void Remove(uint64_t id);

  enum class Kind { kCounter, kGauge, kHistogram, kCallback };
  struct Series {
    Labels labels;
    Counter* counter = nullptr;
    Gauge* gauge = nullptr;
    Histogram* histogram = nullptr;
    std::function<double()> read;
    uint64_t id = 0;  // callbacks: what Registration removes
  };
  struct Family {
    std::string name, help, type;
    Kind kind;
    std::vector<Series> series;
  };
  Family& FamilyOf(std::string_view name, std::string_view help, std::string_view type, Kind kind);
  Series* Find(Family& f, const Labels& labels);

  mutable std::mutex mutex_;
  std::deque<Family> families_;
  std::deque<Counter> counters_;
  std::deque<Gauge> gauges_;
  std::deque<Histogram> histograms_;
  std::vector<std::pair<uint64_t, std::function<void(std::string&)>>> collectors_;
  uint64_t next_id_ = 1;
};

}  // namespace hotrow::metrics
