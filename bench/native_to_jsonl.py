"""Convert the JSON lines of `cargo bench --bench engine` (kind=set) into rows of results (engine libtrie-native,
form raw) on stdin -> stdout."""
import json
import sys
import time

for line in sys.stdin:
    line = line.strip()
    if not line.startswith("{"):
        continue
    r = json.loads(line)
    if r.get("kind") != "set":
        continue
    r.update(engine="libtrie-native", form="raw", status="ok", version="engine bench",
             peak_rss_growth_bytes=None, run=sys.argv[1] if len(sys.argv) > 1 else "full",
             date=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    print(json.dumps(r))
