# The CLI tests' shared preamble (not a test: ctest runs tests/cli/test_*.sh). Source it first:
#   . "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# It makes $TMP (removed on exit), counts with check DESCRIPTION COMMAND... (a failing COMMAND prints
# "FAIL: DESCRIPTION" on stderr) and ends with finish: "N passed, N failed", status 1 if any check failed.
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
pass=0
fail=0

check() { # check DESCRIPTION COMMAND...
  local what=$1
  shift
  if "$@"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $what" >&2; fi
}

finish() { # the script's last command: its status is the test's
  echo "$pass passed, $fail failed"
  [ "$fail" -eq 0 ]
}
