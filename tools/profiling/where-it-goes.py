#!/usr/bin/env python3
"""Where the CPU time of a 1 KiB GET goes, from `perf script -F tid,ip,sym,dso`
of a run of N requests that took CPU seconds: each sample is put in the first
category whose rule its call stack matches, per thread role, and printed as
microseconds of CPU per request. Used by tools/profile-get.

    where-it-goes.py PERF_SCRIPT_OUTPUT REQUESTS CPU_SECONDS [CATEGORY]

With CATEGORY (a part of a category's name), also lists the frames of ours
and the leaves that category's samples fall in.
"""
import collections
import sys

# (name, test over the stack, leaf first); the first that matches wins.
RULES = [
    ("clock reads; on ours, the loop's spin between turns",
     lambda s: any(x in s[0] for x in ("clock_gettime", "dispatch_time", "cpu_relax", "takeCommands"))
     or (len(s) > 1 and "clock_gettime" in s[1])),
    ("HTTPURLResponse init (FoundationNetworking)",
     lambda s: any("HTTPURLResponseC3url10statusCode" in f for f in s)),
    ("request: easy handle set-up (curl_easy_setopt)",
     lambda s: any("Transfer" in f and ("configure" in f or "request8observer" in f) for f in s)),
    # libcurl wakes its poll by a write to a socket pair; libc's frames lose the caller.
    ("hand-off: waking the transport loop (curl_multi_wakeup)",
     lambda s: any("curl_multi_wakeup" in f or "unix_stream_sendmsg" in f for f in s)),
    ("socket send and recv (kernel)",
     lambda s: any(f.startswith(("__send", "__libc_recv", "__libc_send", "send ", "recv ")) for f in s)),
    ("poll, wake-ups, futexes (kernel)",
     lambda s: any(x in f for f in s for x in ("do_sys_poll", "futex", "sys_poll", "__poll ", "eventfd", "sem_post",
                                                 "sem_wait", "pthread_cond", "_dispatch_sema", "curl_multi_poll"))),
    ("response head: header lines parsed, decisions",
     lambda s: any(x in f for f in s for x in ("headerCallback", "ResponseHeadParser", "deliverHead", "transferDidReceiveHead"))),
    ("body bytes: write callback, sink",
     lambda s: any(x in f for f in s for x in ("writeCallback", "transferDidReceive", "received_3hop", "CollectingSink"))),
    ("cookies: jar lookup",
     lambda s: any("Cookie" in f for f in s)),
    ("task: state machine, hops, metrics, completion",
     lambda s: any(x in f for f in s for x in ("SessionTask", "HopObserver", "HopPlan", "TaskSteps", "TransactionMetrics"))),
    ("async API: continuations, executors",
     lambda s: any(x in f for f in s for x in ("swift_job_run", "swift_task", "Session", "Concurrency"))),
    ("libcurl: multi interface, protocol",
     lambda s: any("libcurl" in f for f in s)),
]

OTHER = "other: mostly malloc and free, whose callers libc's frames lose"


def samples(path):
    current = None
    for line in open(path, errors="replace"):
        if not line.strip():
            if current:
                yield current
            current = None
        elif not line.startswith("\t"):
            current = (line.strip(), [])
        elif current is not None:
            parts = line.strip().split(" ", 1)
            if len(parts) == 2:
                current[1].append(parts[1])
    if current:
        yield current


def main():
    path, requests, cpu = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    if requests <= 0 or cpu <= 0:
        sys.exit("where-it-goes.py: REQUESTS and CPU_SECONDS must be positive")
    all_samples = [s for s in samples(path) if s[1]]
    if not all_samples:
        sys.exit("where-it-goes.py: no samples in " + path)
    # The transport thread is the one Foundation's Thread runs (CurlMulti's loop).
    transport = {tid for tid, stack in all_samples if any("Foundation6ThreadC4main" in f for f in stack)}
    threads = {tid for tid, _ in all_samples}
    counts, per_role = collections.Counter(), collections.Counter()
    for tid, stack in all_samples:
        if tid in transport:
            role = "transport thread"
        elif transport:
            role = "callers' and delivery threads"
        else:
            role = "the process (%d threads)" % len(threads)
        per_role[role] += 1
        name = next((n for n, test in RULES if test(stack)), OTHER)
        counts[(role, name)] += 1
    total = len(all_samples)
    per_request = cpu / requests * 1e6
    print("%d samples, %.1f µs CPU per request" % (total, per_request))
    for role in sorted(per_role, key=lambda r: -per_role[r]):
        print("\n%s: %.1f µs" % (role, per_role[role] / total * per_request))
        for (r, name), count in sorted(counts.items(), key=lambda item: -item[1]):
            if r == role and count / total * per_request >= 0.5:
                print("  %6.1f µs  %s" % (count / total * per_request, name))
    if len(sys.argv) > 4:
        inner = collections.Counter()
        for tid, stack in all_samples:
            name = next((n for n, test in RULES if test(stack)), OTHER)
            if sys.argv[4] in name:
                ours = next((f for f in stack if "10URLLoading" in f or "9Transport" in f), "?")
                inner[(ours[:100], stack[0][:60])] += 1
        print("\n" + sys.argv[4] + ":")
        for (frame, leaf), count in inner.most_common(25):
            print("  %5.2f µs  %s  <=  %s" % (count / total * per_request, frame, leaf))


main()
