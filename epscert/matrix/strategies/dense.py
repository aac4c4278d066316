"""Dense lower-triangular strategies from ``.npy`` files: checked before any work.

The file is opened memory-mapped, so its shape and dtype are checked before the matrix is read;
then its entries are read in blocks of rows, each checked (finite, >= 0, zero above the diagonal)
before it is stored, with no full-size temporary: an all-zero 10^4 x 10^4 file, refused for having
no positive entry, took 17-23 s, 3.0-4.2 CPU s and 2.5 GB of peak memory with whole-matrix checks,
and takes 2.0 s, 0.33 CPU s and 147 MiB (131 MiB of it the interpreter with epscert) blockwise
(``python -m benchmarks.dense_load``, a shared 2-core machine). A matrix is identified by the
SHA-256 of its float64 bytes (row-major), so two files with the same matrix are the same strategy
and a changed file is a different one.
"""

from __future__ import annotations

import functools
import hashlib
import os

import numpy as np

#: Largest n of a dense strategy (an n x n float64 matrix is 8 n² bytes: 800 MB at n = 10^4).
MAX_DENSE_ITERATIONS = 10_000
#: The file's entries are read and checked in blocks of about this many bytes of float64 (whole rows).
READ_BLOCK_BYTES = 2**23


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
    fortran = bool(head.flags.f_contiguous and not head.flags.c_contiguous)
    dtype, offset = head.dtype, int(head.offset)
    del head  # the header only: the entries are read below with plain reads, one block at a time
    matrix = _read_checked(path, n, dtype, offset, fortran)
    matrix.setflags(write=False)
    return matrix, hashlib.sha256(matrix).hexdigest()  # C-contiguous float64: its bytes, row-major, no copy


def _read_checked(path: str, n: int, dtype: np.dtype, offset: int, fortran: bool) -> np.ndarray:
    """The n x n matrix of the file as float64, each block of rows (columns for a Fortran-ordered file) read,
    converted and checked before it is stored, so that a refused file costs blocks of READ_BLOCK_BYTES, never
    a full-size temporary: the result is allocated (``np.zeros``) at the first block with a nonzero entry and
    all-zero blocks are not written (-0.0 is stored as 0.0), so an all-zero matrix is refused having held
    only its blocks. The entries checked are the entries stored (a file changed during the read cannot slip
    an unchecked value in).
    """
    out = None
    per = max(1, READ_BLOCK_BYTES // (8 * n))
    width = n * dtype.itemsize
    with open(path, "rb") as handle:
        handle.seek(offset)
        for start in range(0, n, per):
            stop = min(n, start + per)
            raw = handle.read((stop - start) * width)
            if len(raw) != (stop - start) * width:
                raise ValueError(f"strategy matrix file is truncated: path={path!r}")
            block = np.frombuffer(raw, dtype=dtype).astype(np.float64, copy=False).reshape(stop - start, n)
            if not block.any():  # all zero (NaN counts as nonzero): finite, >= 0, lower-triangular, not stored
                continue
            if fortran:  # the file holds columns start..stop-1, one after the other
                block, row0, col0 = block.T, 0, start
            else:
                row0, col0 = start, 0
            _check_block(block, row0, col0, path)
            if out is None:  # >= 0 checked: this block has a positive entry
                out = np.zeros((n, n))
            if fortran:
                out[:, start:stop] = block
            else:
                out[start:stop] = block
    if out is None:
        raise ValueError(f"strategy matrix must have a positive entry, got all zeros in {path!r}")
    return out


def _check_block(block: np.ndarray, row0: int, col0: int, path: str) -> None:
    """Finite, >= 0 and zero above the diagonal: the block's entry [a, c] is C[row0 + a, col0 + c]."""
    def where(mask):
        r, c = np.argwhere(mask)[0]
        return int(r) + row0, int(c) + col0, block[r, c]

    bad = ~np.isfinite(block)
    if bad.any():
        r, c, v = where(bad)
        raise ValueError(f"strategy matrix entries must be finite, got C[{r},{c}]={v} in {path!r}")
    bad = block < 0
    if bad.any():
        r, c, v = where(bad)
        raise ValueError(f"strategy matrix entries must be >= 0 (the dominating pair needs C >= 0), got "
                         f"C[{r},{c}]={v} in {path!r}")
    upper = np.triu(block, 1 + row0 - col0) != 0  # global column > global row
    if upper.any():
        r, c, v = where(upper)
        raise ValueError(f"strategy matrix must be lower-triangular, got C[{r},{c}]={v} above the "
                         f"diagonal in {path!r}")


def dense_modes(matrix: np.ndarray, cycle_length: int) -> np.ndarray:
    """The n x b matrix of modes m_j = C x_j = Σ_{t ≡ j (mod b), t < n} C[:, t]."""
    n = matrix.shape[0]
    b = cycle_length
    k = -(-n // b)
    padded = np.zeros((n, k * b))
    padded[:, :n] = matrix
    return padded.reshape(n, k, b).sum(axis=1)
