// `uswap demo`: what `make demo` runs. It shows only what the layers built so far can do, with
// figures measured in this run; it never prints a figure it did not measure.
#include <iostream>

#include "cli.h"

namespace uswap::tools {
namespace {

int run_demo() {
  std::cout << "uswap demo\n"
               "==========\n"
               "Built so far: the foundation (build, command line, size parsing, CI).\n"
               "Not yet built: the sync, compress, zsmalloc, zram, swap, mm, uffd and nbd layers.\n"
               "The demo will page memory through reclaim, swap and zram and print the three seed\n"
               "tables once those layers land; until then it has nothing measured to show.\n";
  return 0;
}

void add_demo_command(CLI::App& app, command_table& table) {
  auto* sub =
      app.add_subcommand("demo", "Show the whole stack working, with real figures, in a minute");
  table.add(sub, run_demo);
}

const command_registrar reg{0, add_demo_command};

}  // namespace
}  // namespace uswap::tools
