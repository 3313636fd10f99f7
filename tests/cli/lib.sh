# Sourced by every command-line test script (tests/cli/*_test.sh): one way to run uswap and judge
# its exit status and output, so all of them report a failure alike.
# The sourcing script sets `uswap` (the binary) and `out` (a file for the output) first, counts
# its own extra checks in `failures`, and exits non-zero when it is above 0.

# expect <zero|nonzero|N> <extended regex that must appear in stdout+stderr> -- uswap args...
# (N: exactly that exit status)
expect() {
  local want=$1 pattern=$2
  shift 3
  "$uswap" "$@" >"$out" 2>&1
  local rc=$? ok=1
  if [ "$want" = zero ] && [ $rc -ne 0 ]; then ok=0; fi
  if [ "$want" = nonzero ] && [ $rc -eq 0 ]; then ok=0; fi
  if [[ $want =~ ^[0-9]+$ ]] && [ $rc -ne "$want" ]; then ok=0; fi
  if ! grep -Eq -- "$pattern" "$out"; then ok=0; fi
  if [ $ok -eq 0 ]; then
    echo "FAIL: uswap $* (exit $rc, wanted $want, pattern '$pattern'):"
    # The end of the output says why; a long table before it would only bury that.
    sed 's/^/    /' "$out" | tail -60
    failures=$((failures + 1))
  else
    echo "ok: uswap $*"
  fi
}
