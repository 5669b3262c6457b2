#!/usr/bin/env python3
"""Groups the disagreements of one or more JSONL files (run.py --out) by (kind, check) and prints, per group, the count
and the shortest shrunk text, with what was expected and what libtrie gave.

    python3 tests/differential/summarize.py .cache/differential/disagreements-*.jsonl [--by-note]
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from typing import Any, Dict, List, Tuple


def main() -> int:
    paths = [a for a in sys.argv[1:] if not a.startswith("--")]
    by_note = "--by-note" in sys.argv
    groups: Dict[Tuple[str, ...], List[Dict[str, Any]]] = defaultdict(list)
    for p in paths:
        with open(p, encoding="utf-8") as f:
            for line in f:
                r = json.loads(line)
                key = (r["kind"], r["check"]) + ((r["note"],) if by_note else ())
                groups[key].append(r)
    total = sum(len(v) for v in groups.values())
    print(f"{total} disagreements in {len(groups)} groups")
    for key, recs in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        best = min(recs, key=lambda r: len(r["minimal"]))
        print(f"- {len(recs):5d} x [{' / '.join(key)}]")
        print(f"        text     {best['minimal'][:300]!r}")
        print(f"        expected {str(best['expected'])[:200]}")
        print(f"        got      {str(best['got'])[:200]}  {best['detail'][:160]}  (case {best['case']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
