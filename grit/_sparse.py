"""§3.8 / §7.4: N:M sparsity metadata, vectorised."""
from __future__ import annotations

import numpy as np

__all__ = ["meta_indices", "first_disordered_quad"]


def meta_indices(buf, n: int, bits: int, nquads: int) -> np.ndarray:
    """The (nquads, n) survivor indices: quad q's slot j occupies bits
    [(q*n + j)*bits, +bits) of the plane, LSB-first within each byte."""
    raw = np.frombuffer(buf, dtype=np.uint8)
    per = 8 // bits
    count = nquads * n
    if raw.size * per < count:
        raise ValueError("metadata plane too short")
    shifts = np.arange(0, 8, bits, dtype=np.uint8)
    vals = (raw[: (count + per - 1) // per, None] >> shifts) & np.uint8((1 << bits) - 1)
    return vals.reshape(-1)[:count].reshape(nquads, n)


def first_disordered_quad(buf, n: int, m: int, bits: int, nquads: int):
    """None when every quad's indices are strictly increasing and < m, else
    (quad index, its indices) of the first quad that is not."""
    if nquads == 0:
        return None
    idx = meta_indices(buf, n, bits, nquads)
    ok = (idx < m).all(axis=1)
    if n > 1:
        ok &= (np.diff(idx.astype(np.int16), axis=1) > 0).all(axis=1)
    bad = np.flatnonzero(~ok)
    if bad.size == 0:
        return None
    q = int(bad[0])
    return q, tuple(int(v) for v in idx[q])
