#!/usr/bin/env python3
"""Where a GET's heap allocations come from, from two files written by
tools/profiling/malloc-sites.c (runs of N/10 and N requests; the difference
per site, so start-up does not count). Each allocation is charged to the
first two frames (SITE_FRAMES in the environment) of the program's own binary above the allocator (Swift
runtime, Foundation and libcurl frames between them are named as "via"),
and the sites are printed as allocations per request, most first. Used by
`tools/profile-get --allocation-sites`.

    allocation-sites.py SMALL_RUN BIG_RUN PROGRAM_NAME REQUESTS_BETWEEN [LIMIT]
"""
import bisect
import collections
import os
import struct
import subprocess
import sys

DEPTH = 24  # malloc-sites.c's frames per allocation, at most
FRAMES = int(os.environ.get("SITE_FRAMES", "2"))  # the program's frames that name a site
# Frames that only pass an allocation on: the site is above them.
PASSING = ("malloc", "calloc", "realloc", "posix_memalign", "aligned_alloc", "memalign", "__libc_",
           "swift_slowAlloc", "swift_allocObject", "swift_allocBox", "swift_allocEmptyBox",
           "swift_allocError", "swift_task_alloc", "record")


def read(path):
    """The maps (start, end, offset, path) sorted by start, and the stacks."""
    with open(path, "rb") as f:
        data = f.read()
    (length,) = struct.unpack_from("<Q", data, 0)
    maps = []
    for line in data[8:8 + length].decode(errors="replace").splitlines():
        parts = line.split(None, 5)
        if len(parts) < 6 or "x" not in parts[1]:
            continue
        start, end = (int(x, 16) for x in parts[0].split("-"))
        maps.append((start, end, int(parts[2], 16), parts[5]))
    maps.sort()
    words = data[8 + length:]
    count = len(words) // 8
    values = struct.unpack_from(f"<{count}Q", words, 0)
    stacks = []
    i = 0
    while i < count:
        n = values[i]
        if n == 0 or n > DEPTH or i + 1 + n > count:
            break
        stacks.append(values[i + 1:i + 1 + n])
        i += 1 + n
    return maps, stacks


def locate(maps, starts, address):
    at = bisect.bisect_right(starts, address) - 1
    if at < 0:
        return None
    start, end, offset, path = maps[at]
    if address >= end:
        return None
    return path, address - start + offset - 1  # a return address: the call is before it


def symbolize(places):
    """{(path, address): mangled name} through llvm-symbolizer, one batch."""
    places = sorted(places)
    if not places:
        return {}
    lines = "".join(f"{path} 0x{address:x}\n" for path, address in places)
    out = subprocess.run(["llvm-symbolizer", "--functions=linkage", "--no-inlines"], input=lines,
                         capture_output=True, text=True, timeout=600).stdout
    names = [block.split("\n")[0] for block in out.strip("\n").split("\n\n")]
    return dict(zip(places, names)) if len(names) == len(places) else {p: "?" for p in places}


def demangle(names):
    names = sorted(set(names))
    try:
        out = subprocess.run(["swift", "demangle", "--simplified"], input="\n".join(names),
                             capture_output=True, text=True, timeout=300).stdout.splitlines()
        if len(out) == len(names):
            return dict(zip(names, out))
    except (OSError, subprocess.SubprocessError):
        pass
    return {name: name for name in names}


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    small, big, program, requests = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    limit = int(sys.argv[5]) if len(sys.argv) > 5 else 50
    runs = [read(small), read(big)]
    places = set()
    located = []
    for maps, stacks in runs:
        starts = [m[0] for m in maps]
        run = [[locate(maps, starts, a) for a in stack] for stack in stacks]
        located.append(run)
        places.update(p for stack in run for p in stack if p)
    names = symbolize(places)
    plain = demangle(names.values())

    def name(place):
        return plain.get(names.get(place, "?"), "?") if place else "?"

    def site(stack):
        frames = [(p, name(p)) for p in stack if p and not p[0].endswith("malloc-sites.so")]
        i = 0
        while i < len(frames) and frames[i][1].startswith(PASSING):
            i += 1
        via = frames[i][1] if i < len(frames) else "?"
        own = []
        for p, n in frames[i:]:
            if os.path.basename(p[0]) == program and (not own or own[-1] != n) and len(own) < FRAMES:
                own.append(n)
        return " <- ".join(own) if own else "[outside the program] " + via, via

    counts = [collections.Counter(), collections.Counter()]
    vias = collections.defaultdict(collections.Counter)
    for index, run in enumerate(located):
        for stack in run:
            key, via = site(stack)
            counts[index][key] += 1
            if index == 1:
                vias[key][via] += 1
    difference = counts[1]
    difference.subtract(counts[0])
    total = sum(difference.values())
    print(f"{total / requests:.1f} allocations per GET, by the program's first frames above the allocator:")
    for key, count in difference.most_common(limit):
        if count / requests < 0.05:
            break
        print(f"{count / requests:6.2f}  {key[:200]}")
        leaf = vias[key].most_common(1)
        if leaf and leaf[0][0] not in key:
            print(f"          via {leaf[0][0][:150]}")


if __name__ == "__main__":
    main()
