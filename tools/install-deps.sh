#!/bin/sh
# tools/install-deps.sh PKG... — installs the Debian packages given as arguments that are not
# installed yet, so `make run` and `make test` work on a fresh machine with no other command.
#
# - Nothing is installed (and no network is used) when every package is already there: the
#   check is one dpkg-query call.
# - As root the packages are installed directly; otherwise with sudo when sudo can run
#   without a password prompt blocking a non-interactive build (sudo -n), else with sudo
#   when a terminal can answer its prompt; otherwise one line names the packages and the
#   command to run, and the script fails.
# - A package with an architecture suffix (libfoo:arm64) enables that architecture first.
# - "cmd=PKG" means: PKG is wanted only when the command `cmd` is not on PATH (node=nodejs:
#   a Node.js installed another way, e.g. from NodeSource, is used as it is).
set -e
want=""
for p in "$@"; do
    case "$p" in
    *=*) command -v "${p%%=*}" >/dev/null 2>&1 || want="$want ${p#*=}" ;;
    *) want="$want $p" ;;
    esac
done
if ! command -v dpkg-query >/dev/null 2>&1; then
    echo "deps: no dpkg here (not Debian/Ubuntu): not checking packages; the build needs the equivalents of:$want" >&2
    exit 0
fi
missing=""
if [ -n "$want" ]; then
    # one query for all: "name:arch" of every installed one ("x" means the native or "all" arch)
    native=$(dpkg --print-architecture)
    # shellcheck disable=SC2086
    have=$(dpkg-query -W -f='${Package}:${Architecture} ${db:Status-Abbrev}\n' $want 2>/dev/null | awk '$2 ~ /^ii/ {print $1}')
    for p in $want; do
        case "$p" in
        *:*) printf '%s\n' "$have" | grep -qxF "$p" || missing="$missing $p" ;;
        *) printf '%s\n' "$have" | grep -qxF -e "$p:$native" -e "$p:all" || missing="$missing $p" ;;
        esac
    done
fi
[ -z "$missing" ] && { echo "deps: all installed"; exit 0; }

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1 && { sudo -n true 2>/dev/null || [ -t 0 ]; }; then
        SUDO=sudo
    else
        echo "deps: missing packages:$missing — install them as root: apt-get install$missing" >&2
        exit 1
    fi
fi
for p in $missing; do
    case "$p" in
    *:*) arch=${p#*:}; dpkg --print-foreign-architectures | grep -qx "$arch" || $SUDO dpkg --add-architecture "$arch" ;;
    esac
done
echo "deps: installing$missing"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
