// The `uswap` command line: shared plumbing for its subcommands.
//
// Each capability adds one subcommand from its own file (add_<name>_command), registering the
// function that runs it. main() parses with CLI11 and runs the deepest subcommand the user named.
// Sizes go through add_size_option so that "16K", "200M", "1G" mean the same everywhere.
//
// Thread-safety: command-line setup happens on the main thread before any work starts.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace uswap::tools {

// What main() runs once parsing succeeded; returns the process exit code.
using command_fn = std::function<int()>;

class command_table {
 public:
  // Registers `fn` to run when `sub` (a subcommand, possibly nested) is the deepest one given.
  void add(CLI::App* sub, command_fn fn) { entries_.push_back({sub, std::move(fn)}); }
  // The function of the deepest parsed subcommand, or nullptr.
  const command_fn* find(const CLI::App& root) const;

 private:
  struct entry {
    CLI::App* app;
    command_fn fn;
  };
  std::vector<entry> entries_;
};

// An option taking a size with K/M/G/T suffixes (binary multiples), parsed by uswap::parse_size.
// The default shown in --help is the current value of `target`.
CLI::Option* add_size_option(CLI::App& app, const std::string& name, uint64_t& target,
                             const std::string& description);

// Each subcommand lives in tools/<name>.cc and registers itself with a namespace-scope
//   static const command_registrar reg{order, add_<name>_command};
// Every tools/*.cc is compiled into the uswap executable itself (not a static library), so the
// registrar always runs. `order` sets the position in --help: lower first.
using add_command_fn = void (*)(CLI::App& app, command_table& table);

struct command_registrar {
  command_registrar(int order, add_command_fn add);
};

// The registered subcommands, sorted by order; main() adds them to the root app.
std::vector<add_command_fn> registered_commands();

}  // namespace uswap::tools
