#include "cli.h"

#include "uswap/base/units.h"

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <utility>

namespace uswap::tools {

namespace {
std::vector<std::pair<int, add_command_fn>>& registry() {
  static std::vector<std::pair<int, add_command_fn>> r;
  return r;
}
}  // namespace

command_registrar::command_registrar(int order, add_command_fn add) {
  registry().emplace_back(order, add);
}

namespace {
int signal_to_end_by = 0;
}  // namespace

void end_by_signal(int sig) noexcept { signal_to_end_by = sig; }

void end_as_asked() noexcept {
  if (signal_to_end_by <= 0) return;
  std::fflush(nullptr);
  // A core of uswap's own would be noise: the program's, if any, has been written already.
  ::prctl(PR_SET_DUMPABLE, 0);
  struct sigaction sa {};
  sa.sa_handler = SIG_DFL;
  ::sigaction(signal_to_end_by, &sa, nullptr);
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, signal_to_end_by);
  ::sigprocmask(SIG_UNBLOCK, &one, nullptr);
  ::kill(::getpid(), signal_to_end_by);
}

std::vector<add_command_fn> registered_commands() {
  auto r = registry();
  std::stable_sort(r.begin(), r.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<add_command_fn> out;
  for (auto& [order, fn] : r) out.push_back(fn);
  return out;
}

const command_fn* command_table::find(const CLI::App& root) const {
  // Walk down the chain of parsed subcommands; the deepest registered one wins, so that
  // "uswap bench seeds" runs the seeds command, not bench's.
  const command_fn* found = nullptr;
  const CLI::App* cur = &root;
  while (cur) {
    const CLI::App* next = nullptr;
    for (const CLI::App* sub : cur->get_subcommands()) {
      for (const entry& e : entries_)
        if (e.app == sub) found = &e.fn;
      next = sub;
    }
    cur = next;
  }
  return found;
}

std::string option_label(const std::string& name) {
  const auto comma = name.rfind(',');
  return comma == std::string::npos ? name : name.substr(comma + 1);
}

CLI::Option* add_rounds_option(CLI::App& app, unsigned& rounds, const std::string& description) {
  return app.add_option("--rounds", rounds, description)->capture_default_str();
}

CLI::Option* add_json_flag(CLI::App& app, bool& json, const std::string& description) {
  return app.add_flag("--json", json, description);
}

CLI::Option* add_size_option(CLI::App& app, const std::string& name, uint64_t& target,
                             const std::string& description) {
  auto* opt = app.add_option_function<std::string>(
      name,
      [&target, label = option_label(name)](const std::string& text) {
        auto r = parse_size(text);
        if (!r.ok()) throw CLI::ValidationError(label, std::string(r.error().message()));
        target = *r;
      },
      description + " (K/M/G suffixes)");
  opt->type_name("SIZE");
  opt->default_str(format_size(target));
  return opt;
}

}  // namespace uswap::tools
