#!/usr/bin/env python3
"""Independent membership check of trie-llama's --out file.

    check.py CHOICES OUT MODE EXPECTED_COUNT

CHOICES: one string per line (the exact bytes); OUT: lines 'mode<TAB>index<TAB>output' with \\ \t \n \r
escaped. Exits 0 when OUT holds EXPECTED_COUNT outputs for MODE and every one is a member (byte-exact).
"""
import sys


def unescape(s: bytes) -> bytes:
    out = bytearray()
    i = 0
    while i < len(s):
        c = s[i]
        if c == 0x5C and i + 1 < len(s):  # backslash
            n = s[i + 1]
            out += {0x5C: b"\\", 0x74: b"\t", 0x6E: b"\n", 0x72: b"\r"}.get(n, bytes([0x5C, n]))
            i += 2
        else:
            out.append(c)
            i += 1
    return bytes(out)


def main() -> int:
    choices_path, out_path, mode, expected = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    with open(choices_path, "rb") as f:
        members = {l.rstrip(b"\n").rstrip(b"\r") for l in f}
    members.discard(b"")
    outputs = []
    with open(out_path, "rb") as f:
        for line in f:
            m, idx, text = line.rstrip(b"\n").split(b"\t", 2)
            if m.decode() == mode:
                outputs.append((int(idx), unescape(text)))
    bad = [(i, o) for i, o in outputs if o not in members]
    for i, o in bad:
        print(f"    not a member: #{i} {o!r}")
    if len(outputs) != expected:
        print(f"    expected {expected} {mode} outputs, found {len(outputs)}")
        return 1
    print(f"    check.py: {len(outputs) - len(bad)}/{len(outputs)} {mode} outputs are members of {choices_path}")
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main())
