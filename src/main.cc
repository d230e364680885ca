// hotrow: one binary, several subcommands. `hotrow --help` lists them and
// `hotrow <command> --help` explains each; every flag has an environment
// variable twin (shown in the help).
#include <cstdio>

#include "cmd/commands.h"
#include "ops/log.h"

int main(int argc, char** argv) {
  hotrow::log::Init();
  CLI::App app{"hotrow: an HTTP API server for hot-row workloads (date plans, leaderboard, point card)"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Show the help of every subcommand");

  hotrow::cmd::ServeFlags serve_flags;
  hotrow::cmd::SeedFlags seed_flags;
  hotrow::cmd::CheckFlags check_flags;
  hotrow::cmd::GrantFlags grant_flags;
  hotrow::cmd::SimulateFlags simulate_flags;
  CLI::App* serve = hotrow::cmd::AddServe(app, serve_flags);
  CLI::App* seed = hotrow::cmd::AddSeed(app, seed_flags);
  CLI::App* check = hotrow::cmd::AddCheck(app, check_flags);
  CLI::App* grant = hotrow::cmd::AddGrant(app, grant_flags);
  CLI::App* simulate = hotrow::cmd::AddSimulate(app, simulate_flags);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (serve->parsed()) return hotrow::cmd::RunServe(serve_flags);
  if (seed->parsed()) return hotrow::cmd::RunSeed(seed_flags);
  if (check->parsed()) return hotrow::cmd::RunCheck(check_flags);
  if (grant->parsed()) return hotrow::cmd::RunGrant(grant_flags);
  if (simulate->parsed()) return hotrow::cmd::RunSimulate(simulate_flags);
  std::fputs(app.help().c_str(), stderr);
  return 2;
}
