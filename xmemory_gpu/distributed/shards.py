"""A store set: ``DIR/manifest.json`` and one live store per shard (``DIR/shard-K``), users hashed to shards.

The mapping is fixed when the manifest is first written and read back on every start, so a restart
(or another ingress) routes every user to the same shard: ``shard = sha256(user_id, UTF-8)``'s first
8 bytes as a big-endian integer, modulo the shard count. Python's ``hash()`` is salted per process
and never used. Growing the count would move users between stores; a start whose ``--shards``
disagrees with the manifest is refused. No Ray here: the ingress and the tests share these rules.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

MANIFEST = "manifest.json"
FORMAT = "xmemory-shards/1"
HASH = "sha256-be64-mod"  # int.from_bytes(sha256(user_id.encode('utf-8')).digest()[:8], 'big') % shards
MAX_SHARDS = 1024
_STORE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


class ManifestError(ValueError):
    """The store set's manifest is missing, damaged or disagrees with what was asked for."""


def shard_of(user_id: str, shards: int) -> int:
    """The shard of ``user_id`` among ``shards``: stable across processes, machines and Python versions."""
    digest = hashlib.sha256(user_id.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") % shards


@dataclass(frozen=True)
class ShardSet:
    root: Path
    stores: tuple[str, ...]  # store directory names under root, shard K at index K

    @property
    def shards(self) -> int:
        return len(self.stores)

    def shard_of(self, user_id: str) -> int:
        return shard_of(user_id, self.shards)

    def store(self, k: int) -> Path:
        return self.root / self.stores[k]

    def manifest(self) -> dict:
        return {"format": FORMAT, "shards": self.shards, "hash": HASH, "stores": list(self.stores)}


def _read(path: Path) -> ShardSet:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ManifestError(f"{path}: cannot read the store set's manifest ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ManifestError(f"{path}: not a store set manifest (expected format {FORMAT!r})")
    if data.get("hash") != HASH:
        raise ManifestError(f"{path}: hash {data.get('hash')!r} is not supported (expected {HASH!r})")
    n, stores = data.get("shards"), data.get("stores")
    if not (isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= MAX_SHARDS):
        raise ManifestError(f"{path}: shards: expected an integer from 1 to {MAX_SHARDS}, got {n!r}")
    if not (
        isinstance(stores, list)
        and len(stores) == n
        and all(isinstance(s, str) and _STORE.match(s) for s in stores)
        and len(set(stores)) == n
    ):
        raise ManifestError(f"{path}: stores: expected {n} distinct plain directory names")
    return ShardSet(path.parent, tuple(stores))


def _write(root: Path, shard_set: ShardSet) -> None:
    """The manifest written once, atomically (a temporary file renamed over nothing, then the directory synced)."""
    tmp = root / f".{MANIFEST}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(shard_set.manifest(), f, indent=2)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    try:
        os.link(tmp, root / MANIFEST)  # fails if another process wrote one first: theirs stands
    except FileExistsError:
        pass
    finally:
        tmp.unlink()
    fd = os.open(root, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def open_shard_set(root: str | Path, shards: int | None = None) -> ShardSet:
    """The store set at ``root``: its manifest read (and checked against ``shards`` when given), or, for
    a new or empty directory, a manifest of ``shards`` (default 1) written first."""
    root = Path(root)
    if shards is not None and not 1 <= shards <= MAX_SHARDS:
        raise ManifestError(f"--shards: expected 1 to {MAX_SHARDS}, got {shards}")
    path = root / MANIFEST
    if not path.exists():
        if root.is_dir() and any(root.iterdir()):
            what = (
                "a single store (serve it without --ray)"
                if (root / "memory.sqlite").exists()
                else "other files"
            )
            raise ManifestError(
                f"{root}: no {MANIFEST}, and the directory holds {what}; "
                "a sharded store set needs a new or empty directory"
            )
        root.mkdir(parents=True, exist_ok=True)
        n = shards or 1
        _write(root, ShardSet(root, tuple(f"shard-{k}" for k in range(n))))
    found = _read(path)
    if shards is not None and shards != found.shards:
        raise ManifestError(
            f"{path}: the store set has {found.shards} shard(s), not --shards {shards}; users are "
            "hashed to shards by that count, so it is fixed when the set is created (omit --shards to "
            "use the manifest's)"
        )
    return found
