"""The issue-29 ablation tool (benchmarks/paper_ablation.py) runs end to end on a tiny IDX data
set the test writes, appends one row per run, skips runs already recorded, and tabulates."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest

from benchmarks import paper_ablation


def _write_idx(path, array: np.ndarray) -> None:
    header = struct.pack(">BBBB", 0, 0, 0x08, array.ndim)
    path.write_bytes(header + struct.pack(f">{array.ndim}I", *array.shape)
                     + array.astype(np.uint8).tobytes())


def test_runs_append_skip_and_tabulate(tmp_path, capsys):
    rng = np.random.default_rng(0)
    for split, n in (("train", 40), ("t10k", 10)):
        _write_idx(tmp_path / f"{split}-images-idx3-ubyte", rng.integers(0, 256, (n, 28, 28)))
        _write_idx(tmp_path / f"{split}-labels-idx1-ubyte", np.arange(n) % 10)
    out = tmp_path / "runs.jsonl"
    args = ["--variants", "std+fixed,base", "--seeds", "0", "--batches", "8,128",
            "--cells", "no noise,σ 1.23,κ 200", "--root", str(tmp_path), "--out", str(out)]
    assert paper_ablation.main(args) == 0
    rows = [json.loads(line) for line in out.open()]
    assert len(rows) == 2 * 2 * 3 and all(0.0 <= r["acc"] <= 1.0 for r in rows)
    assert {(r["variant"], r.get("sampling", "poisson"), r.get("prep")) for r in rows} == {
        ("std+fixed", "fixed", "std"), ("base", "poisson", None)}
    assert paper_ablation.main(args) == 0  # every run recorded already: nothing appended
    assert len(out.read_text().splitlines()) == len(rows)
    capsys.readouterr()
    assert paper_ablation.main(["--table", str(out)]) == 0
    table = capsys.readouterr().out
    assert "| published (Table V) | 128 |" in table and "| std+fixed | 8 | 1 |" in table
    with pytest.raises(SystemExit):
        paper_ablation.main(["--variants", "std+nope", "--out", str(out), "--root", str(tmp_path)])
