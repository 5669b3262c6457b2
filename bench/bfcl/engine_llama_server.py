"""bench/bfcl/run.py's llama-server engine: the patched llama-server of scripts/fetch-llama-server.sh (or
$LLAMA_SERVER_BIN), one slot, `-t $BFCL_THREADS` (default 1: on a shared 2-core machine `-t 2` makes llama.cpp's
threads wait on each other and decode collapses), context $BFCL_CTX (default 8192), --jinja.

  stock    --trie-no-route: tools and tool_choice take llama.cpp's own tool grammar;
  libtrie  routed (the default);
  catalog  routed, --trie-set-dir = the registry file's folder (the request names the registry by its stem).
The server's log goes to $BFCL_LOG_DIR (default <repo>/.cache/bfcl/logs)/llama-server-<mode>.log.
"""
import os
import socket
import subprocess
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
_proc = None
_log = None


def _binary():
    b = os.environ.get("LLAMA_SERVER_BIN")
    if b:
        return b
    out = subprocess.run([os.path.join(REPO, "scripts", "fetch-llama-server.sh")], check=True,
                         stdout=subprocess.PIPE, text=True).stdout
    return out.strip().splitlines()[-1]


def _model(model):
    if model:
        return model
    out = subprocess.run([os.path.join(REPO, "scripts", "fetch-model.sh"), "qwen2.5-coder-0.5b"], check=True,
                         stdout=subprocess.PIPE, text=True).stdout
    return out.strip().splitlines()[-1]


def _free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def start(mode, registry, model):
    """Starts llama-server for `mode`; returns its base URL once /health answers."""
    global _proc, _log
    stop()
    port = _free_port()
    cmd = [_binary(), "-m", _model(model), "--host", "127.0.0.1", "--port", str(port), "-np", "1",
           "-c", os.environ.get("BFCL_CTX", "8192"), "-t", os.environ.get("BFCL_THREADS", "1"), "-nr",
           "--no-webui", "--jinja"]
    if mode == "stock":
        cmd.append("--trie-no-route")
    if registry:
        cmd += ["--trie-set-dir", os.path.dirname(os.path.abspath(registry))]
    logs = os.environ.get("BFCL_LOG_DIR", os.path.join(REPO, ".cache", "bfcl", "logs"))
    os.makedirs(logs, exist_ok=True)
    _log = open(os.path.join(logs, f"llama-server-{mode}.log"), "w")
    _proc = subprocess.Popen(cmd, stdout=_log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if _proc.poll() is not None:
            raise RuntimeError(f"llama-server exited ({_proc.returncode}); see {_log.name}")
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as r:
                if r.status == 200:
                    return url
        except Exception:
            pass
        time.sleep(0.5)
    stop()
    raise RuntimeError("llama-server did not become healthy within 300 s")


def stop():
    """Stops the server started by start() (SIGTERM, then SIGKILL after 10 s)."""
    global _proc, _log
    if _proc is not None and _proc.poll() is None:
        _proc.terminate()
        try:
            _proc.wait(10)
        except subprocess.TimeoutExpired:
            _proc.kill()
            _proc.wait()
    _proc = None
    if _log is not None:
        _log.close()
        _log = None
