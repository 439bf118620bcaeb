#!/usr/bin/python3
"""pagecache.py FILE — MiB of FILE currently in the page cache (mincore over a mapping);
--bytes FILE: the same in bytes; --evict FILE: drop FILE's pages from the page cache."""
import ctypes
import mmap
import os
import sys

libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]


def cached_bytes(path):
    size = os.path.getsize(path)
    if size == 0:
        return 0
    fd = os.open(path, os.O_RDONLY)
    addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
    os.close(fd)
    page = mmap.PAGESIZE
    n = (size + page - 1) // page
    vec = ctypes.create_string_buffer(n)
    if libc.mincore(addr, size, vec) != 0:
        raise OSError(ctypes.get_errno(), "mincore")
    resident = sum(b & 1 for b in vec.raw)
    libc.munmap(addr, size)
    return resident * page


def evict(path):
    """Drops FILE's clean pages from the page cache (what "cold" means where drop_caches is
    read-only); dirty pages are written first."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--evict":
        evict(sys.argv[2])
    elif len(sys.argv) == 3 and sys.argv[1] == "--bytes":
        print(cached_bytes(sys.argv[2]))
    elif len(sys.argv) == 2:
        print("%.0f" % (cached_bytes(sys.argv[1]) / 2**20))
    else:
        sys.exit("usage: pagecache.py [--bytes | --evict] FILE")
