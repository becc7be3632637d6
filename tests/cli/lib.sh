# The CLI tests' shared preamble (not a test: ctest runs tests/cli/test_*.sh). Source it first:
#   . "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# It makes $TMP (removed on exit), counts with check DESCRIPTION COMMAND... (a failing COMMAND prints
# "FAIL: DESCRIPTION" on stderr) and ends with finish: "N passed, N failed", status 1 if any check failed.
# Helpers: no_network FILE (a page loads nothing from the network) and check_index LABEL DIR (an experiment's
# index.html links its summary, figures and views, and nothing else).
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

no_network() { # no_network FILE: true when nothing in FILE loads from the network (URLs, CDNs, fetch, XHR,
  # stylesheet links, external scripts)
  ! grep -Eiq 'https?:|//cdn|fetch\(|XMLHttpRequest|<link|<script[^>]* src=' "$1"
}

check_index() { # check_index LABEL DIR: an experiment's DIR/index.html (icl.experiment, issue 42) links
  # summary.json (when there is one) and every figure and view in DIR (each PNG shown as an image, each SVG and
  # .html linked), every link and image in it names a file that exists there, and nothing in it loads from the
  # network
  local label=$1 dir=$2 f base target missing=""
  check "$label: index.html written" test -s "$dir/index.html"
  [ -s "$dir/index.html" ] || return
  if [ -e "$dir/summary.json" ]; then
    check "$label: index.html links summary.json" grep -qF 'href="summary.json"' "$dir/index.html"
  fi
  check "$label: index.html has no network reference" no_network "$dir/index.html"
  for f in "$dir"/*.png "$dir"/*.svg "$dir"/*.html; do
    [ -e "$f" ] || continue
    base=${f##*/}
    case $base in
      index.html) ;;
      *.png) check "$label: index.html shows $base" grep -qF "<img src=\"$base\"" "$dir/index.html" ;;
      *) check "$label: index.html links $base" grep -qF "href=\"$base\"" "$dir/index.html" ;;
    esac
  done
  while read -r target; do
    [ -e "$dir/$target" ] || missing="$missing $target"
  done < <(grep -oE '(href|src)="[^"]*"' "$dir/index.html" | sed -E 's/^(href|src)="(.*)"$/\2/')
  check "$label: every link of index.html exists (missing:${missing:- none})" [ -z "$missing" ]
}
