#!/usr/bin/env python3
"""reasoning-gym's side of bench_tasks: for one family and its default
config, entries generated per second and answers scored per second, with
the same work as the C side (each entry's own answer, then "x " + answer).
Prints two numbers: entries/s answers/s."""
import sys
import time

import reasoning_gym


def main():
    family, seconds = sys.argv[1], float(sys.argv[2])
    ds = reasoning_gym.create_dataset(family, seed=1, size=10**9)
    entries, t0 = [], time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        entries.append(ds[len(entries)])
    gen = len(entries) / (time.perf_counter() - t0)
    scored, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        e = entries[scored // 2 % len(entries)]
        a = e["answer"] if scored % 2 == 0 else "x " + str(e["answer"])
        ds.score_answer(a, e)
        scored += 1
    print(f"{gen:.1f} {scored / (time.perf_counter() - t0):.1f}")


if __name__ == "__main__":
    main()
