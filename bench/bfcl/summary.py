"""One cell's counts from its answer rows (run.py's summary lines, table.py's rows): the same columns for both."""
import statistics


def counts(rows):
    """Cases, answers that parse / name a tool of the set / pass BFCL's AST check, the retrieval's gold (catalog,
    deferred), searches (deferred), median prompt tokens, TTFT and tok/s of the answered cases, failures."""
    ok = [r for r in rows if r["status"] == 200]
    med = lambda xs: round(statistics.median(xs), 3) if xs else None  # noqa: E731
    mode = rows[0]["mode"] if rows else None
    return {"cases": len(rows), "answered": len(ok), "parse": sum(r["parse"] for r in rows),
            "names_in_set": sum(r["names_in_set"] for r in rows), "ast": sum(r["ast_valid"] for r in rows),
            "gold_in_candidates": sum(r.get("gold_in_candidates", False) for r in rows) if mode in (
                "catalog", "deferred") else None,
            "searched": sum(bool(r.get("searches")) for r in rows) if mode == "deferred" else None,
            "prompt_tokens": med([r["prompt_tokens"] for r in ok if r.get("prompt_tokens")]),
            "ttft_s": med([r["ttft_s"] for r in ok if r.get("ttft_s") is not None]),
            "tok_s": med([r["tok_s"] for r in ok if r.get("tok_s")]),
            "failures": sorted({f"{r['status']}: {r['error'][:120]}" for r in rows if r["status"] != 200})[:5],
            "n_failures": len(rows) - len(ok)}
