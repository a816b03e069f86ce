#!/usr/bin/env python3
"""The overhead of the Python bindings against the CLI on the same model (docs/BENCHMARKS.md,
"Python bindings vs the CLI"): alternating runs of `turboquant generate` (its decode tok/s from the
stderr summary) and `Model.generate(stream=True)` iterated in this process ((tokens - 1) over the
time from the first piece to the last: the decode rate through the streaming iterator), greedy, the
same prompt and length. Prints each run and the medians.

    PYTHONPATH=build/release/python python3 scripts/bench_python.py \\
        --cli build/release/src/cli/turboquant --model ../shared/models/tq-llama-21m --runs 5
"""

import argparse
import re
import statistics
import subprocess
import time

import turboquant

PROMPT = "The dictionary defines a word as"


def cli_decode(cli, model, tokens, threads):
    out = subprocess.run([cli, "generate", "--model", model, "--prompt", PROMPT, "--max-tokens",
                          str(tokens), "--temp", "0", "--threads", str(threads)],
                         capture_output=True, text=True, check=True)
    m = re.search(r"generated (\d+) tokens, ([0-9.]+) tok/s", out.stderr)
    if not m:
        raise RuntimeError("no decode rate in the CLI's stderr:\n" + out.stderr)
    return float(m.group(2))


def python_decode(m, tokens):
    first = None
    n = 0
    for _ in m.generate(PROMPT, max_tokens=tokens, temperature=0, stream=True):
        n += 1
        if first is None:
            first = time.perf_counter()
    elapsed = time.perf_counter() - first
    return (n - 1) / elapsed if n > 1 and elapsed > 0 else 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cli", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    m = turboquant.load(a.model, threads=a.threads)
    python_decode(m, 8)  # warm: pages of the mapping, the thread pool
    c, p = [], []
    for i in range(a.runs):
        c.append(cli_decode(a.cli, a.model, a.tokens, a.threads))
        p.append(python_decode(m, a.tokens))
        print(f"run {i + 1}: cli {c[-1]:.1f} tok/s, python {p[-1]:.1f} tok/s", flush=True)
    mc, mp = statistics.median(c), statistics.median(p)
    print(f"median: cli {mc:.1f} ({min(c):.1f} .. {max(c):.1f}), python {mp:.1f} "
          f"({min(p):.1f} .. {max(p):.1f}), ratio python/cli {mp / mc:.2f}")


if __name__ == "__main__":
    main()
