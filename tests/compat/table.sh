#!/usr/bin/env bash
# The compatibility table (markdown) from the suite's results lines (run.sh --results FILE; CTest
# writes one file per test, build/compat/*.jsonl). For each case, user and set of uswap run
# options (--uswap-arg: the pool=yes runs' --pool-limit and backing file) the newest line wins.
# Usage: table.sh FILE...        e.g. tests/compat/table.sh build/compat/*.jsonl
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: table.sh RESULTS.jsonl..." >&2; exit 2; }
cat "$@" | jq -rs '
  def mib: if . == null then "-" else (. / 1048576 | round | tostring) + " MiB" end;
  def cell: tostring | gsub("\\|"; "\\|");
  def secs: if . == null then "-" else (. * 10 | round / 10 | tostring | if test("[.]") then . else . + ".0" end) + " s" end;
  def opts: (.uswap_args // []) | map(gsub("@CASEDIR@/"; "")) | join(" ");
  group_by([.case, .user, opts]) | map(max_by(.date)) | sort_by(.case, .user, opts) |
  (["| program | package | version | user | limit | result | uswap / plain time | peak RSS plain | peak RSS under uswap | why |",
    "|---|---|---|---|--:|---|--:|--:|--:|---|"] | .[]),
  (.[] | "| \(.program | cell) | \(.package) | \(.version) | \(.user)\(if opts == "" then "" else ", " + (opts | cell) end) | \(.limit_bytes | mib) | \(.result) | " +
         (if .uswap == null then "-" else
            "\(.uswap.wall_s | secs) / \(.plain.wall_s | secs)" end) +
         " | \(.plain.peak_rss_bytes | mib) | \(.uswap.peak_rss_bytes // null | mib) | " +
         "\(.reasons | join("; ") | .[0:200] | cell) |")'
