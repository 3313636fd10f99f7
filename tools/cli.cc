#include "cli.h"

#include "uswap/base/units.h"

#include <algorithm>
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
