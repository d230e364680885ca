#include "tools/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>

#include "http/json.h"

namespace hotrow::tools {

namespace {

std::string Fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

double OkPerSecond(const RunResult& r) { return r.seconds > 0 ? static_cast<double>(r.ok) / r.seconds : 0; }

// The throughput bound of the aim: P / (0.1 s + one iteration without its wait).
double Bound(const RunResult& r, double think_ms) { return r.parallel / ((think_ms + r.iteration_mean_ms) / 1000.0); }

std::string LatencyRow(const char* label, const RunResult& r, const LatencyStats& s) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "%9d  %-5s %8lld %9.1f %9.0f %9lld %9.1f %9.1f %12.1f %9.1f %9.1f\n", r.parallel,
                label, static_cast<long long>(s.count), s.min, s.mode, static_cast<long long>(s.mode_count), s.median,
                s.mean, s.variance, s.max, s.p99);
  return buf;
}

void WriteLatency(http::JsonWriter& w, const char* key, const LatencyStats& s) {
  w.Key(key);
  w.StartObject();
  w.Field("count", s.count);
  w.Key("minMs"), w.Double(s.min);
  w.Key("modeMs"), w.Double(s.mode);
  w.Field("modeCount", s.mode_count);
  w.Key("medianMs"), w.Double(s.median);
  w.Key("meanMs"), w.Double(s.mean);
  w.Key("varianceMs2"), w.Double(s.variance);
  w.Key("maxMs"), w.Double(s.max);
  w.Key("p99Ms"), w.Double(s.p99);
  w.Key("p999Ms"), w.Double(s.p999);
  w.EndObject();
}

struct GrantSummary {
  int64_t count = 0;
  double total = 0, query = 0, update = 0, commit = 0, cards = 0, write_max = 0, fold = 0, window = 0, total_max = 0;
};
GrantSummary Grants(const RunResult& r) {
  GrantSummary g;
  g.count = static_cast<int64_t>(r.grants.size());
  for (const auto& x : r.grants) {
    g.total += x.total_ms, g.query += x.query_ms, g.update += x.update_ms, g.commit += x.commit_ms;
    g.cards += static_cast<double>(x.cards);
    g.write_max = std::max(g.write_max, x.update_ms + x.commit_ms);
    g.fold += x.fold_ms, g.window += x.window_ms, g.total_max = std::max(g.total_max, x.total_ms);
  }
  if (g.count) {
    double n = static_cast<double>(g.count);
    g.total /= n, g.query /= n, g.update /= n, g.commit /= n, g.cards /= n, g.fold /= n, g.window /= n;
  }
  return g;
}

}  // namespace

std::string ReportText(const SimulationResult& res) {
  const auto& o = res.options;
  std::string t;
  t += "point-card simulation: " + std::to_string(res.options.data.cards) + " cards (" + res.data_note + ")\n";
  t += "duration " + Fmt("%.0f", std::chrono::duration<double>(o.duration).count()) + " s per parallelism, wait " +
       std::to_string(o.think.count()) + " ms, grant every " + Fmt("%.0f", o.grant_interval.count() / 1000.0) +
       " s at " + std::to_string(o.grant_rate_percent) + "%, up to " + std::to_string(o.tries) + " tries\n\n";
  double base = res.runs.empty() ? 0 : OkPerSecond(res.runs.front()) / std::max(1, res.runs.front().parallel);
  t += "8.1 point use\n";
  t += " parallel       OK  REFUSED       NG    NG%    OK+NG  OK+NG/s     OK/s        x   ratio  (OK+REF)/s   bound  "
       "of bound\n";
  for (const auto& r : res.runs) {
    double total = static_cast<double>(r.ok + r.ng);
    double x = base > 0 ? OkPerSecond(r) / base : 0;
    double done_per_s = static_cast<double>(r.ok + r.refused) / r.seconds;
    char buf[320];
    std::snprintf(buf, sizeof buf, "%9d %8lld %8lld %8lld %6.2f %8.0f %8.1f %8.1f %8.1f %6.1f%% %11.1f %7.1f %8.1f%%\n",
                  r.parallel, static_cast<long long>(r.ok), static_cast<long long>(r.refused),
                  static_cast<long long>(r.ng), total > 0 ? 100.0 * static_cast<double>(r.ng) / total : 0, total,
                  total / r.seconds, OkPerSecond(r), x, r.parallel ? 100.0 * x / r.parallel : 0, done_per_s,
                  Bound(r, static_cast<double>(o.think.count())),
                  100.0 * done_per_s / Bound(r, static_cast<double>(o.think.count())));
    t += buf;
  }
  t += "\n8.2-8.5 point-use latency, ms (successes: all, < 1 s, >= 1 s; failures)\n";
  t += " parallel  kind     count       min      mode mode-cnt    median      mean     variance       max       p99\n";
  for (const auto& r : res.runs) {
    t += LatencyRow("all", r, r.success_all);
    t += LatencyRow("<1s", r, r.success_under_1s);
    t += LatencyRow(">=1s", r, r.success_over_1s);
    t += LatencyRow("NG", r, r.failures);
    t += LatencyRow("quiet", r, r.success_outside_grants);
  }
  t += "  (quiet = successes that overlapped no grant)\n";
  t += "\n8.6 point grant (means)\n";
  t += " parallel  count  failed cut-off  time ms  query ms update ms  rows upd commit ms  max write+commit ms"
       "  max time ms  fold ms  window ms\n";
  for (const auto& r : res.runs) {
    auto g = Grants(r);
    char buf[320];
    std::snprintf(buf, sizeof buf, "%9d %6lld %7lld %7lld %8.0f %9.0f %9.0f %9.0f %9.0f %20.0f %12.0f %8.0f %10.0f\n",
                  r.parallel, static_cast<long long>(g.count), static_cast<long long>(r.grants_failed),
                  static_cast<long long>(r.grants_cut_off), g.total, g.query, g.update, g.cards, g.commit, g.write_max,
                  g.total_max, g.fold, g.window);
    t += buf;
  }
  for (const auto& r : res.runs)
    if (!r.grant_error.empty())
      t += "  parallel " + std::to_string(r.parallel) + ", first failed grant: " + r.grant_error + "\n";
  // The stall-free grant's aim: point uses that overlapped a grant (its
  // request to its fold's end) against those that did not.
  t += "\ngrant overlap: successful point uses, ms (a grant's window runs from its request to its fold's end)\n";
  t += " parallel  overlap      count       p50       p99     p99.9       max\n";
  for (const auto& r : res.runs) {
    for (const auto& [label, st] : {std::pair<const char*, const LatencyStats*>{"during", &r.success_during_grants},
                                    {"outside", &r.success_outside_grants}}) {
      char buf[256];
      std::snprintf(buf, sizeof buf, "%9d  %-8s %9lld %9.1f %9.1f %9.1f %9.1f\n", r.parallel, label,
                    static_cast<long long>(st->count), st->median, st->p99, st->p999, st->max);
      t += buf;
    }
  }
  // Beside them, what the reference's post states in its text (its tables
  // are images): every other cell of its tables is not published.
  t += "\nthe reference's published figures (96 logical cores; its tables are images, so what its text does not "
       "state is \"not published\")\n";
  t += "  system      OK/s p1  OK/s p192  x p192  point uses meeting a grant  grant time      grant query\n";
  t += "  Tsurugi         1.7      257.6   ~150x  waited 20-40 s              ~40 s           ~17 s\n";
  t += "  PostgreSQL      7.0      224.0    ~32x  waited up to ~6 s           every grant     ~2 s at READ COMMITTED\n";
  t += "                                                                      failed (pivot)\n";
  t += "  every other cell of tables 8.1-8.6: not published\n";
  t += "\nstorage\n parallel  checkpoints  WAL restarts  largest WAL MiB  database+WAL MiB at end  invariants\n";
  for (const auto& r : res.runs) {
    char buf[512];
    std::snprintf(buf, sizeof buf, "%9d %12llu %13llu %16.1f %24.1f  %s\n", r.parallel,
                  static_cast<unsigned long long>(r.checkpoints), static_cast<unsigned long long>(r.wal_restarts),
                  static_cast<double>(r.wal_bytes_largest) / 1048576.0, static_cast<double>(r.db_bytes_end) / 1048576.0,
                  r.invariants_report.c_str());
    t += buf;
  }
  return t;
}

std::string ReportJson(const SimulationResult& res) {
  std::string out;
  http::JsonWriter w(out);
  w.StartObject();
  w.Field("machine", res.machine);
  w.Field("data", res.data_note);
  w.Field("cards", res.options.data.cards);
  w.Field("stores", res.options.data.stores);
  w.Field("history", res.options.data.history);
  w.Key("durationSeconds"), w.Double(std::chrono::duration<double>(res.options.duration).count());
  w.Key("runs");
  w.StartArray();
  for (const auto& r : res.runs) {
    w.StartObject();
    w.Field("parallel", r.parallel);
    w.Field("ok", r.ok);
    w.Field("refused", r.refused);
    w.Field("ng", r.ng);
    w.Field("retries", r.retries);
    w.Key("okPerSecond"), w.Double(OkPerSecond(r));
    w.Key("iterationMeanMs"), w.Double(r.iteration_mean_ms);
    w.Key("boundPerSecond"), w.Double(Bound(r, static_cast<double>(res.options.think.count())));
    WriteLatency(w, "successAll", r.success_all);
    WriteLatency(w, "successUnder1s", r.success_under_1s);
    WriteLatency(w, "successOver1s", r.success_over_1s);
    WriteLatency(w, "failures", r.failures);
    WriteLatency(w, "successOutsideGrants", r.success_outside_grants);
    WriteLatency(w, "successDuringGrants", r.success_during_grants);
    w.Key("grants");
    w.StartArray();
    for (const auto& g : r.grants) {
      w.StartObject();
      w.Key("totalMs"), w.Double(g.total_ms);
      w.Key("queryMs"), w.Double(g.query_ms);
      w.Key("updateMs"), w.Double(g.update_ms);
      w.Key("commitMs"), w.Double(g.commit_ms);
      w.Key("foldMs"), w.Double(g.fold_ms);
      w.Key("windowMs"), w.Double(g.window_ms);
      w.Field("cards", g.cards);
      w.Field("points", g.points);
      w.EndObject();
    }
    w.EndArray();
    w.Field("grantsFailed", r.grants_failed);
    w.Field("grantError", r.grant_error);
    w.Field("grantsCutOff", r.grants_cut_off);
    w.Field("checkpoints", static_cast<int64_t>(r.checkpoints));
    w.Field("walRestarts", static_cast<int64_t>(r.wal_restarts));
    w.Field("walBytesLargest", r.wal_bytes_largest);
    w.Field("databaseBytesAtEnd", r.db_bytes_end);
    w.Key("invariantsOk"), w.Bool(r.invariants_ok);
    w.Field("invariantsReport", r.invariants_report);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return out;
}

namespace {

// One line chart of a run's figure against parallelism.
std::string LineChart(const SimulationResult& res, const std::string& title, const std::string& y_label,
                      const std::function<double(const RunResult&)>& value, const char* label_format) {
  const double width = 640, height = 400, left = 70, right = 20, top = 40, bottom = 50;
  double max_p = 1, max_y = 1;
  for (const auto& r : res.runs) {
    max_p = std::max(max_p, static_cast<double>(r.parallel));
    max_y = std::max(max_y, value(r));
  }
  max_y *= 1.15;
  auto px = [&](double p) { return left + (width - left - right) * p / max_p; };
  auto py = [&](double y) { return height - bottom - (height - top - bottom) * y / max_y; };
  std::string s = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + Fmt("%.0f", width) + "\" height=\"" +
                  Fmt("%.0f", height) + "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  s += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  s += "<text x=\"" + Fmt("%.0f", width / 2) + "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">" + title +
       "</text>\n";
  s += "<line x1=\"" + Fmt("%.0f", left) + "\" y1=\"" + Fmt("%.0f", py(0)) + "\" x2=\"" + Fmt("%.0f", width - right) +
       "\" y2=\"" + Fmt("%.0f", py(0)) + "\" stroke=\"black\"/>\n";
  s += "<line x1=\"" + Fmt("%.0f", left) + "\" y1=\"" + Fmt("%.0f", top) + "\" x2=\"" + Fmt("%.0f", left) + "\" y2=\"" +
       Fmt("%.0f", py(0)) + "\" stroke=\"black\"/>\n";
  for (int i = 0; i <= 5; ++i) {
    double y = max_y * i / 5;
    s += "<text x=\"" + Fmt("%.0f", left - 6) + "\" y=\"" + Fmt("%.0f", py(y) + 4) + "\" text-anchor=\"end\">" +
         Fmt("%.0f", y) + "</text>\n";
    s += "<line x1=\"" + Fmt("%.0f", left) + "\" y1=\"" + Fmt("%.1f", py(y)) + "\" x2=\"" + Fmt("%.0f", width - right) +
         "\" y2=\"" + Fmt("%.1f", py(y)) + "\" stroke=\"#ddd\"/>\n";
  }
  std::string points;
  for (const auto& r : res.runs) {
    double x = px(r.parallel), y = py(value(r));
    points += Fmt("%.1f", x) + "," + Fmt("%.1f", y) + " ";
    s += "<circle cx=\"" + Fmt("%.1f", x) + "\" cy=\"" + Fmt("%.1f", y) + "\" r=\"4\" fill=\"#c0392b\"/>\n";
    s += "<text x=\"" + Fmt("%.1f", x) + "\" y=\"" + Fmt("%.1f", py(0) + 18) + "\" text-anchor=\"middle\">" +
         std::to_string(r.parallel) + "</text>\n";
    s += "<text x=\"" + Fmt("%.1f", x) + "\" y=\"" + Fmt("%.1f", y - 9) + "\" text-anchor=\"middle\">" +
         Fmt(label_format, value(r)) + "</text>\n";
  }
  s += "<polyline points=\"" + points + "\" fill=\"none\" stroke=\"#c0392b\" stroke-width=\"2\"/>\n";
  s += "<text x=\"" + Fmt("%.0f", width / 2) + "\" y=\"" + Fmt("%.0f", height - 12) +
       "\" text-anchor=\"middle\">parallel online workers</text>\n";
  s += "<text x=\"16\" y=\"" + Fmt("%.0f", height / 2) + "\" transform=\"rotate(-90 16 " + Fmt("%.0f", height / 2) +
       ")\" text-anchor=\"middle\">" + y_label + "</text>\n";
  s += "</svg>\n";
  return s;
}

}  // namespace

std::string ReportSvg(const SimulationResult& res) {
  return LineChart(res, "hotrow point use: OK/s against parallelism", "successful point uses per second", OkPerSecond,
                   "%.1f");
}

// The reference's chart 8.2.2.
std::string ReportMedianSvg(const SimulationResult& res) {
  return LineChart(
      res, "hotrow point use: median of successes under 1 s against parallelism", "median, ms",
      [](const RunResult& r) { return r.success_under_1s.median; }, "%.1f");
}

std::string ReportHtml(const SimulationResult& res) {
  auto escape = [](const std::string& in) {
    std::string out;
    for (char c : in) {
      if (c == '<')
        out += "&lt;";
      else if (c == '>')
        out += "&gt;";
      else if (c == '&')
        out += "&amp;";
      else
        out += c;
    }
    return out;
  };
  return "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>hotrow point-card simulation</title>"
         "<style>body{font-family:sans-serif;margin:2em}pre{background:#f6f6f6;padding:1em;overflow:auto}</style>"
         "</head><body>\n<h1>hotrow point-card simulation</h1>\n<p>" +
         escape(res.machine) + "</p>\n" + ReportSvg(res) + ReportMedianSvg(res) + "<pre>" + escape(ReportText(res)) +
         "</pre>\n</body></html>\n";
}

}  // namespace hotrow::tools
