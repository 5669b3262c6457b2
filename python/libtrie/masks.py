"""Applying masks to logits: bitmask rows (the layout libtrie fills) or sparse lists of allowed ids.

torch is imported on first use, so the package imports without it; xgrammar's kernel is used when installed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Dict, Optional, Sequence

if TYPE_CHECKING:
    import torch

__all__ = ["apply_bitmask", "apply_sparse", "bit"]

_SHIFTS: Dict[Any, "torch.Tensor"] = {}


def bit(i: int) -> int:
    """Bit ``i`` of an int32 word as a Python int that fits int32 (bit 31 is negative)."""
    return -(1 << 31) if i == 31 else 1 << i


def _apply_bitmask_torch(logits: "torch.Tensor", bitmask: "torch.Tensor", indices: Sequence[int]) -> None:
    """``logits[indices[i], t] = -inf`` where bit ``t`` of row ``i`` is 0 (plain torch; any device)."""
    import torch

    n, vocab = len(indices), logits.shape[-1]
    shifts = _SHIFTS.get(bitmask.device)
    if shifts is None:
        shifts = _SHIFTS[bitmask.device] = torch.arange(32, dtype=torch.int32, device=bitmask.device)
    bits = (bitmask[:n].unsqueeze(-1) >> shifts) & 1  # [n, W, 32]
    allowed = bits.reshape(n, -1)[:, :vocab].to(torch.bool)
    if allowed.shape[1] < vocab:  # a row narrower than the logits: the ids past it are not allowed
        allowed = torch.nn.functional.pad(allowed, (0, vocab - allowed.shape[1]), value=False)
    rows = torch.as_tensor(list(indices), dtype=torch.long, device=logits.device)
    sub = logits.index_select(0, rows)
    sub.masked_fill_(~allowed.to(logits.device), float("-inf"))
    logits.index_copy_(0, rows, sub)


def _xgrammar_kernel() -> Optional[Callable[..., None]]:
    try:
        import xgrammar

        kernel: Callable[..., None] = xgrammar.apply_token_bitmask_inplace
        return kernel
    except Exception:
        return None


def apply_bitmask(logits: "torch.Tensor", bitmask: "torch.Tensor", indices: Sequence[int],
                  use_xgrammar: bool = True) -> None:
    """Set ``logits[indices[i], t]`` to ``-inf`` where bit ``t`` of ``bitmask[i]`` is 0 (the shared layout), in place.
    Uses xgrammar's kernel when available (what vLLM's structured outputs use), plain torch otherwise."""
    if not indices:
        return
    import torch

    kernel = _xgrammar_kernel() if use_xgrammar else None
    if (kernel is not None and logits.dtype in (torch.float32, torch.float16, torch.bfloat16)
            and logits.shape[-1] <= bitmask.shape[-1] * 32):
        rows = bitmask[: len(indices)]
        if rows.device != logits.device:
            rows = rows.to(logits.device, non_blocking=True)
        if len(indices) == logits.shape[0] and list(indices) == list(range(len(indices))):
            kernel(logits, rows)
        else:
            # xgrammar indexes bitmask rows by the logits row: scatter the rows into a full-batch mask.
            full = torch.full((logits.shape[0], rows.shape[1]), -1, dtype=torch.int32, device=logits.device)
            full[torch.as_tensor(list(indices), dtype=torch.long, device=logits.device)] = rows
            kernel(logits, full, indices=list(indices))
        return
    _apply_bitmask_torch(logits, bitmask, indices)


def apply_sparse(logits: "torch.Tensor", indices: Sequence[int], allowed: Sequence[memoryview],
                 extra: Sequence[Any]) -> None:
    """Mask rows by keeping only their allowed entries: save them, fill the rows with -inf, put them back. Costs
    O(rows x V) for the fill (a memset) plus O(allowed), against a bit test per logit for a bitmask kernel: the
    faster path when few tokens are allowed, which is the usual case deep in a trie."""
    import numpy as np
    import torch

    parts, counts = [], []
    for v, e in zip(allowed, extra):  # per row: its allowed ids, then its extra stop ids
        parts.append(np.frombuffer(v, dtype=np.int32))
        if e:
            parts.append(np.fromiter(e, dtype=np.int32, count=len(e)))
        counts.append(len(v) + len(e))
    cols = np.concatenate(parts)
    row_ids = np.repeat(np.asarray(indices, dtype=np.int64), counts)
    device = logits.device
    r = torch.from_numpy(row_ids).to(device, non_blocking=True)
    c = torch.from_numpy(cols.astype(np.int64)).to(device, non_blocking=True)
    keep = logits[r, c]
    start = 0  # fill runs of consecutive rows as slices (a plain memset; index_fill_ is several times slower)
    for k in range(1, len(indices) + 1):
        if k == len(indices) or indices[k] != indices[k - 1] + 1:
            logits[indices[start]:indices[k - 1] + 1].fill_(float("-inf"))
            start = k
    logits[r, c] = keep
