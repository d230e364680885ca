// hotrow: one binary, several subcommands. `hotrow --help` lists them and
// `hotrow <command> --help` explains each; the flags of `serve`, and those
// naming a store or a secret elsewhere, have environment-variable twins
// (shown in the help).
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "base/version.h"
#include "cmd/commands.h"
#include "cmd/config.h"
#include "ops/log.h"

int main(int argc, char** argv) {
  hotrow::log::Init();
  CLI::App app{"hotrow: an HTTP API server for hot-row workloads (date plans, leaderboard, point card)"};
  app.require_subcommand(1);
  app.set_version_flag("--version",
                       "hotrow " + std::string(hotrow::Version()) + " (commit " + std::string(hotrow::Commit()) + ")");
  app.set_help_all_flag("--help-all", "Show the help of every subcommand");

  hotrow::cmd::ServeFlags serve_flags;
  hotrow::cmd::SeedFlags seed_flags;
  hotrow::cmd::CheckFlags check_flags;
  hotrow::cmd::GrantFlags grant_flags;
  hotrow::cmd::SimulateFlags simulate_flags;
  hotrow::cmd::BackupFlags backup_flags;
  hotrow::cmd::ProbeFlags probe_flags;
  CLI::App* serve = hotrow::cmd::AddServe(app, serve_flags);
  CLI::App* seed = hotrow::cmd::AddSeed(app, seed_flags);
  CLI::App* check = hotrow::cmd::AddCheck(app, check_flags);
  CLI::App* grant = hotrow::cmd::AddGrant(app, grant_flags);
  CLI::App* simulate = hotrow::cmd::AddSimulate(app, simulate_flags);
  CLI::App* backup = hotrow::cmd::AddBackup(app, backup_flags);
  CLI::App* probe = hotrow::cmd::AddProbe(app, probe_flags);

  // A first word that is no command: say so and list the commands (CLI11
  // alone would say only that the argument was not expected).
  if (argc > 1 && argv[1][0] != '-') {
    bool known = false;
    std::string names;
    for (const CLI::App* sub : app.get_subcommands({})) {
      known = known || sub->get_name() == argv[1];
      names += (names.empty() ? "" : ", ") + sub->get_name();
    }
    if (!known) {
      std::fprintf(stderr, "hotrow: unknown command '%s'; the commands are %s (hotrow --help)\n", argv[1],
                   names.c_str());
      return 2;
    }
  }
  // serve's environment variables outrank its --config file (cmd/config.h).
  hotrow::cmd::ServeArgs args = hotrow::cmd::ResolveServeArgs(*serve, argc, argv);
  if (!args.error.empty()) {
    std::fprintf(stderr, "hotrow serve: %s\n", args.error.c_str());
    return 2;
  }
  try {
    std::vector<std::string> reversed(args.args.rbegin(), args.args.rend());  // as App::parse wants them
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (serve->parsed() && serve_flags.print_config) {
    hotrow::cmd::PrintServeConfig(*serve, args);
    return 0;
  }
  if (serve->parsed()) return hotrow::cmd::RunServe(serve_flags);
  if (seed->parsed()) return hotrow::cmd::RunSeed(seed_flags);
  if (check->parsed()) return hotrow::cmd::RunCheck(check_flags);
  if (grant->parsed()) return hotrow::cmd::RunGrant(grant_flags);
  if (simulate->parsed()) return hotrow::cmd::RunSimulate(simulate_flags);
  if (backup->parsed()) return hotrow::cmd::RunBackup(backup_flags);
  if (probe->parsed()) return hotrow::cmd::RunProbe(probe_flags);
  std::fputs(app.help().c_str(), stderr);
  return 2;
}
