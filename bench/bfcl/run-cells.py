#!/usr/bin/env python3
"""BFCL cells (mode x category) on llama-server, several at once, each worker pinned to its own CPU core:

  bench/bfcl/run-cells.py --cells "libtrie:simple_python catalog:multiple ..." --limit 50 --seed 37 \\
                          --max-tokens 128 --dir DIR [--workers 2]

Each worker takes the next cell of the list (in order), starts its own llama-server (`-t 1`, one slot) through
run.py under `taskset -c WORKER`, and writes the cell's answers to DIR/MODE-CATEGORY.jsonl and its summary line to
DIR/summary.jsonl (server logs: .cache/bfcl/logs/worker-N/) (run.py --resume: a cell started before keeps the answers it has). On a 2-core machine two
workers use one core each and nothing else should run beside them. Every answer row carries the 1-minute load
average when it ended. Cells are written to DIR/cells.log as they start and end (with the load average)."""
import argparse
import os
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cells", required=True, help="MODE:CATEGORY ... in the order they are taken")
    ap.add_argument("--limit", type=int, required=True)
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--max-tokens", type=int, required=True)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    cells = [tuple(c.split(":", 1)) for c in args.cells.split()]
    for c in cells:
        if len(c) != 2:
            ap.error(f"--cells: {':'.join(c)!r} is not MODE:CATEGORY")
    os.makedirs(args.dir, exist_ok=True)
    py = subprocess.run([os.path.join(HERE, "setup.sh")], check=True, stdout=subprocess.PIPE,
                        text=True).stdout.strip().splitlines()[-1]
    lock = threading.Lock()
    todo = list(cells)
    log = open(os.path.join(args.dir, "cells.log"), "a", buffering=1)
    failed = []

    def note(text):
        with lock:
            log.write(f"{time.strftime('%H:%M:%S', time.gmtime())} load {os.getloadavg()[0]:.2f}: {text}\n")

    def worker(w):
        env = dict(os.environ, BFCL_LOG_DIR=os.path.join(os.path.dirname(os.path.dirname(HERE)), ".cache", "bfcl",
                                                         "logs", f"worker-{w}"))
        while True:
            with lock:
                if not todo:
                    return
                mode, cat = todo.pop(0)
            note(f"worker {w} starts {mode}:{cat}")
            cmd = ["taskset", "-c", str(w % os.cpu_count()), py, os.path.join(HERE, "run.py"), "--engine",
                   "llama-server", "--mode", mode, "--category", cat, "--limit", str(args.limit), "--seed",
                   str(args.seed), "--max-tokens", str(args.max_tokens), "--resume",
                   "--out", os.path.join(args.dir, f"{mode}-{cat}.jsonl"),
                   "--summary", os.path.join(args.dir, "summary.jsonl")]
            with open(os.path.join(args.dir, f"{mode}-{cat}.stderr"), "a") as err:
                rc = subprocess.call(cmd, env=env, stdout=subprocess.DEVNULL, stderr=err)
            note(f"worker {w} ends {mode}:{cat} (exit {rc})")
            if rc:
                failed.append(f"{mode}:{cat}")

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(args.workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    note("all cells done" + (f"; failed: {' '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
