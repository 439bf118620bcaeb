# throttle.sh — sourced by the bench scripts: give the disk under the model files a
# device's read bandwidth with the blkio (cgroup v1) or io (cgroup v2) controller. This VM's
# virtual disk reads from the host's cache at several GB/s, where a device's eMMC, SD card
# or SSD gives 0.1-2; the throttle applies to O_DIRECT and buffered reads alike.
#
#   throttle_setup RATE_BYTES_PER_S NAME FILE...   sets BG (the group; empty: no RATE)
#   throttled CMD...                               runs CMD in BG (plainly when BG is empty)
#   throttle_done                                  removes the group
BG=""
throttle_disk_of() { # the whole disk under FILE (the throttle takes disks, not partitions)
    _d=$(/usr/bin/python3 -c "import os,sys;s=os.stat(sys.argv[1]).st_dev;print('%d:%d'%(os.major(s),os.minor(s)))" "$1")
    [ -f "/sys/dev/block/$_d/partition" ] && _d=$(cat "/sys/dev/block/$_d/../dev")
    echo "$_d"
}
throttle_setup() {
    _rate=$1; _name=$2; shift 2
    [ -n "$_rate" ] || return 0
    if [ -d /sys/fs/cgroup/blkio ]; then
        BG=/sys/fs/cgroup/blkio/$_name
        mkdir -p "$BG" || return 1
        for _f in "$@"; do echo "$(throttle_disk_of "$_f") $_rate" >"$BG/blkio.throttle.read_bps_device" || return 1; done
    elif [ -f /sys/fs/cgroup/cgroup.controllers ]; then
        BG=/sys/fs/cgroup/$_name-io
        mkdir -p "$BG" && echo +io >/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null
        for _f in "$@"; do echo "$(throttle_disk_of "$_f") rbps=$_rate" >"$BG/io.max" || return 1; done
    else
        echo "no blkio/io controller to throttle reads with" >&2
        return 1
    fi
}
throttled() {
    if [ -n "$BG" ]; then sh -c 'echo $$ > "$0/cgroup.procs"; exec "$@"' "$BG" "$@"; else "$@"; fi
}
throttle_done() { [ -z "$BG" ] || rmdir "$BG" 2>/dev/null; BG=""; }
