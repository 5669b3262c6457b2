"""One engine server process for bench/bfcl's engine adapters: started on a free port, ready once /health answers,
stopped with SIGTERM then SIGKILL. Its output goes to $BFCL_LOG_DIR (default <repo>/.cache/bfcl/logs)/<log_name>."""
import os
import socket
import subprocess
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Server:
    """One server at a time: start() stops the previous one."""

    def __init__(self, what, grace_s):
        self.what, self.grace_s = what, grace_s
        self.proc = None
        self.log = None

    def start(self, cmd, port, log_name, timeout_s, poll_s, env=None):
        """Runs `cmd` (listening on `port`); returns its base URL once /health answers 200 within `timeout_s`."""
        self.stop()
        logs = os.environ.get("BFCL_LOG_DIR", os.path.join(REPO, ".cache", "bfcl", "logs"))
        os.makedirs(logs, exist_ok=True)
        self.log = open(os.path.join(logs, log_name), "w")
        self.proc = subprocess.Popen(cmd, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.what} exited ({self.proc.returncode}); see {self.log.name}")
            try:
                with urllib.request.urlopen(url + "/health", timeout=2) as r:
                    if r.status == 200:
                        return url
            except Exception:
                pass
            time.sleep(poll_s)
        self.stop()
        raise RuntimeError(f"{self.what} did not become healthy within {timeout_s:.0f} s")

    def stop(self):
        """SIGTERM, then SIGKILL after the grace period."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(self.grace_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        if self.log is not None:
            self.log.close()
            self.log = None
