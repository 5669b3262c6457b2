"""bench/bfcl/run.py's llama-server engine: the patched llama-server of scripts/fetch-llama-server.sh (or
$LLAMA_SERVER_BIN), one slot, `-t $BFCL_THREADS` (default 1: on a shared 2-core machine `-t 2` makes llama.cpp's
threads wait on each other and decode collapses), context $BFCL_CTX (default 8192), --jinja.

  stock    --trie-no-route: tools and tool_choice take llama.cpp's own tool grammar;
  libtrie  routed (the default);
  catalog  routed, --trie-set-dir = the registry file's folder (the request names the registry by its stem).
The server's log goes to $BFCL_LOG_DIR (default <repo>/.cache/bfcl/logs)/llama-server-<mode>.log.
"""
import os
import subprocess

from server import REPO, Server, free_port

_server = Server("llama-server", grace_s=10)


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


def start(mode, registry, model):
    """Starts llama-server for `mode`; returns its base URL once /health answers."""
    port = free_port()
    cmd = [_binary(), "-m", _model(model), "--host", "127.0.0.1", "--port", str(port), "-np", "1",
           "-c", os.environ.get("BFCL_CTX", "8192"), "-t", os.environ.get("BFCL_THREADS", "1"), "-nr",
           "--no-webui", "--jinja"]
    if mode == "stock":
        cmd.append("--trie-no-route")
    if registry:
        cmd += ["--trie-set-dir", os.path.dirname(os.path.abspath(registry))]
    return _server.start(cmd, port, f"llama-server-{mode}.log", timeout_s=300, poll_s=0.5)


def stop():
    """Stops the server started by start() (SIGTERM, then SIGKILL after 10 s)."""
    _server.stop()
