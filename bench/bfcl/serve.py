#!/usr/bin/env python3
"""One engine of bench/bfcl kept running for several run.py calls (`run.py --url URL`): a dry run of one case, a
timing, then the full run, all on the one start (a CPU vLLM start takes minutes).

  bench/bfcl/serve.py --engine vllm --mode stock [--url-file FILE]

Starts the engine as run.py would (the catalog's registry file in catalog mode, written by run.py --mode catalog
first, or by this script), prints the base URL (and writes it to --url-file), and stops the engine on SIGTERM or
SIGINT."""
import argparse
import importlib
import os
import signal
import sys
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import run  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engine", required=True, choices=["llama-server", "vllm"])
    ap.add_argument("--mode", required=True, choices=["stock", "libtrie", "catalog"])
    ap.add_argument("--model", default=os.environ.get("BFCL_MODEL", ""))
    ap.add_argument("--catalog", default=run.CATALOG_PATH)
    ap.add_argument("--url-file", help="write the base URL here once the engine answers /health")
    args = ap.parse_args()
    engine = importlib.import_module("engine_" + args.engine.replace("-", "_"))
    registry = None
    if args.mode == "catalog":
        run.write_catalog(args.catalog)
        registry = args.catalog
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    url = engine.start(args.mode, registry, args.model)
    try:
        print(url, flush=True)
        if args.url_file:
            with open(args.url_file, "w", encoding="utf-8") as f:
                f.write(url + "\n")
        done.wait()
    finally:
        engine.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
