// uswap: the command-line front door to the library. See README.md.
#include <cstdio>
#include <iostream>
#include <string>

#include "cli.h"
#include "version.h"

namespace {

// Names the valid subcommands, for error messages.
std::string subcommand_list(const CLI::App& app) {
  std::string out;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (!out.empty()) out += ", ";
    out += sub->get_name();
  }
  return out;
}

// The deepest subcommand that was parsed, for an error message naming its options.
const CLI::App* deepest_parsed(const CLI::App& root) {
  const CLI::App* cur = &root;
  for (;;) {
    auto subs = cur->get_subcommands();
    if (subs.empty()) return cur;
    cur = subs.back();
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "uswap: Linux's swap stack in userspace: a compressed RAM page store (zram), a swap slot\n"
      "allocator with per-cluster locks, reverse maps under rw semaphores, and the tools that\n"
      "measure each lock design against the one it replaced.",
      "uswap"};
  app.set_version_flag("--version", std::string("uswap ") + USWAP_VERSION_STRING);
  app.require_subcommand(0, 1);

  uswap::tools::command_table table;
  for (auto add : uswap::tools::registered_commands()) add(app, table);

  // A first argument that is neither an option nor a known subcommand is a typo: say which
  // commands exist rather than CLI11's generic "arguments were not expected".
  if (argc > 1 && argv[1][0] != '-') {
    const std::string first = argv[1];
    bool known = false;
    for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
      if (sub->check_name(first)) known = true;
    if (!known) {
      std::cerr << "uswap: unknown command '" << first << "'\n"
                << "valid commands: " << subcommand_list(app) << "\n"
                << "run 'uswap --help' for a description of each\n";
      return 2;
    }
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    const CLI::App* ctx = deepest_parsed(app);
    std::cerr << "uswap: " << e.what() << "\n\n" << ctx->help();
    // A usage error is 2 (uswap(1), EXIT STATUS), whatever CLI11's code for its kind (105 for
    // a value that does not convert, 106 for a missing one): a script tells usage errors apart
    // by one number, and the program's own statuses that uswap run passes on stay apart.
    return 2;
  }

  const auto* fn = table.find(app);
  if (!fn) {
    std::cout << app.help();
    return argc > 1 ? 2 : 1;
  }
  try {
    const int status = (*fn)();
    std::cout.flush();
    std::cerr.flush();
    uswap::tools::end_as_asked();
    return status;
  } catch (const std::exception& e) {
    std::cerr << "uswap: " << e.what() << "\n";
    return 1;
  }
}
