"""``benchmarks/fault_campaign.py``'s live-engine sections run end to end with tiny counts: the script
exits 0 and writes its JSON and markdown with the expected keys. The figures themselves are not
asserted (they are what the campaign measures)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SECTIONS = "inputs,copies,resurrect,kills,fair"


def test_live_sections_run_and_report(tmp_path: Path) -> None:
    out = tmp_path / "out"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    p = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "fault_campaign.py"),
            "--out",
            str(out),
            "--sections",
            SECTIONS,
            "--engine-kills",
            "1",
            "--fair-users",
            "2",
            "--fair-messages",
            "10",
            "--deadline",
            "600",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )  # only against a hang
    assert p.returncode == 0, p.stderr[-3000:]
    report = json.loads((out / "faults.json").read_text())
    assert report["sections"] == SECTIONS.split(",")
    inputs = report["inputs"]
    assert {"kinds", "per_surface", "total", "skipped", "rows"} <= set(inputs)
    assert inputs["kinds"] == len(inputs["rows"]) > 0
    assert {"surface", "kind", "outcome", "said"} <= set(inputs["rows"][0])
    assert {"clean", "vague", "raw", "silent", "lost", "accepted"} == set(inputs["total"])
    copies = report["copies"]
    assert {"after delete", "after delete_all", "after reset"} <= set(
        copies["phases"]
    ) and "copies_left" in copies
    for phase in copies["phases"].values():
        assert set(phase) == set(copies["tokens"])
        assert all({"files_open", "files_closed", "outputs", "where"} <= set(v) for v in phase.values())
    assert {"steps", "resurrected", "deleted"} <= set(report["resurrect"])
    kills = report["kill_engine_adds"]
    assert {"kills", "acknowledged_ids", "lost", "half_applied", "split_adds", "failed_reopen"} <= set(kills)
    fair = report["fairness"]
    for name in ("asked", "largest_accepted"):
        assert {"batch", "batch_s", "small_add_latency_s", "items", "messages_per_item"} <= set(fair[name])
    assert "idle_add_latency_s" in fair
    assert "### Bad input" in (out / "faults.md").read_text()
