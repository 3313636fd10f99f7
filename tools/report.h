// How a `uswap` subcommand's result becomes output: a subcommand computes one report struct, and
// exactly one place prints it, as JSON (report.to_json(), nlohmann::json) or as text
// (report.print(std::ostream&)). The work never asks whether --json was given.
//
// Also here: lock statistics as JSON straight from the lock_stats rows, and printf-style
// formatting into a std::string for the printers' fixed-width columns.
//
// Thread-safety: pure functions of their arguments; print_report writes to the stream given.
// Invariants: a lock_stats row's JSON holds exactly its stored fields (name, acquisitions,
// contended, wait_total_ns, wait_max_ns), as lockstat::to_json writes them.
#pragma once

#include <cstdarg>
#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

#include "uswap/base/status.h"
#include "uswap/sync/lockstat.h"

namespace uswap {

// nlohmann's conversion of a lock_stats row (found by argument-dependent lookup), so that
// `json = rows` needs no detour through lockstat::to_json's text.
void to_json(nlohmann::json& j, const lock_stats& s);

}  // namespace uswap

namespace uswap::tools {

// printf into a std::string.
std::string strprintf(const char* format, ...) __attribute__((format(printf, 1, 2)));

// The one place a report is printed: r.to_json() (indented by `indent`, or on one line when it
// is negative), or r.print(out).
template <class Report>
void print_report(std::ostream& out, const Report& r, bool json, int indent = 2) {
  if (json)
    out << r.to_json().dump(indent) << "\n";
  else
    r.print(out);
}

// `j` pretty-printed into the file at `path`; EIO naming the file when it cannot be written.
status write_json_file(const std::string& path, const nlohmann::json& j);

}  // namespace uswap::tools
