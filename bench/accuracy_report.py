#!/usr/bin/env python3
"""Markdown tables (stdout) and a plot from docs/bench/accuracy.jsonl (scripts/bench-accuracy.sh).

usage: accuracy_report.py [JSONL] [--plot PNG]     (the plot needs matplotlib: .cache/plot-venv)
"""
import argparse
import json

TASK_ORDER = ["topic", "icd-chapter", "country", "icd-category"]


def label(r):
    m = r["mode"]
    if m == "beam":
        w = r["variant"].replace("canonical-", "").replace("labels-", "").replace("beam", "")
        m = f"beam W={w}"
    if r.get("canonical"):
        m += ", canonical"
    if r["variant"].startswith("labels-"):
        m += ", labels in prompt"
    return m


def rows(path):
    out, seen = [], set()
    for line in open(path, encoding="utf-8"):
        r = json.loads(line)
        key = (r["model"], r["task"], label(r))
        if key in seen:
            continue
        seen.add(key)
        out.append(r)
    return out


def order(r):
    t = TASK_ORDER.index(r["task"]) if r["task"] in TASK_ORDER else 99
    return (r["model"], t)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("jsonl", nargs="?", default="docs/bench/accuracy.jsonl")
    ap.add_argument("--plot")
    a = ap.parse_args()
    rs = rows(a.jsonl)
    groups = {}
    for r in rs:
        groups.setdefault((r["model"], r["task"]), []).append(r)
    for (model, task), g in sorted(groups.items(), key=lambda kv: (kv[0][0] != "smollm2",) + order(kv[1][0])):
        print(f"### {task}, {model} (K = {g[0]['k']:,}, n = {g[0]['n']})\n")
        print("| mode | valid | accuracy | compile ms | stage per token | decode t/s |")
        print("|---|---:|---:|---:|---:|---:|")
        for r in g:
            if r["skipped"]:
                print(f"| {label(r)} | – | – | – | skipped (K > {300}) | – |")
                continue
            st = "–" if r["mode"] == "unconstrained" else (
                f"{r['stage_us_per_token'] / 1000:.1f} ms" if r["stage_us_per_token"] >= 1000
                else f"{r['stage_us_per_token']:.1f} µs")
            comp = "–" if r["mode"] == "unconstrained" else f"{r['vocab_ms'] + r['compile_ms']:.1f}"
            print(f"| {label(r)} | {100 * r['validity']:.0f} % | {100 * r['accuracy']:.0f} % | {comp} | {st} | "
                  f"{r['decode_tok_per_s']:.0f} |")
        print()
    if a.plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        models = sorted({m for m, _ in groups}, key=lambda m: (m != "smollm2", m))
        fig, axes = plt.subplots(1, len(models), figsize=(6.5 * len(models), 4.2), squeeze=False)
        modes = ["unconstrained", "trie", "gbnf", "beam W=4", "beam W=16", "trie, canonical", "beam W=4, canonical",
                 "unconstrained, labels in prompt", "trie, labels in prompt", "beam W=4, labels in prompt"]
        colors = ["#999999", "#1f77b4", "#ff7f0e", "#2ca02c", "#006400", "#9ecae1", "#98df8a",
                  "#dddddd", "#9467bd", "#e377c2"]
        present = {label(r) for g in groups.values() for r in g}
        keep = [i for i, m in enumerate(modes) if m in present]
        modes, colors = [modes[i] for i in keep], [colors[i] for i in keep]
        for ax, model in zip(axes[0], models):
            tasks = [t for t in TASK_ORDER if (model, t) in groups]
            width = 0.8 / len(modes)
            for i, (m, c) in enumerate(zip(modes, colors)):
                ys = []
                for t in tasks:
                    r = next((r for r in groups[(model, t)] if label(r) == m and not r["skipped"]), None)
                    ys.append(100 * r["accuracy"] if r else 0)
                xs = [j + (i - len(modes) / 2 + 0.5) * width for j in range(len(tasks))]
                ax.bar(xs, ys, width, label=m, color=c)
            ax.set_xticks(range(len(tasks)))
            ax.set_xticklabels([f"{t}\nK={groups[(model, t)][0]['k']:,}" for t in tasks])
            ax.set_ylabel("accuracy (%)")
            ax.set_title(model)
            ax.set_ylim(0, 100)
            ax.grid(axis="y", alpha=0.3)
        axes[0][0].legend(fontsize=8, loc="upper right")
        fig.tight_layout()
        fig.savefig(a.plot, dpi=110)


if __name__ == "__main__":
    main()
