"""Range data blocks walked for all their entries at once (numpy): a 128-bit fingerprint of each entry's address
and address type, without building a Python object per entry (pure).

An incremental run compares the ranges that died with those that appeared: with changes at random paths that is
most of the lake's entries (an entry removed early in a range shifts every data block after it), to find the few
hundred that changed. ``sstable._block_addresses`` walks one entry at a time in Python (about 1 µs each); here
the walk advances one entry of every block per step, as arrays, so a step costs the same for 1 block or 30,000.

The walk accepts only the shape ``sstable._block_addresses``'s fast loop accepts (one-byte key lengths, a one- or
two-byte value length, a 32-byte identity, the Entry fields in Go's marshalling order with one-byte lengths,
ending exactly where the value ends), and ASCII addresses. A block with any other entry is reported ``irregular``, none of its entries
kept: the caller decodes it with the careful decoder, which accepts every valid encoding or names what is wrong.

A fingerprint is two independent 64-bit hashes of (address bytes, address length, address type). Entries with
one fingerprint are taken to have one address and type: two different ones would have to agree on 128 bits.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_PAD = 192  # zero bytes after the last block: every read of a well-formed entry stays inside the buffer
_U64 = np.uint64
_M1, _M2 = _U64(0x9E3779B97F4A7C15), _U64(0xC2B2AE3D27D4EB4F)
_S1, _S2 = _U64(0x243F6A8885A308D3), _U64(0x13198A2E03707344)
_SHIFT1, _SHIFT2 = _U64(29), _U64(32)
_HIGH = _U64(0x8080808080808080)


@dataclass(frozen=True)
class Scan:
    fp1: np.ndarray  # uint64, one per entry of the regular blocks
    fp2: np.ndarray  # uint64
    block: np.ndarray  # int64: the block's position in the list given
    entry: np.ndarray  # int64: the entry's position in its block
    irregular: tuple[int, ...]  # blocks not walked here (decode them one entry at a time)


def scan(blocks: list[bytes]) -> Scan:
    """Every entry of every block (decompressed data blocks of range files)."""
    count = len(blocks)
    lengths = np.array([len(b) for b in blocks], np.int64)
    starts = np.zeros(count, np.int64)
    if count > 1:
        np.cumsum(lengths[:-1], out=starts[1:])
    joined = b"".join(blocks) + bytes(_PAD)
    buf = np.frombuffer(joined, np.uint8)
    size = len(buf)
    # every 8 bytes from any offset, as one little-endian word (an unaligned view, no copy)
    words = np.ndarray((size - 7,), dtype="<u8", buffer=joined, strides=(1,))

    def at(idx: np.ndarray) -> np.ndarray:
        return buf[np.minimum(idx, size - 1)].astype(np.int64)

    ends = starts + lengths
    restarts = at(ends - 4) | (at(ends - 3) << 8) | (at(ends - 2) << 16) | (at(ends - 1) << 24)
    stop = ends - 4 - 4 * restarts
    bad = (lengths < 4) | (stop < starts) | ((restarts == 0) & (lengths > 4))
    chain = np.flatnonzero(~bad & (starts < stop))
    pos = starts[chain]
    parts: list[tuple[np.ndarray, ...]] = []
    ordinal = 0
    while chain.size:
        p = pos
        u, x, y = at(p + 1), at(p + 2), at(p + 3)
        ok = (at(p) < 0x80) & (u < 0x80) & (u >= 8)
        two = x >= 0x80
        ok &= ~two | (y < 0x80)
        q = p + np.where(two, 4, 3) + u
        nxt = q + np.where(two, (x & 0x7F) | (y << 7), x)
        ok &= at(q) == 0x40  # zigzag 32: the identity
        x, y = at(q + 33), at(q + 34)
        two = x >= 0x80
        ok &= ~two | (y < 0x80)
        data = np.where(two, (x & 0x7F) | (y << 7), x)
        q = q + np.where(two, 35, 34)
        ok &= ((data & 1) == 0) & (q + (data >> 1) == nxt) & (at(q) == 0x0A)
        n = at(q + 1)  # 1: address
        ok &= (n > 0) & (n < 0x80)
        a = q + 2
        q = a + n
        q, ok = _field(q, nxt, ok, at, 0x12)  # 2: last_modified
        m = (q < nxt) & (at(q) == 0x18)  # 3: size, a varint
        q = np.where(m, q + 1, q)
        for _ in range(10):
            q = np.where(m & (at(q) >= 0x80), q + 1, q)
        ok &= ~m | (at(q) < 0x80)
        q = np.where(m, q + 1, q)
        q, ok = _field(q, nxt, ok, at, 0x22)  # 4: e_tag
        while True:  # 5: metadata entries
            m = (q < nxt) & (at(q) == 0x2A) & (at(q + 1) < 0x80)
            if not m.any():
                break
            q = np.where(m, q + 2 + at(q + 1), q)
        m = (q < nxt) & (at(q) == 0x30)  # 6: address_type
        kind = np.where(m, at(q + 1), 0)
        ok &= ~m | (kind < 0x80)
        q = np.where(m, q + 2, q)
        q, ok = _field(q, nxt, ok, at, 0x3A)  # 7: content_type
        ok &= (q == nxt) & (nxt <= stop[chain])
        bad[chain[~ok]] = True
        keep = ok
        if keep.any():
            fp1, fp2, ascii_ = _fingerprints(words, a[keep], n[keep], kind[keep])
            bad[chain[keep][~ascii_]] = True  # other text: the careful decoder checks it is UTF-8
            parts.append((fp1, fp2, chain[keep], np.full(int(keep.sum()), ordinal, np.int64)))
        pos = nxt[keep]
        chain = chain[keep]
        going = pos < stop[chain]
        chain, pos = chain[going], pos[going]
        ordinal += 1
    if parts:
        fp1, fp2, block, entry = (np.concatenate(c) for c in zip(*parts, strict=True))
        good = ~bad[block]
        fp1, fp2, block, entry = fp1[good], fp2[good], block[good], entry[good]
    else:
        fp1 = fp2 = np.zeros(0, _U64)
        block = entry = np.zeros(0, np.int64)
    return Scan(fp1, fp2, block, entry, tuple(int(i) for i in np.flatnonzero(bad)))


def _field(q: np.ndarray, nxt: np.ndarray, ok: np.ndarray, at, tag: int) -> tuple[np.ndarray, np.ndarray]:
    """Skip an optional length-delimited field with a one-byte length."""
    m = (q < nxt) & (at(q) == tag)
    length = at(q + 1)
    return np.where(m, q + 2 + length, q), ok & (~m | (length < 0x80))


def _fingerprints(words: np.ndarray, start: np.ndarray, length: np.ndarray, kind: np.ndarray) \
        -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Both hashes of each address, and whether it is ASCII."""
    ln = length.astype(_U64)
    h1 = (ln | (kind.astype(_U64) << _U64(8))) * _M1 ^ _S1
    h2 = (ln | (kind.astype(_U64) << _U64(8))) * _M2 ^ _S2
    last = len(words) - 1
    high = np.zeros(len(start), _U64)
    for k in range(int((length.max() + 7) // 8)):
        left = np.clip(length - 8 * k, 0, 8)
        mask = np.where(left >= 8, ~_U64(0), (_U64(1) << (left.astype(_U64) * _U64(8))) - _U64(1))
        w = words[np.minimum(start + 8 * k, last)] & mask
        high |= w & _HIGH
        h1 = (h1 ^ w) * _M1
        h1 ^= h1 >> _SHIFT1
        h2 = (h2 ^ w) * _M2
        h2 ^= h2 >> _SHIFT2
    return h1, h2, high == 0


def fingerprint(address: bytes, kind: int) -> tuple[int, int]:
    """The fingerprint ``scan`` gives an entry with this address and type (for tests and checks)."""
    raw = address + bytes(8)
    out = _fingerprints(np.ndarray((len(raw) - 7,), dtype="<u8", buffer=raw, strides=(1,)),
                        np.array([0], np.int64), np.array([len(address)], np.int64), np.array([kind], np.int64))
    return int(out[0][0]), int(out[1][0])
