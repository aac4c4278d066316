"""Dense lower-triangular strategies from ``.npy`` files: checked before any work.

The file is opened memory-mapped, so its shape and dtype are checked before the matrix is read;
then every entry is checked (finite, >= 0, zero above the diagonal). A matrix is identified by
the SHA-256 of its float64 bytes (row-major), so two files with the same matrix are the same
strategy and a changed file is a different one.
"""

from __future__ import annotations

import functools
import hashlib
import os

import numpy as np

#: Largest n of a dense strategy (an n x n float64 matrix is 8 n² bytes: 800 MB at n = 10^4).
MAX_DENSE_ITERATIONS = 10_000


def load_dense(path: str) -> tuple[np.ndarray, str]:
    """(C, sha256) of the validated matrix in ``path``; ValueError naming the problem otherwise."""
    stat = _stat(path)
    return _load(path, stat.st_size, stat.st_mtime_ns)


def _stat(path: str) -> os.stat_result:
    try:
        return os.stat(path)
    except OSError as err:
        raise ValueError(f"strategy matrix file not readable: path={path!r} ({err.strerror})") from None


@functools.lru_cache(maxsize=4)
def _load(path: str, size: int, mtime_ns: int) -> tuple[np.ndarray, str]:
    """Cached on (path, size, mtime): a rewritten file is read again."""
    if not str(path).endswith(".npy"):
        raise ValueError(f"strategy matrix must be a .npy file, got path={path!r}")
    try:
        head = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError) as err:
        raise ValueError(f"strategy matrix file is not a readable .npy array: path={path!r} ({err})") from None
    if head.ndim != 2 or head.shape[0] != head.shape[1]:
        raise ValueError(f"strategy matrix must be square (n x n), got shape={head.shape} in {path!r}")
    n = head.shape[0]
    if n == 0:
        raise ValueError(f"strategy matrix is empty in {path!r}")
    if n > MAX_DENSE_ITERATIONS:
        raise ValueError(f"strategy matrix is {n} x {n}, larger than the limit {MAX_DENSE_ITERATIONS} x "
                         f"{MAX_DENSE_ITERATIONS} for a dense strategy (path={path!r}); give a banded Toeplitz "
                         "strategy by its c_col instead")
    if head.dtype.kind not in "fiu":
        raise ValueError(f"strategy matrix must hold real numbers, got dtype={head.dtype} in {path!r}")
    matrix = np.array(head, dtype=np.float64)
    if not np.all(np.isfinite(matrix)):
        r, c = np.argwhere(~np.isfinite(matrix))[0]
        raise ValueError(f"strategy matrix entries must be finite, got C[{r},{c}]={matrix[r, c]} in {path!r}")
    if np.any(matrix < 0):
        r, c = np.argwhere(matrix < 0)[0]
        raise ValueError(f"strategy matrix entries must be >= 0 (the dominating pair needs C >= 0), got "
                         f"C[{r},{c}]={matrix[r, c]} in {path!r}")
    upper = np.triu(matrix, 1)
    if np.any(upper != 0):
        r, c = np.argwhere(upper != 0)[0]
        raise ValueError(f"strategy matrix must be lower-triangular, got C[{r},{c}]={matrix[r, c]} above the "
                         f"diagonal in {path!r}")
    if not np.any(matrix > 0):
        raise ValueError(f"strategy matrix must have a positive entry, got all zeros in {path!r}")
    matrix.setflags(write=False)
    return matrix, hashlib.sha256(np.ascontiguousarray(matrix).tobytes()).hexdigest()


def dense_modes(matrix: np.ndarray, cycle_length: int) -> np.ndarray:
    """The n x b matrix of modes m_j = C x_j = Σ_{t ≡ j (mod b), t < n} C[:, t]."""
    n = matrix.shape[0]
    b = cycle_length
    k = -(-n // b)
    padded = np.zeros((n, k * b))
    padded[:, :n] = matrix
    return padded.reshape(n, k, b).sum(axis=1)
