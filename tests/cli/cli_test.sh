#!/usr/bin/env bash
# Checks what a user sees from the uswap command line: help lists the subcommands, --version
# prints a version, unknown commands and options fail non-zero with a message naming the valid
# ones. Usage: cli_test.sh path/to/uswap
set -u
uswap=$1
failures=0
out=$(mktemp)
trap 'rm -f "$out"' EXIT

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

expect zero 'demo' -- --help
expect zero '^uswap [0-9]+\.[0-9]+\.[0-9]+' -- --version
expect nonzero "unknown command 'frobnicate'" -- frobnicate
expect nonzero 'valid commands: .*demo' -- frobnicate
expect 2 'not expected.*--bogus' -- --bogus
expect 2 'not expected.*--bogus' -- demo --bogus
# Usage errors are 2 (uswap(1)), whatever CLI11 calls them: a value that does not convert, a
# missing positional, a value out of range.
expect 2 "size '-5M' is negative" -- run --limit -5M -- true
expect 2 "size '10Q' has an unknown suffix" -- run --limit 10Q -- true
expect 2 'command is required' -- run --limit 8M
expect 2 'at least 256K' -- run --limit 1K -- true
expect zero 'uswap demo' -- demo --ram 16M --size 16M --tasks 2 --no-seeds

# Every subcommand's --help works.
for sub in $("$uswap" --help | awk '/^Subcommands:/{on=1; next} on && NF {print $1}'); do
  expect zero "Usage|usage" -- "$sub" --help
done

if [ $failures -ne 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all command-line checks passed"
