#!/bin/sh
# Installs the Debian packages given as arguments that are not installed yet.
# Packages with an architecture suffix (libfoo:arm64) enable that architecture first.
set -e
missing=""
for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && { echo "deps: all installed"; exit 0; }
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO=sudo
for p in $missing; do
    case "$p" in
    *:*) arch=${p#*:}; dpkg --print-foreign-architectures | grep -qx "$arch" || $SUDO dpkg --add-architecture "$arch" ;;
    esac
done
echo "deps: installing$missing"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing
