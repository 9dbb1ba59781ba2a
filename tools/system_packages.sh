#!/usr/bin/env bash
# The system packages a make target needs, installed when this machine lets us, else one clear stop.
#
#   tools/system_packages.sh test       bubblewrap (the grading sandbox) and Debian's chromium (browser tests)
#   tools/system_packages.sh autograde  bubblewrap
#
# As root with apt-get (a fresh Debian/Ubuntu machine, CI) the missing ones are installed. Otherwise,
# with passwordless sudo, through sudo. Otherwise nothing runs: the script prints the one command to
# type and exits 1, so `make test` never starts a suite that would fail on a missing sandbox.
set -euo pipefail

case "${1:-}" in
  test)      wanted="bubblewrap chromium" ;;
  autograde) wanted="bubblewrap" ;;
  *) echo "usage: $0 test|autograde (the make target whose system packages to check)" >&2; exit 2 ;;
esac

CHROMIUM="${CHROMIUM:-/usr/bin/chromium}"  # where the browser tests look for Debian's chromium
present() {  # package name -> is what the tests use there?
  case "$1" in
    bubblewrap) command -v bwrap >/dev/null 2>&1 ;;
    chromium)   [ -x "$CHROMIUM" ] ;;
  esac
}

missing=""
for pkg in $wanted; do present "$pkg" || missing="$missing $pkg"; done
missing="${missing# }"
[ -z "$missing" ] && exit 0

if command -v apt-get >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    SUDO=""
  elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO="sudo -n"
  else
    SUDO=none
  fi
  if [ "$SUDO" != none ]; then
    echo "installing system packages for make $1: $missing (apt-get)"
    $SUDO apt-get update -qq
    # shellcheck disable=SC2086
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null
    still=""
    for pkg in $missing; do present "$pkg" || still="$still $pkg"; done
    [ -z "$still" ] && exit 0
    echo "apt-get ran but these are still missing:$still" >&2
    exit 1
  fi
  echo "make $1 needs system packages that are not installed: $missing" >&2
  echo "install them once, then run make $1 again:" >&2
  echo "    sudo apt-get install -y $missing" >&2
  exit 1
fi
echo "make $1 needs: $missing (bubblewrap provides 'bwrap'; chromium must be at $CHROMIUM)." >&2
echo "This machine has no apt-get; install them with your system's package manager, then run make $1 again." >&2
exit 1
