#!/usr/bin/env python3
"""How long a thread's timed wait of the dynamic batcher's typical queue delays really
lasts, with Linux's default timer slack (50 us) and with the 1 ns slack the batcher's
workers set (server/common/timer_slack.h), side by side in one run, pinned to one core.

The wait is clock_nanosleep (what Python's time.sleep and a futex wait with a timeout both
arm: an hrtimer with the thread's slack). Prints p50 and p99 of the measured wait per asked
delay and slack, and the median overshoot saved.

Usage: /usr/bin/python3 benchmarks/bench_timer_slack.py [--core 0] [--waits 400]
"""
import argparse
import ctypes
import os
import time

PR_SET_TIMERSLACK = 29
PR_GET_TIMERSLACK = 30
DELAYS_US = (100, 200, 300, 500, 1000)


def set_slack(ns):
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_TIMERSLACK, ctypes.c_ulong(ns), 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_TIMERSLACK)")
    return libc.prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0)


def waits(delay_us, count):
    out = []
    for _ in range(count):
        t0 = time.perf_counter_ns()
        time.sleep(delay_us / 1e6)
        out.append((time.perf_counter_ns() - t0) / 1000)
    out.sort()
    return out[len(out) // 2], out[min(len(out) - 1, int(0.99 * len(out)))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--core", type=int, default=0)
    ap.add_argument("--waits", type=int, default=400, help="waits per delay and slack")
    a = ap.parse_args()
    os.sched_setaffinity(0, {a.core})
    own = ctypes.CDLL(None).prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0)
    print(f"core {a.core}; {a.waits} waits per row; this process's own slack: {own} ns; set "
          f"to {set_slack(50_000)} ns (the kernel's default) and {set_slack(1)} ns in turn\n")
    print("| asked us | slack 50 us: p50 | p99 | slack 1 ns: p50 | p99 | median saved |")
    print("| --- | --- | --- | --- | --- | --- |")
    for delay in DELAYS_US:
        rows = {}
        # Interleaved rounds, so that a noisy moment of the machine hits both.
        for _ in range(4):
            for ns in (50_000, 1):
                set_slack(ns)
                p50, p99 = waits(delay, a.waits // 4)
                rows.setdefault(ns, []).append((p50, p99))
        d = [sorted(v)[len(v) // 2] for v in (rows[50_000], rows[1])]
        print(f"| {delay} | {d[0][0]:.0f} | {d[0][1]:.0f} | {d[1][0]:.0f} | {d[1][1]:.0f} | "
              f"{d[0][0] - d[1][0]:.0f} us |")


if __name__ == "__main__":
    main()
