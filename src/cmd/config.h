// hotrow serve's settings from four places, in this precedence:
//   flag > environment (HOTROW_*) > --config file (TOML or INI) > default.
// CLI11 2.1.2 (Debian's) applies a config file before the environment, and
// the environment only fills what is still unset, so a file would beat the
// environment; and it reads a config file for the top-level app only, not
// for a subcommand. So the file is read here, with CLI11's TOML/INI reader,
// and the order is made before parsing: each setting that no flag names is
// appended as a flag of its own, from the environment if its variable is
// set, else from the file. PrintServeConfig shows the outcome
// (--print-config), with secrets masked.
#pragma once

#include <set>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace hotrow::cmd {

// Adds --config PATH (HOTROW_CONFIG) to `serve`.
void AddConfigFile(CLI::App& serve, std::string& path);

struct ServeArgs {
  std::vector<std::string> args;     // argv[1..] plus the environment's and the file's settings, for App::parse
  std::set<std::string> from_flags;  // long option names given as flags
  std::set<std::string> from_environment;
  std::set<std::string> from_file;
  std::string error;  // the file could not be read, or names no setting of serve
};
// `argv` with the environment's and the config file's settings added (only
// when the command is serve).
ServeArgs ResolveServeArgs(const CLI::App& serve, int argc, char** argv);

// name = value  # source, one per setting, TOML; secrets as "***".
void PrintServeConfig(const CLI::App& serve, const ServeArgs& sources);

}  // namespace hotrow::cmd
