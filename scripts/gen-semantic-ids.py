#!/usr/bin/env python3
"""A synthetic generative-retrieval set (issue 38, item 2): N distinct semantic ids, one per line, as recommender
and generative-retrieval systems (TIGER, STATIC) give their items: three levels of codes from a residual quantizer
(codebooks of 256 codes) and a fourth level that tells apart items whose first three codes collide, written
`<a_12><b_201><c_7><d_0>`.

The skew is realistic: the first-level code follows a Zipf law (exponent 1.1: a few coarse clusters hold many
items), the second and third are Zipf within their parent (exponent 0.8), so popular prefixes are deep and wide and
the tail is sparse; the fourth level counts collisions (0, 1, 2, ... per prefix), as TIGER does. Deterministic:
the same N and --seed give the same file byte for byte (Python's `random` with a fixed seed; standard library only).

  scripts/gen-semantic-ids.py 20000000 --seed 38 > .cache/data/semantic-ids-20m.txt
"""
import argparse
import bisect
import itertools
import random
import sys


def zipf_cdf(n, s):
    weights = [1.0 / (k ** s) for k in range(1, n + 1)]
    return list(itertools.accumulate(weights))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("n", type=int, help="how many distinct ids")
    ap.add_argument("--seed", type=int, default=38)
    ap.add_argument("--codebook", type=int, default=256)
    args = ap.parse_args()
    if args.n < 1 or args.codebook < 2:
        ap.error("n must be at least 1 and --codebook at least 2")
    rng = random.Random(args.seed)
    cb = args.codebook
    top = zipf_cdf(cb, 1.1)
    inner = zipf_cdf(cb, 0.8)
    # each parent maps its children's ranks through its own permutation of the codebook (an affine map with an odd
    # multiplier when the codebook is a power of two, else a shift), so the popular child differs from parent to
    # parent; derived from the parent by integer arithmetic only (no hash() of Python's that could change).
    pow2 = cb & (cb - 1) == 0

    def child(parent, cdf):
        r = min(bisect.bisect_left(cdf, rng.random() * cdf[-1]), cb - 1)
        h = (parent * 0x9E3779B1 + args.seed * 0x85EBCA77) & 0xFFFFFFFF
        h ^= h >> 15
        mult = (h | 1) % cb if pow2 else 1
        return (r * mult + (h >> 8)) % cb

    seen = {}
    out = sys.stdout
    buf = []
    for _ in range(args.n):
        a = bisect.bisect_left(top, rng.random() * top[-1])
        b = child(a + 1, inner)
        c = child(((a + 1) << 8 | b) + 1_000_000, inner)
        key = (a << 16) | (b << 8) | c
        d = seen.get(key, 0)
        seen[key] = d + 1
        buf.append(f"<a_{a}><b_{b}><c_{c}><d_{d}>\n")
        if len(buf) >= 65536:
            out.write("".join(buf))
            buf.clear()
    out.write("".join(buf))


if __name__ == "__main__":
    main()
