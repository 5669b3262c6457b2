# Helpers for scripts that run llama-server in the background (tests/llama-server/run.sh,
# scripts/bench-llama-server.sh). Sourced, never run: `source "$REPO/scripts/llama-server-lib.sh"`.
#
#   free_port            prints a free TCP port on 127.0.0.1
#   stop_server PID      stops the process PID if it is running: SIGTERM, up to 5 s to exit, then SIGKILL
#                        (an empty PID or one that already exited is fine; call it from the EXIT trap)

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

stop_server() {
  local pid="${1:-}"
  if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
}
