"""LIBTRIE_COMPILED_DIR from Python (issue 38 item 3): compiled sets shared between processes. A recognized set
(front.compile_recognized) and a set file (SetCache) compiled by one process are mapped by the next one without
compiling; a damaged file is compiled again. Real vocabulary (qwen2) from the assets.

    python3 -m unittest tests/python/test_compiled_dir.py     # after cargo build --release
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if os.environ.get("LIBTRIE_TEST_INSTALLED") != "1":
    sys.path.insert(0, str(REPO / "python"))
ASSETS = Path(os.environ.get("TRIE_ASSETS", REPO.parent / "shared" / "assets"))

#: One serving process: recognizes a tool list, compiles it through front.compile_recognized, gets a set file
#: through SetCache, and prints what its compiled directory did.
CHILD = r"""
import json, os, sys
sys.path.insert(0, sys.argv[1])
from libtrie import Vocab
from libtrie import front
from libtrie.sets import SetCache, Settings, compiled_dir
settings = Settings.from_env()
v = Vocab.from_gguf(sys.argv[2])
tools = json.dumps([{"type": "function", "function": {"name": f"tool_{i}", "parameters": {"type": "object"}}}
                    for i in range(300)])
r = front.recognize_once("tools", tools, front.limits(settings))
assert isinstance(r, front.Recognized), r
a = front.compile_recognized(v, r, settings)
cache = SetCache(v, settings=settings)
b = cache.get("names")
print(json.dumps({"dir": compiled_dir(settings).stats(), "set_loaded": cache.loaded, "members": [a.n_members,
                  b.n_members], "states": [a.n_states, b.n_states]}))
"""


class CompiledDirFromPython(unittest.TestCase):
    def setUp(self) -> None:
        self.gguf = ASSETS / "vocab" / "ggml-vocab-qwen2.gguf"
        if not self.gguf.exists():
            raise AssertionError(f"{self.gguf} is missing: run scripts/fetch-assets.sh or set TRIE_ASSETS")
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.tmp = Path(tmp.name)
        (self.tmp / "sets").mkdir()
        (self.tmp / "sets" / "names.txt").write_text("".join(f"@scope/pkg-{i}\n" for i in range(2000)))
        self.compiled = self.tmp / "compiled" / "sub"  # missing: created by the first process

    def child(self, env_name: str = "LIBTRIE_COMPILED_DIR") -> dict:
        env = dict(os.environ, LIBTRIE_SET_DIR=str(self.tmp / "sets"))
        env.pop("LIBTRIE_CACHE_DIR", None)
        env.pop("LIBTRIE_COMPILED_DIR", None)
        env[env_name] = str(self.compiled)
        out = subprocess.run([sys.executable, "-c", CHILD, str(REPO / "python"), str(self.gguf)], env=env,
                             capture_output=True, text=True, timeout=300)
        self.assertEqual(out.returncode, 0, out.stderr)
        return json.loads(out.stdout.strip().splitlines()[-1])

    def test_the_second_process_maps_what_the_first_compiled(self) -> None:
        first = self.child()
        self.assertEqual(first["dir"], {"loaded": 0, "compiled": 1, "rejected": 0, "save_failed": 0})
        self.assertEqual(first["set_loaded"], 0)
        self.assertEqual(first["members"], [300, 2000])
        files = sorted(p.name for p in self.compiled.iterdir())
        self.assertEqual(len(files), 2, files)  # the tool names (a template) and the set file
        self.assertTrue(all(len(n) == 37 and n.endswith(".trie") for n in files), files)
        self.assertEqual(os.stat(self.compiled).st_mode & 0o777, 0o700)
        second = self.child()
        self.assertEqual(second["dir"], {"loaded": 1, "compiled": 0, "rejected": 0, "save_failed": 0})
        self.assertEqual(second["set_loaded"], 1, "the set file's compiled set is mapped, not compiled")
        self.assertEqual(second["states"], first["states"])
        # The older name of the setting still works.
        self.assertEqual(self.child("LIBTRIE_CACHE_DIR")["dir"]["loaded"], 1)
        # Damaged files are compiled again and replaced.
        for name in files:
            p = self.compiled / name
            p.write_bytes(p.read_bytes()[: 200])
        third = self.child()
        self.assertEqual(third["dir"], {"loaded": 0, "compiled": 1, "rejected": 1, "save_failed": 0})
        self.assertEqual(third["states"], first["states"])
        self.assertEqual(self.child()["dir"]["loaded"], 1)


if __name__ == "__main__":
    unittest.main()
