#!/bin/sh
# tools/fresh-machine-check.sh — checks that the README's two commands work on a fresh machine.
#
# Makes a fresh Debian 12 root (the smallest one: debootstrap's minbase plus what the README
# assumes a user has: git, make, gcc, the C library headers, CA certificates), clones the
# repository into it, and runs, inside it (chroot, as root), exactly
#
#     git clone <repo> colibri && cd colibri && make run     then     make test
#
# with no other command: whatever `make run` / `make test` need they must install
# themselves (tools/install-deps.sh, the package groups at the top of the Makefile).
# Prints the wall-clock time of each command and exits non-zero if either fails.
#
# Usage (as root on a Debian/Ubuntu host with debootstrap; needs the Debian mirror and, for
# the tests' JavaScript tooling, the npm registry):
#
#     sudo sh tools/fresh-machine-check.sh [--branch main] [--repo DIR] [--root DIR] [--keep]
#                                          [--mirror URL] [--jobs N]
#
#   --repo DIR    the git repository to clone (default: the one this script is in)
#   --branch B    the branch to clone (default: main)
#   --root DIR    where to build the root (default: a new directory under ${TMPDIR:-/tmp});
#                 an existing root made by an earlier --keep run is reused as it is only
#                 with --reuse (faster, but then it is not fresh)
#   --keep        leave the root in place afterwards (default: removed)
#   --jobs N      run both commands with MAKEFLAGS=-jN (default: none, as a user types them)
#   --mirror URL  the Debian mirror (default: http://deb.debian.org/debian)
#
# Logs: <root>/root/make-run.log and <root>/root/make-test.log (kept with --keep; the last
# 40 lines are printed on failure).
set -eu

here=$(cd "$(dirname "$0")/.." && pwd)
repo=$here
branch=main
root=""
keep=0
reuse=0
jobs=""
mirror=http://deb.debian.org/debian
while [ $# -gt 0 ]; do
    case "$1" in
    --repo) repo=$2; shift 2 ;;
    --branch) branch=$2; shift 2 ;;
    --root) root=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    --reuse) reuse=1; shift ;;
    --jobs) jobs=$2; shift 2 ;;
    --mirror) mirror=$2; shift 2 ;;
    -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
    *) echo "fresh-machine-check: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
[ "$(id -u)" -eq 0 ] || { echo "fresh-machine-check: needs root (debootstrap, chroot, mount)" >&2; exit 2; }
command -v debootstrap >/dev/null 2>&1 || { echo "fresh-machine-check: needs debootstrap (apt-get install debootstrap)" >&2; exit 2; }
# the git directory holding the branch (a worktree's .git is a file: use the common dir)
gitdir=$(git -C "$repo" rev-parse --path-format=absolute --git-common-dir)
git -C "$repo" rev-parse --verify -q "refs/heads/$branch" >/dev/null ||
    { echo "fresh-machine-check: no branch '$branch' in $repo" >&2; exit 2; }

if [ -z "$root" ]; then
    root=$(mktemp -d "${TMPDIR:-/tmp}/colibri-fresh.XXXXXX")
fi
mounted=""
cleanup() {
    for m in $mounted; do umount -l "$m" 2>/dev/null || true; done
    if [ "$keep" -eq 0 ]; then
        # never follow into a mount that is still there
        if ! grep -q " $root/" /proc/mounts; then rm -rf "$root"; fi
    else
        echo "fresh-machine-check: root kept in $root"
    fi
}
trap cleanup EXIT INT TERM

now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { s = b - a; printf "%dm%04.1fs (%.0f s)", s / 60, s - 60 * int(s / 60), s }'; }

if [ "$reuse" -eq 1 ] && [ -x "$root/usr/bin/make" ]; then
    echo "fresh-machine-check: reusing $root (not fresh)"
else
    echo "fresh-machine-check: debootstrap bookworm into $root"
    t0=$(now)
    debootstrap --variant=minbase --include=git,make,gcc,libc6-dev,ca-certificates \
        bookworm "$root" "$mirror" >"$root.debootstrap.log" 2>&1 ||
        { tail -20 "$root.debootstrap.log" >&2; echo "fresh-machine-check: debootstrap failed" >&2; exit 1; }
    rm -f "$root.debootstrap.log"
    echo "fresh-machine-check: root made in $(secs "$t0" "$(now)")"
fi

cp /etc/resolv.conf "$root/etc/resolv.conf"
mount -t proc proc "$root/proc"; mounted="$root/proc $mounted"
mount -t sysfs sys "$root/sys"; mounted="$root/sys $mounted"
mount --rbind /dev "$root/dev"; mounted="$root/dev $mounted"
mkdir -p "$root/mnt/origin.git"
mount --bind -o ro "$gitdir" "$root/mnt/origin.git"; mounted="$root/mnt/origin.git $mounted"

# Inside the root: a login-like, minimal environment (no host PATH, no host variables).
inside() {
    chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        LANG=C.UTF-8 TERM=dumb ${jobs:+MAKEFLAGS=-j$jobs} /bin/sh -c "$1"
}

rm -rf "$root/root/colibri"
inside "git config --global --add safe.directory '*' && git clone -q -b '$branch' /mnt/origin.git /root/colibri"
rev=$(inside "cd /root/colibri && git log -1 --format='%h %s'")
echo "fresh-machine-check: cloned $branch at $rev"

status=0
for cmd in run test; do
    echo "fresh-machine-check: make $cmd ..."
    t0=$(now)
    if inside "cd /root/colibri && make $cmd" >"$root/root/make-$cmd.log" 2>&1; then
        rc=0
    else
        rc=$?
    fi
    t1=$(now)
    echo "fresh-machine-check: make $cmd: exit $rc, wall-clock $(secs "$t0" "$t1")"
    if [ "$rc" -ne 0 ]; then
        status=1
        sed 's/^/    /' "$root/root/make-$cmd.log" | tail -40
        break
    fi
    if [ "$cmd" = run ]; then
        echo "fresh-machine-check: make run printed (last lines):"
        tail -5 "$root/root/make-run.log" | sed 's/^/    /'
    else
        grep -E '^(unit|integration):' "$root/root/make-test.log" | sed 's/^/    /'
    fi
done
[ "$status" -eq 0 ] && echo "fresh-machine-check: OK (make run and make test passed in a fresh root)"
exit "$status"
