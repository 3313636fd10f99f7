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
expect nonzero 'not expected.*--bogus' -- --bogus
expect nonzero 'not expected.*--bogus' -- demo --bogus
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
