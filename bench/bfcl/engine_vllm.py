"""bench/bfcl/run.py's vLLM engine: vLLM's OpenAI-compatible server from the venv of scripts/setup-vllm.sh
($BFCL_VLLM_PYTHON, default <repo>/.cache/vllm-venv/bin/python), on CPU, one model, `--max-num-seqs 1`, context
$BFCL_CTX (default 8192), the `hermes` tool parser (Qwen 2.5's format), `nice -n 10` ($BFCL_NICE) on a shared
machine, libtrie's compiles on one thread (RAYON_NUM_THREADS=1: the other core stays with the model), vLLM's default
dtype (bfloat16 on CPU) or $BFCL_VLLM_DTYPE (`--dtype`, e.g. float32).

  stock    LIBTRIE_VLLM_ROUTE unset: tools with tool_choice "required" take vLLM's own xgrammar schema (vLLM
           enforces `required`; this is the comparison that counts);
  libtrie  LIBTRIE_VLLM_ROUTE=1 (the one switch; no scheduler flag): the same request served by libtrie (names from
           a trie, each call's arguments by its own tool's schema, parallel calls);
  catalog  routed, LIBTRIE_SET_DIR = the registry file's folder; the request names it with
           `vllm_xargs: {"libtrie_registry": NAME}` (catalog_fields).

The model is a Hugging Face folder ($BFCL_VLLM_MODEL or `model`): vLLM 0.32 has no GGUF loader, so a GGUF path is
converted once with tests/vllm/convert_gguf.py into <repo>/.cache/models/<stem>-hf. The default is
Qwen2.5-Coder-0.5B-Instruct (scripts/fetch-model.sh qwen2.5-coder-0.5b). The server's log goes to $BFCL_LOG_DIR
(default <repo>/.cache/bfcl/logs)/vllm-<mode>.log.
"""
import os
import subprocess

from server import Server, free_port

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
_server = Server("vLLM's server", grace_s=30)


def _python():
    return os.environ.get("BFCL_VLLM_PYTHON") or os.path.join(REPO, ".cache", "vllm-venv", "bin", "python")


def _model(model):
    """A Hugging Face model folder for vLLM: `model` (or $BFCL_VLLM_MODEL) when it is a folder, else a GGUF
    (`model` or the default Qwen2.5-Coder-0.5B) converted once."""
    model = model or os.environ.get("BFCL_VLLM_MODEL", "")
    if model and os.path.isdir(model):
        return model
    if not model:
        out = subprocess.run([os.path.join(REPO, "scripts", "fetch-model.sh"), "qwen2.5-coder-0.5b"], check=True,
                             stdout=subprocess.PIPE, text=True).stdout
        model = out.strip().splitlines()[-1]
    stem = os.path.splitext(os.path.basename(model))[0]
    folder = os.path.join(REPO, ".cache", "models", f"{stem}-hf")
    if not os.path.isfile(os.path.join(folder, "tokenizer.json")):
        subprocess.run([_python(), os.path.join(REPO, "tests", "vllm", "convert_gguf.py"), model, folder], check=True,
                       env=dict(os.environ, HF_HUB_OFFLINE="1"))
    return folder


def command(mode, registry, model, port):
    """The server's command line and environment for `mode` (no side effect: for tests and --dry-run)."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
               VLLM_CPU_KVCACHE_SPACE=os.environ.get("VLLM_CPU_KVCACHE_SPACE", "2"),
               RAYON_NUM_THREADS=os.environ.get("RAYON_NUM_THREADS", "1"))
    env.pop("LIBTRIE_VLLM_ROUTE", None)
    env.pop("LIBTRIE_SET_DIR", None)
    if mode in ("libtrie", "catalog"):
        env["LIBTRIE_VLLM_ROUTE"] = "1"
    elif mode != "stock":
        raise ValueError(f"mode {mode!r}: expected stock, libtrie or catalog")
    if registry:
        env["LIBTRIE_SET_DIR"] = os.path.dirname(os.path.abspath(registry))
        env.setdefault("LIBTRIE_MAX_INLINE_STRINGS", "100000")
    cmd = ["nice", "-n", os.environ.get("BFCL_NICE", "10"), _python(), "-m", "vllm.entrypoints.openai.api_server",
           "--model", model, "--host", "127.0.0.1", "--port", str(port), "--enforce-eager", "--seed", "0",
           "--max-model-len", os.environ.get("BFCL_CTX", "8192"), "--max-num-seqs", "1",
           "--enable-auto-tool-choice", "--tool-call-parser", os.environ.get("BFCL_VLLM_TOOL_PARSER", "hermes")]
    if os.environ.get("BFCL_VLLM_DTYPE"):  # e.g. float32: vLLM's CPU default is bfloat16, slow without AMX
        cmd += ["--dtype", os.environ["BFCL_VLLM_DTYPE"]]
    return cmd, env


def catalog_fields(registry_name):
    """The request fields that name the catalog's registry (vLLM: through vllm_xargs)."""
    return {"vllm_xargs": {"libtrie_registry": registry_name}}


def start(mode, registry, model):
    """Starts vLLM's server for `mode`; returns its base URL once /health answers (up to $BFCL_START_S, 600 s)."""
    port = free_port()
    cmd, env = command(mode, registry, _model(model), port)
    return _server.start(cmd, port, f"vllm-{mode}.log", timeout_s=float(os.environ.get("BFCL_START_S", "600")),
                         poll_s=1, env=env)


def stop():
    """Stops the server started by start() (SIGTERM, then SIGKILL after 30 s)."""
    _server.stop()
