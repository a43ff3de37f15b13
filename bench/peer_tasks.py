#!/usr/bin/env python3
"""reasoning-gym's side of bench_tasks: for one family and its default
config, entries generated per second and answers scored per second, with
the same work as the C side (each entry's own answer, then "x " + answer).
Prints "generate ENTRIES_PER_S" and "score ANSWERS_PER_S", a line each."""
import os
import sys
import time

import reasoning_gym


def main():
    family, seconds = sys.argv[1], float(sys.argv[2])
    # some generators print progress (bf's compiler): keep stdout for the result
    out = os.dup(1)
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    # gsm_symbolic draws every entry's template when it is made: a smaller size
    size = 10**6 if family == "gsm_symbolic" else 10**9
    try:
        ds = reasoning_gym.create_dataset(family, seed=1, size=size)
    except ValueError:
        os.write(out, f"generate skipped reasoning-gym has no family {family}\n".encode())
        os.write(out, f"score skipped reasoning-gym has no family {family}\n".encode())
        return
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
    rate = scored / (time.perf_counter() - t0)
    sys.stdout.flush()
    os.write(out, f"generate {gen:.1f}\nscore {rate:.1f}\n".encode())


if __name__ == "__main__":
    main()
