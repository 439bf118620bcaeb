#!/bin/sh
# Builds libcjson.a for `make static`: Debian ships cJSON only as a shared library, so this
# fetches Debian's own source package of the installed version (apt-get source, with a
# private deb-src list so the system's apt configuration is untouched), applies Debian's
# patches (dpkg-source) and compiles cJSON.c with the given compiler. Nothing lands in the
# repository; the output directory is under build/.
#   tools/build-static-cjson.sh OUTDIR CC AR [EXTRA_CFLAGS]
# The header is copied to OUTDIR/include/cjson/cJSON.h (for compilers that do not search
# /usr/include, such as musl-gcc).
set -eu
out=$1; cc=$2; ar=$3; extra=${4:-}
mkdir -p "$out"
out=$(cd "$out" && pwd)
ver=$(dpkg-query -W -f='${Version}\n' libcjson-dev 2>/dev/null | head -n 1 || true)
[ -n "$ver" ] || { echo "build-static-cjson: libcjson-dev is not installed (make deps)" >&2; exit 1; }
work="$out/src"
rm -rf "$work"; mkdir -p "$work/lists/partial"
. /etc/os-release
echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $VERSION_CODENAME main" \
    >"$work/sources.list"
APT="apt-get -q -o Dir::Etc::SourceList=$work/sources.list -o Dir::Etc::SourceParts=/nonexistent -o Dir::State::Lists=$work/lists"
$APT update >/dev/null
(cd "$work" && $APT source --download-only "cjson=$ver" >/dev/null 2>&1)
(cd "$work" && dpkg-source -x --no-check cjson_*.dsc tree >/dev/null)
mkdir -p "$out/include/cjson"
cp "$work/tree/cJSON.h" "$out/include/cjson/cJSON.h"
# shellcheck disable=SC2086 # extra: several flags
$cc -O2 -fPIC $extra -c "$work/tree/cJSON.c" -o "$out/cJSON.o"
rm -f "$out/libcjson.a"
$ar rcs "$out/libcjson.a" "$out/cJSON.o"
echo "build-static-cjson: $out/libcjson.a from Debian's cjson $ver"
