// The `uswap` command line: shared plumbing for its subcommands.
//
// Each capability adds one subcommand from its own file (add_<name>_command), registering the
// function that runs it. main() parses with CLI11 and runs the deepest subcommand the user named.
// Sizes go through add_size_option so that "16K", "200M", "1G" mean the same everywhere; enum
// values and lists (lock modes, devices, tests) through add_enum_option / add_enum_list_option
// over the enum's name table, so that every subcommand accepts, lists and refuses them alike;
// --rounds and --json through add_rounds_option and add_json_flag.
//
// Thread-safety: command-line setup happens on the main thread before any work starts.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "uswap/base/enum_names.h"

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

// A command whose program was killed by a signal ends the same way: main() kills itself with
// `sig` once every destructor has run (no core dump of its own), so that whoever waits sees the
// program's wait status (a shell prints "Segmentation fault", Python's returncode is -11),
// not an exit with 128 + signal. 0: exit normally.
void end_by_signal(int sig) noexcept;
// Called by main() last; returns only if no signal was asked for, or it did not end the process.
void end_as_asked() noexcept;

// An option taking a size with K/M/G/T suffixes (binary multiples), parsed by uswap::parse_size.
// The default shown in --help is the current value of `target`.
CLI::Option* add_size_option(CLI::App& app, const std::string& name, uint64_t& target,
                             const std::string& description);

// The name an option's errors go by: its long name ("--record" of "-r,--record").
std::string option_label(const std::string& name);

// A bad option value found while parsing: "--name: message", exit status 2 (a usage error, as
// the subcommands' own checks of their options give).
inline CLI::ParseError bad_option_value(const std::string& label, const std::string& message) {
  return CLI::ParseError(label + ": " + message, 2);
}

// An option whose text parse(std::string_view) -> result<T> turns into `target`; a parse error
// fails the command line with bad_option_value. The default shown in --help is `default_text`.
template <class Target, class Parse>
CLI::Option* add_parsed_option(CLI::App& app, const std::string& name, Target& target, Parse parse,
                               const std::string& default_text, const std::string& description) {
  auto* opt = app.add_option_function<std::string>(
      name,
      [&target, parse, label = option_label(name)](const std::string& text) {
        auto r = parse(std::string_view(text));
        if (!r.ok()) throw bad_option_value(label, std::string(r.error().message()));
        target = std::move(*r);
      },
      description);
  opt->type_name("TEXT");
  opt->default_str(default_text);
  return opt;
}

// One value of an enum (or std::optional of one: unset unless given) named by its table; an
// unknown name fails with parse_enum's message naming `what` and the valid names.
template <class Target, class E, size_t N>
CLI::Option* add_enum_option(CLI::App& app, const std::string& name, Target& target,
                             const enum_name<E> (&table)[N], std::string what,
                             const std::string& description) {
  std::string shown;
  if constexpr (std::is_same_v<Target, E>) shown = std::string(name_of(table, target));
  return add_parsed_option(
      app, name, target,
      [&table, what](std::string_view text) { return parse_enum(table, text, what); }, shown,
      description);
}

// "all" or a comma-separated list of an enum's names (parse_enum_list): the modes a subcommand
// compares. --help shows `description`, the valid names, and the current value.
template <class E, size_t N>
CLI::Option* add_enum_list_option(CLI::App& app, const std::string& name, std::vector<E>& target,
                                  const enum_name<E> (&table)[N], std::string what,
                                  const std::string& description) {
  std::string shown;
  if (target == all_values(table)) {
    shown = "all";
  } else {
    for (E v : target) shown += (shown.empty() ? "" : ",") + std::string(name_of(table, v));
  }
  return add_parsed_option(
      app, name, target,
      [&table, what](std::string_view text) { return parse_enum_list(table, text, what); }, shown,
      description + ": " + valid_names(table) + ", a comma list, or all");
}

// --rounds: rounds of alternating runs; the default shown is the current value.
CLI::Option* add_rounds_option(CLI::App& app, unsigned& rounds, const std::string& description);

// --json: the report as JSON on stdout instead of text.
CLI::Option* add_json_flag(CLI::App& app, bool& json,
                           const std::string& description = "Print the results as JSON");

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
