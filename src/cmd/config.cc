#include "cmd/config.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include "db/store_url.h"

namespace hotrow::cmd {

void AddConfigFile(CLI::App& serve, std::string& path) {
  serve
      .add_option("--config", path,
                  "A TOML or INI file of serve's settings: name = value, names as the flags' (port = 8080), at the "
                  "top or under [serve]")
      ->envname("HOTROW_CONFIG");
}

namespace {

// The option's first long name ("port" for --port).
std::string LongName(const CLI::Option& o) {
  const auto& names = o.get_lnames();
  return names.empty() ? std::string() : names.front();
}

bool Secret(const std::string& name) { return name == "admin-token" || name == "metrics-token"; }

}  // namespace

ServeArgs ResolveServeArgs(const CLI::App& serve, int argc, char** argv) {
  ServeArgs out;
  for (int i = 1; i < argc; ++i) out.args.emplace_back(argv[i]);
  bool is_serve = argc > 1 && serve.get_name() == argv[1];
  if (!is_serve) return out;
  std::string config;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--") break;
    if (a == "--config" && i + 1 < argc) config = argv[i + 1];
    if (a.rfind("--config=", 0) == 0) config = a.substr(9);
  }
  if (config.empty() && std::getenv("HOTROW_CONFIG")) config = std::getenv("HOTROW_CONFIG");
  // "--name=" on the command line: CLI11 would take the next argument as
  // its value (an empty --admin-token= once took "--print-config").
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--") break;
    if (a.size() > 3 && a.rfind("--", 0) == 0 && a.back() == '=') {
      out.error = a + " has no value; leave the flag out, or give it one";
      return out;
    }
  }
  // The file's settings by option name; a list keeps every value.
  std::map<std::string, std::vector<std::string>> file;
  if (!config.empty()) {
    // A regular file of a sane size: not a directory, not /dev/zero.
    constexpr uintmax_t kConfigBytesMax = 1 << 20;
    std::error_code ec;
    auto st = std::filesystem::status(config, ec);
    if (ec || !std::filesystem::is_regular_file(st)) {
      out.error = "cannot read the config file " + config + " (not a regular file)";
      return out;
    }
    if (std::filesystem::file_size(config, ec) > kConfigBytesMax) {
      out.error = "the config file " + config + " is larger than 1 MiB";
      return out;
    }
    std::ifstream in(config);
    if (!in) {
      out.error = "cannot read the config file " + config;
      return out;
    }
    try {
      for (const CLI::ConfigItem& item : CLI::ConfigTOML().from_config(in)) {
        if (item.name == "++" || item.name == "--") continue;  // section markers
        bool here = item.parents.empty() ||
                    (item.parents.size() == 1 && (item.parents[0] == "serve" || item.parents[0] == "default"));
        if (!here) {
          std::string section;
          for (const auto& p : item.parents) section += (section.empty() ? "" : ".") + p;
          out.error = "the config file " + config + " has a section [" + section +
                      "]; settings go at the top, under [serve] or [default]";
          return out;
        }
        const CLI::Option* o = serve.get_option_no_throw("--" + item.name);
        if (!o || item.name == "config" || item.name == "help" || item.name == "print-config" ||
            item.name == "print-routes") {
          out.error = "the config file " + config + " names '" + item.name + "', which is no setting of serve";
          return out;
        }
        // CLI11 2.1.2's reader cuts a quoted value at '#' and keeps escapes
        // and quotes as they are: refuse what it would read wrong, rather
        // than run with a token that is not the one written.
        for (const auto& v : item.inputs) {
          if (v.find_first_of("\"'\\#") != std::string::npos) {
            out.error = "the config file " + config + ": the value of '" + item.name +
                        "' holds a quote, a backslash or '#', which this reader cannot take; set it in the "
                        "environment (" +
                        o->get_envname() + ") instead";
            return out;
          }
        }
        if (item.inputs.size() > 1 && o->get_expected_max() <= 1) {
          out.error = "the config file " + config + ": '" + item.name + "' takes one value (quote it)";
          return out;
        }
        file[item.name] = item.inputs;
      }
    } catch (const CLI::Error& e) {
      out.error = "cannot read the config file " + config + ": " + e.what();
      return out;
    }
  }
  // The settings from the environment and the file go right after "serve",
  // before the user's flags: a flag of theirs left without its value then
  // fails as it would alone, instead of taking one of these as its value.
  std::vector<std::string> added;
  for (const CLI::Option* o : serve.get_options()) {
    std::string name = LongName(*o);
    if (name.empty() || name == "config") continue;
    for (int i = 2; i < argc; ++i) {
      std::string a = argv[i];
      if (a == "--") break;
      if (a == "--" + name || a.rfind("--" + name + "=", 0) == 0) out.from_flags.insert(name);
    }
    if (out.from_flags.count(name)) continue;
    // An empty value is no value (as CLI11 treats an empty variable): an
    // empty "--name=" would make CLI11 take the next argument as its value.
    const char* value = o->get_envname().empty() ? nullptr : std::getenv(o->get_envname().c_str());
    if (value && *value) {
      added.push_back("--" + name + "=" + value);
      out.from_environment.insert(name);
      continue;
    }
    auto it = file.find(name);
    if (it == file.end()) continue;
    bool any = false;
    for (const auto& v : it->second) {
      if (v.empty()) continue;
      added.push_back("--" + name + "=" + v);
      any = true;
    }
    if (any) out.from_file.insert(name);
  }
  out.args.insert(out.args.begin() + 1, added.begin(), added.end());
  return out;
}

void PrintServeConfig(const CLI::App& serve, const ServeArgs& sources) {
  std::printf("# hotrow serve: the settings in effect (flag > environment > --config file > default)\n");
  for (const CLI::Option* o : serve.get_options()) {
    std::string name = LongName(*o);
    if (name.empty() || name == "help" || name == "help-all" || name == "config" || name == "print-config" ||
        name == "print-routes")
      continue;
    std::string source = sources.from_flags.count(name)         ? "flag"
                         : sources.from_environment.count(name) ? "environment " + o->get_envname()
                         : sources.from_file.count(name)        ? "config file"
                                                                : "default";
    std::vector<std::string> values = o->count() > 0 ? o->results() : std::vector<std::string>{};
    if (o->count() == 0 && !o->get_default_str().empty()) values.push_back(o->get_default_str());
    for (auto& v : values) {
      if (Secret(name)) v = v.empty() ? v : "***";
      if (name == "db" || name == "redis" || name == "redis-replica") v = db::RedactUrl(v);
    }
    std::string text;
    bool is_list = o->get_expected_max() > 1;
    if (is_list) text += "[";
    for (size_t i = 0; i < values.size(); ++i) {
      if (i) text += ", ";
      bool number = !values[i].empty() && values[i].find_first_not_of("0123456789-") == std::string::npos;
      bool boolean = values[i] == "true" || values[i] == "false";
      text += number || boolean ? values[i] : "\"" + values[i] + "\"";
    }
    if (is_list) text += "]";
    if (values.empty() && !is_list) text = "\"\"";
    std::printf("%s = %s  # %s\n", name.c_str(), text.c_str(), source.c_str());
  }
}

}  // namespace hotrow::cmd
