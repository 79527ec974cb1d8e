"""``memory.durable.write_durable`` (the op ``ops.files.write_durable``): the C++ call (no GIL, threads
of its own) and the Python steps write the same files, attempt every file, leave no temporary file
where one fails, and sync each destination folder once its files are renamed into it."""

from __future__ import annotations

import errno
import os
import threading
import time

import pytest

from xmemory_gpu.memory.durable import write_durable
from xmemory_gpu.ops import available_backends

NATIVE = available_backends()["cpu"].available

PATHS = [pytest.param("cpu", id="native"), pytest.param("reference", id="python")]


def _files(folder, n, size=3000):
    return [(folder / f".f{i}.tmp", folder / f"f{i}", os.urandom(size + i)) for i in range(n)]


@pytest.mark.parametrize("backend", PATHS)
@pytest.mark.parametrize("threads", [1, 3, 8])
@pytest.mark.parametrize("n", [7, 40])
def test_every_file_lands_whole_and_no_temporary_stays(tmp_path, backend, threads, n):
    if backend == "cpu" and not NATIVE:
        pytest.skip("the compiled module is not built")
    files = _files(tmp_path, n)
    (tmp_path / "f2").write_bytes(b"an older file of that name")  # replaced, as os.replace does
    write_durable(files, threads=threads, backend=backend)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(f"f{i}" for i in range(n))
    for _, dst, data in files:
        assert dst.read_bytes() == data
    write_durable([], backend=backend)
    write_durable([(tmp_path / ".e.tmp", tmp_path / "empty", b"")], backend=backend)
    assert (tmp_path / "empty").read_bytes() == b""


@pytest.mark.parametrize("backend", PATHS)
@pytest.mark.parametrize("n", [3, 20])  # an fsync each; one sync of the file system for all
def test_a_failed_file_raises_after_the_others_land(tmp_path, backend, n):
    """The rename of file 1 fails (its name is a folder): OSError with errno and path, its temporary
    file removed; every other file is in place."""
    if backend == "cpu" and not NATIVE:
        pytest.skip("the compiled module is not built")
    files = _files(tmp_path, n)
    files[1][1].mkdir()
    (files[1][1] / "x").write_bytes(b"")  # a non-empty folder: no rename over it
    with pytest.raises(OSError) as info:
        write_durable(files, threads=2, backend=backend)
    assert info.value.errno in (errno.EISDIR, errno.ENOTEMPTY, errno.EEXIST)
    assert "f1" in str(info.value.filename)
    assert not files[1][0].exists()
    assert all(dst.read_bytes() == data for i, (_, dst, data) in enumerate(files) if i != 1)
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    missing = [(tmp_path / "no such folder" / ".t.tmp", tmp_path / "no such folder" / "t", b"x")]
    with pytest.raises(FileNotFoundError):
        write_durable(missing, backend=backend)


def test_the_native_writes_leave_the_interpreter_free(tmp_path):
    """While the C++ call writes (and fsyncs) files on a background thread, a Python loop on this
    thread keeps running: its longest stall is far shorter than the call (a call holding the GIL
    throughout would stall it for the whole call)."""
    if not NATIVE:
        pytest.skip("the compiled module is not built")
    files = _files(tmp_path, 64, size=2_000_000)
    span = {}

    def write() -> None:
        t = time.perf_counter()
        write_durable(files, threads=2)
        span["s"] = time.perf_counter() - t

    thread = threading.Thread(target=write)
    longest, last = 0.0, time.perf_counter()
    thread.start()
    while thread.is_alive():
        now = time.perf_counter()
        longest, last = max(longest, now - last), now
    thread.join()
    assert all(dst.read_bytes() == data for _, dst, data in files)
    if span["s"] < 0.05:
        pytest.skip(
            f"the writes took {span['s'] * 1e3:.0f} ms: too short to tell a stall from a switch interval"
        )
    assert longest < span["s"] / 2, (longest, span["s"])


@pytest.mark.parametrize("backend", PATHS)
def test_many_files_in_two_folders_all_land(tmp_path, backend):
    """Files of one call in two folders (no single file system sync covers them: an fsync each)."""
    if backend == "cpu" and not NATIVE:
        pytest.skip("the compiled module is not built")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    files = _files(tmp_path / "a", 10) + _files(tmp_path / "b", 10)
    write_durable(files, threads=2, backend=backend)
    assert all(dst.read_bytes() == data for _, dst, data in files)
    assert not [p for p in tmp_path.rglob("*.tmp")]


def _folder_opens(monkeypatch, fail: int | None = None) -> list[tuple[str, list[str]]]:
    """Record each folder opened to be fsynced (its path and the files in it then); with ``fail``,
    refuse those opens with that errno."""
    seen: list[tuple[str, list[str]]] = []
    real = os.open

    def opened(path, flags, *args, **kwargs):
        if flags & getattr(os, "O_DIRECTORY", 0):
            seen.append((os.fsdecode(path), sorted(map(os.fsdecode, os.listdir(path)))))
            if fail is not None:
                raise OSError(fail, os.strerror(fail), path)
        return real(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", opened)
    return seen


@pytest.mark.parametrize("backend", PATHS)
def test_each_folder_is_synced_once_after_its_files_are_renamed_into_it(tmp_path, backend, monkeypatch):
    if backend == "cpu" and not NATIVE:
        pytest.skip("the compiled module is not built")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    files = _files(tmp_path / "a", 17) + _files(tmp_path / "b", 3)
    seen = _folder_opens(monkeypatch)
    write_durable(files, threads=2, backend=backend)
    assert [os.path.basename(p) for p, _ in seen] == ["a", "b"]
    assert seen[0][1] == sorted(f"f{i}" for i in range(17)) and seen[1][1] == ["f0", "f1", "f2"]


@pytest.mark.parametrize("backend", PATHS)
def test_a_folder_that_cannot_be_synced_raises_after_the_files_land(tmp_path, backend, monkeypatch):
    if backend == "cpu" and not NATIVE:
        pytest.skip("the compiled module is not built")
    files = _files(tmp_path, 3)
    _folder_opens(monkeypatch, fail=errno.EACCES)
    with pytest.raises(PermissionError) as info:
        write_durable(files, backend=backend)
    assert info.value.errno == errno.EACCES and info.value.filename == str(tmp_path)
    assert all(dst.read_bytes() == data for _, dst, data in files)


def test_write_hashed_streams_every_piece_and_hashes_them(tmp_path, monkeypatch):
    """``write_hashed``: the pieces' bytes in order (short writes continued, more pieces than one
    writev takes, empty pieces among them), their sha256, the file synced; an executor shut down
    (the interpreter's exit): hashed after the write; a failed write leaves no file."""
    import hashlib
    import os
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np

    from xmemory_gpu.memory import durable

    rng = np.random.default_rng(0)
    sizes = [0, 0, *rng.integers(0, 5000, 1300).tolist(), 0, 0]
    pieces = [memoryview(rng.integers(0, 256, int(n), dtype=np.uint8)) for n in sizes]
    want = b"".join(pieces)
    real = os.writev

    def short(fd, bufs):  # at most 777 bytes a call
        return real(fd, [bytes(b"".join(bufs)[:777])])

    with ThreadPoolExecutor(1) as pool:
        for name, patch in (("whole", None), ("short", short)):
            if patch is not None:
                monkeypatch.setattr(os, "writev", patch)
            path = tmp_path / name
            assert durable.write_hashed(path, pieces, pool) == hashlib.sha256(want).hexdigest()
            assert path.read_bytes() == want
            monkeypatch.undo()

        shut = ThreadPoolExecutor(1)
        shut.shutdown()
        assert durable.write_hashed(tmp_path / "exit", pieces, shut) == hashlib.sha256(want).hexdigest()
        assert (tmp_path / "exit").read_bytes() == want

        def fails(fd, bufs):
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(os, "writev", fails)
        try:
            durable.write_hashed(tmp_path / "full", pieces, pool)
        except OSError as exc:
            assert exc.errno == 28
        else:
            raise AssertionError("the write did not fail")
        assert not (tmp_path / "full").exists()


def test_read_hashed_reads_every_byte_and_hashes_them(tmp_path, monkeypatch):
    """``read_hashed``: a file's bytes in one buffer and their sha256, chunk by chunk on the thread
    (chunks smaller than the file, the last one short), on a shut-down executor (hashed here), and
    an empty file."""
    import hashlib
    from concurrent.futures import ThreadPoolExecutor

    from xmemory_gpu.memory import durable

    monkeypatch.setattr(durable, "_READ_CHUNK", 1000)
    data = bytes(range(256)) * 40 + b"tail"
    (tmp_path / "f").write_bytes(data)
    (tmp_path / "empty").write_bytes(b"")
    shut = ThreadPoolExecutor(1)
    shut.shutdown()
    with ThreadPoolExecutor(1) as pool:
        for hasher in (pool, shut):
            buf, digest = durable.read_hashed(tmp_path / "f", hasher)
            assert isinstance(buf, bytearray) and bytes(buf) == data
            assert digest == hashlib.sha256(data).hexdigest()
        assert durable.read_hashed(tmp_path / "empty", pool) == (bytearray(), hashlib.sha256(b"").hexdigest())
