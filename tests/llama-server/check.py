#!/usr/bin/env python3
"""Checks a running llama-server built with libtrie (started by tests/llama-server/run.sh). Standard library only.

Prints one line per check and "N passed, M failed" last; exit status 1 when a check failed.
"""
import argparse
import concurrent.futures as cf
import json
import os
import re
import sys
import time
import urllib.error
import urllib.request

TIMEOUT = 300  # seconds per request (2 shared cores)

passed = 0
failed = 0


def check(ok, what, detail=""):
    global passed, failed
    if ok:
        passed += 1
        print(f"ok   {what}")
    else:
        failed += 1
        print(f"FAIL {what}" + (f": {detail}" if detail else ""))
    sys.stdout.flush()
    return ok


def post(url, body, timeout=TIMEOUT):
    """(status, parsed json or text, seconds)"""
    data = json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    t = time.monotonic()
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            raw = r.read()
            status = r.status
    except urllib.error.HTTPError as e:
        raw = e.read()
        status = e.code
    dt = time.monotonic() - t
    try:
        return status, json.loads(raw), dt
    except ValueError:
        return status, raw.decode("utf-8", "replace"), dt


def get(url, timeout=10):
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError as e:
        return 0, str(e)


SYSTEM = "Answer with exactly one of the allowed names."


def chatml(user):
    # SmolLM2-Instruct's chat template (ChatML), for /completion
    return (f"<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\n{user}<|im_end|>\n"
            "<|im_start|>assistant\n")


class Server:
    def __init__(self, url):
        self.url = url

    def completion(self, prompt, trie=None, n_predict=48, temperature=0.0, seed=1, extra=None):
        body = {"prompt": chatml(prompt), "n_predict": n_predict, "temperature": temperature, "seed": seed,
                "cache_prompt": False}
        if trie is not None:
            body["trie"] = trie
        body.update(extra or {})
        status, res, dt = post(self.url + "/completion", body)
        if status != 200 or not isinstance(res, dict):
            return status, res, None, dt
        return status, res.get("content"), res.get("stop_type"), dt

    def chat(self, prompt, trie=None, max_tokens=48, temperature=0.0, seed=1, extra=None):
        body = {"messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}],
                "max_tokens": max_tokens, "temperature": temperature, "seed": seed, "cache_prompt": False}
        if trie is not None:
            body["trie"] = trie
        body.update(extra or {})
        status, res, dt = post(self.url + "/v1/chat/completions", body)
        if status != 200 or not isinstance(res, dict):
            return status, res, None, dt
        ch = res["choices"][0]
        return status, ch["message"].get("content"), ch.get("finish_reason"), dt


def read_tsv(path):
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if line:
                p, _, gold = line.partition("\t")
                out.append((p, gold))
    return out


def read_set(path):
    with open(path, encoding="utf-8") as f:
        data = f.read()
    if data.endswith("\n"):
        data = data[:-1]
    return set(data.split("\n"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--server-log", required=True)
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--repo", required=True)
    ap.add_argument("--sets", required=True)
    args = ap.parse_args()
    srv = Server(args.url)

    # ---- wait for the model (bounded) --------------------------------------------------------------------------
    t0 = time.monotonic()
    while True:
        status, body = get(args.url + "/health", timeout=5)
        if status == 200:
            break
        try:
            os.kill(args.pid, 0)
        except OSError:
            check(False, "server starts", "the server exited; see its log")
            return finish()
        if time.monotonic() - t0 > 180:
            check(False, "server starts within 180 s", body)
            return finish()
        time.sleep(0.5)
    check(True, f"server healthy after {time.monotonic() - t0:.1f} s")

    tools = read_set(os.path.join(args.sets, "tools10k.txt"))
    cities = read_set(os.path.join(args.sets, "sub", "cities.txt"))
    tool_prompts = read_tsv(os.path.join(args.repo, "data", "tools-prompts.tsv"))
    city_prompts = read_tsv(os.path.join(args.repo, "data", "cities-prompts.tsv"))
    check(len(tools) == 10000 and len(cities) > 50, f"sets: {len(tools)} tools, {len(cities)} cities")

    # ---- unconstrained references, each prompt alone -----------------------------------------------------------
    free_prompts = [("completion", tool_prompts[0][0]), ("completion", city_prompts[1][0]),
                    ("chat", tool_prompts[2][0]), ("chat", city_prompts[0][0])]

    def free(kind, prompt):
        if kind == "completion":
            return srv.completion(prompt, n_predict=32)
        return srv.chat(prompt, max_tokens=32)

    refs = {}
    t_alone = time.monotonic()
    for kind, prompt in free_prompts:
        status, text, _, _ = free(kind, prompt)
        check(status == 200 and isinstance(text, str), f"unconstrained {kind} alone", f"{status} {text!r:.300}")
        refs[(kind, prompt)] = text
    t_alone = time.monotonic() - t_alone

    # ---- concurrent: constrained (several sets, both endpoints, greedy and sampled) and unconstrained -----------
    jobs = []
    for i, (p, _) in enumerate(tool_prompts):
        if i % 2 == 0:
            jobs.append(("tools", "completion", p, {"set": "tools10k"}, 0.0))
        else:
            jobs.append(("tools", "chat", p, {"file": "tools10k.txt"}, 0.0))
    for i, (p, _) in enumerate(city_prompts):
        jobs.append(("cities", "chat" if i % 2 == 0 else "completion", p, {"file": "sub/cities.txt"},
                     0.0 if i < 6 else 0.9))
    jobs.append(("tools", "completion", tool_prompts[3][0], "tools10k", 0.9))  # short form, sampled
    inline_a = ["alpha", "beta", "gamma", "delta"]
    inline_b = ["日本語", "한국어", "Ελληνικά", "עברית", "हिन्दी", "Ça va"]
    jobs.append(("inline_a", "completion", "Pick a Greek letter.", {"strings": inline_a}, 0.0))
    jobs.append(("inline_b", "chat", "Which language is spoken in Seoul?", inline_b, 0.0))  # short form: a list
    for kind, prompt in free_prompts:
        jobs.append(("free", kind, prompt, None, 0.0))
    members = {"tools": tools, "cities": cities, "inline_a": set(inline_a), "inline_b": set(inline_b)}

    def run(job):
        name, kind, prompt, trie, temp = job
        if name == "free":
            return job, free(kind, prompt)
        if kind == "completion":
            return job, srv.completion(prompt, trie=trie, temperature=temp, seed=7)
        return job, srv.chat(prompt, trie=trie, temperature=temp, seed=7)

    t_conc = time.monotonic()
    with cf.ThreadPoolExecutor(max_workers=len(jobs)) as ex:
        results = list(ex.map(run, jobs))
    t_conc = time.monotonic() - t_conc
    n_constrained = 0
    for (name, kind, prompt, trie, temp), (status, text, stop, dt) in results:
        if name == "free":
            check(status == 200 and text == refs[(kind, prompt)], f"unconstrained {kind} unchanged under load",
                  f"{status} {text!r:.200} != alone {refs[(kind, prompt)]!r:.200}")
            continue
        n_constrained += 1
        ok = status == 200 and text in members[name] and stop in ("eos", "stop")
        check(ok, f"{name} member via {kind} (t={temp}): {text!r}", f"{status} {text!r:.300} stop={stop}")
    print(f"# {len(jobs)} concurrent requests ({n_constrained} constrained) in {t_conc:.1f} s; "
          f"{len(free_prompts)} unconstrained alone in {t_alone:.1f} s")

    # ---- bad sets: HTTP 400 with the reason, on both endpoints -------------------------------------------------
    big_inline = [f"s{i}" for i in range(1001)]
    bad = [
        ({"set": "nope"}, "does not exist"),
        ({"file": "/etc/passwd"}, "absolute paths are not allowed"),
        ({"file": "../outside/secret.txt"}, "'..' is not allowed"),
        ({"file": "sub/../../outside/secret.txt"}, "'..' is not allowed"),
        ({"file": "escape.txt"}, "outside the set directory"),
        ({"file": "adir.txt"}, "not a regular file"),
        ({"set": "big"}, "more than this server reads"),
        ({"set": "notutf8"}, "not valid UTF-8"),
        ({"set": "empty"}, "is empty"),
        ({"set": "huge"}, "limit exceeded"),
        ({"set": "sub/cities"}, "plain set name"),
        ({"strings": big_inline}, "more than this server accepts"),
        ({"strings": []}, "is empty"),
        ({"strings": ["a", 3]}, "list of strings"),
        ({"strings": ["a"], "bogus": 1}, "unknown key"),
        ({"set": "tools10k", "file": "tools10k.txt"}, "exactly one of"),
        (42, "must be"),
    ]
    for i, (trie, reason) in enumerate(bad):
        kind = "completion" if i % 2 == 0 else "chat"
        status, res, _, dt = (srv.completion if kind == "completion" else srv.chat)("Hi", trie=trie)
        msg = res.get("error", {}).get("message", "") if isinstance(res, dict) else str(res)
        check(status == 400 and reason.lower() in msg.lower(),
              f"bad set {json.dumps(trie)[:50]} -> 400 ({kind}): {msg[:160]}", f"{status} {msg!r:.300}")
    # a set with a grammar
    status, res, _, _ = srv.completion("Hi", trie={"set": "tools10k"}, extra={"grammar": 'root ::= "a"'})
    msg = res.get("error", {}).get("message", "") if isinstance(res, dict) else str(res)
    check(status == 400 and "cannot be combined" in msg, "trie + grammar -> 400", f"{status} {msg!r:.300}")
    status, res, _, _ = srv.chat("Hi", trie={"set": "tools10k"}, extra={"ignore_eos": True})
    msg = res.get("error", {}).get("message", "") if isinstance(res, dict) else str(res)
    check(status == 400 and "ignore_eos" in msg, "trie + ignore_eos -> 400", f"{status} {msg!r:.300}")
    # a failing set is remembered, not compiled again: asked twice, same answer
    status, res, _, _ = srv.chat("Hi", trie={"set": "huge"})
    check(status == 400, "bad set asked again -> 400", f"{status}")

    # ---- the server survives: health, a constrained and an unconstrained request ------------------------------
    status, _ = get(args.url + "/health")
    check(status == 200, "server healthy after the bad sets")
    status, text, stop, _ = srv.completion(tool_prompts[1][0], trie={"set": "tools10k"})
    check(status == 200 and text in tools, f"constrained request after the bad sets: {text!r}", f"{status} {text!r:.200}")
    kind, prompt = free_prompts[0]
    status, text, _, _ = free(kind, prompt)
    check(status == 200 and text == refs[(kind, prompt)], "unconstrained request after the bad sets unchanged",
          f"{text!r:.200}")

    # ---- each set compiled once (LRU shared by all slots) -------------------------------------------------------
    with open(args.server_log, encoding="utf-8", errors="replace") as f:
        log = f.read()
    n_tools = len(re.findall(r"libtrie: compiled the set 'tools10k'|libtrie: compiled the set file 'tools10k.txt'", log))
    n_cities = len(re.findall(r"libtrie: compiled the set file 'sub/cities.txt'", log))
    n_vocab = len(re.findall(r"libtrie: vocabulary of \d+ tokens built", log))
    check(n_tools == 1, f"10,000-string set compiled once for {sum(1 for j in jobs if j[0] == 'tools') + 1} requests",
          f"{n_tools} compiles")
    check(n_cities == 1, "city set compiled once", f"{n_cities} compiles")
    check(n_vocab == 1, "vocabulary built once", f"{n_vocab}")
    m = re.search(r"libtrie: compiled the set[^\n]*'tools10k[^\n]*", log)
    if m:
        print("# " + m.group(0))
    return finish()


def finish():
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
