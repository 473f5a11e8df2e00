"""The recording format's reader: a round trip, the generic CSV, a killed job, and every bad recording
(exit 2 naming the file and the row), read without torch."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from lbsim.cli import main
from lbsim.errors import InputError
from lbsim.recording import read_recording
from lbsim.recording.synthetic import synthetic_recording
from lbsim.recording.writer import write_recording

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def job(tmp_path: Path) -> Path:
    rec = synthetic_recording(ranks=3, steps=8, slow={1: (0.0, None, 3.0)})
    return write_recording(tmp_path / "job", rec)


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines(keepends=True)


def test_round_trip(job: Path) -> None:
    rec = read_recording(job)
    ref = synthetic_recording(ranks=3, steps=8, slow={1: (0.0, None, 3.0)})
    assert rec.ranks == 3 and rec.steps_used == 8 and rec.notes == ()
    np.testing.assert_allclose(rec.compute_s, ref.compute_s, atol=2e-6)
    assert rec.compute_s[1, 0] == pytest.approx(0.15, abs=2e-6)
    assert rec.job_s == pytest.approx(ref.job_s, abs=2e-6)


def test_generic_csv_and_parquet(job: Path, tmp_path: Path) -> None:
    import pandas as pd

    frame = pd.concat([pd.read_csv(p) for p in sorted(job.glob("rank-*.csv"))])
    frame = frame.sample(frac=1.0, random_state=1)  # rows of all ranks, any order between ranks
    frame = frame.sort_values(["rank", "step"], kind="stable")
    frame.to_csv(tmp_path / "all.csv", index=False)
    frame.to_parquet(tmp_path / "all.parquet", index=False)
    a, b, c = read_recording(job), read_recording(tmp_path / "all.csv"), read_recording(tmp_path / "all.parquet")
    for other in (b, c):
        np.testing.assert_array_equal(a.optimizer_end_s, other.optimizer_end_s)
        assert other.hosts == a.hosts and other.scheme == {"name": "bsp"}


def _kill(job: Path) -> None:
    header = json.loads((job / "job.json").read_text())
    header["complete"] = False
    (job / "job.json").write_text(json.dumps(header))


def test_killed_job_is_read_to_its_last_complete_step(job: Path) -> None:
    _kill(job)
    shard = job / "rank-00002.csv"
    lines = _lines(shard)
    shard.write_text("".join(lines[:6]) + lines[6][:17])  # 5 whole steps, the sixth cut mid-row
    rec = read_recording(job)
    assert rec.steps_used == 5 and rec.steps_recorded == 8
    assert any("used 5 of 8" in n for n in rec.notes) and any("rank-00002.csv" in n for n in rec.notes)


@pytest.mark.parametrize("defect, where", [
    ("missing_rank", "rank-00001.csv: missing"),
    ("no_rows", "rank-00001.csv: rank 1 has no rows"),
    ("out_of_order", "rank-00000.csv: row 3 (line 4): steps out of order: step 3 follows step 1"),
    ("negative", "rank-00002.csv: row 3 (line 4): last_bucket_s"),
    ("huge", "rank-00000.csv: row 2 (line 3): optimizer_end_s = 1e+09 s"),
    ("cut_complete", "rank-00002.csv: row 8 (line 9): cut mid-row"),
    ("cut_mid_file", "rank-00002.csv: row 3 (line 4): 5 fields"),
    ("wrong_rank", "rank-00001.csv: row 1 (line 2): rank 2 in rank 1's shard"),
])
def test_bad_recordings_exit_2_naming_file_and_row(job: Path, defect: str, where: str, capsys) -> None:
    s0, s1, s2 = (job / f"rank-0000{r}.csv" for r in range(3))
    if defect == "missing_rank":
        s1.unlink()
    elif defect == "no_rows":
        s1.write_text(_lines(s1)[0])
    elif defect == "out_of_order":
        lines = _lines(s0)
        lines[3], lines[4] = lines[4], lines[3]
        s0.write_text("".join(lines))
    elif defect == "negative":
        lines = _lines(s2)
        cells = lines[3].split(",")
        cells[6] = "-0.5"
        lines[3] = ",".join(cells)
        s2.write_text("".join(lines))
    elif defect == "huge":
        lines = _lines(s0)
        cells = lines[2].rstrip("\n").split(",")
        cells[8] = "1e9"
        lines[2] = ",".join(cells) + "\n"
        s0.write_text("".join(lines))
    elif defect == "cut_complete":
        s2.write_text(s2.read_text()[:-9])
    elif defect == "cut_mid_file":
        lines = _lines(s2)
        lines[3] = ",".join(lines[3].split(",")[:5]) + "\n"
        s2.write_text("".join(lines))
    elif defect == "wrong_rank":
        s1.write_text(s1.read_text().replace("\n1,", "\n2,", 1))
    with pytest.raises(InputError) as err:
        read_recording(job)
    assert where in str(err.value)
    code = main(["whatif", str(job), "--out", str(job.parent / "out"), "-q"])
    assert code == 2 and where in capsys.readouterr().err
    assert not (job.parent / "out").exists()


def test_generic_csv_rank_without_rows(job: Path, tmp_path: Path) -> None:
    lines = [_lines(job / "rank-00000.csv")[0]] + _lines(job / "rank-00000.csv")[1:] + _lines(job / "rank-00002.csv")[1:]
    (tmp_path / "gap.csv").write_text("".join(lines))
    with pytest.raises(InputError, match=r"gap.csv: rank 1 has no rows"):
        read_recording(tmp_path / "gap.csv")


def test_read_without_torch(job: Path) -> None:
    code = ("import sys; sys.modules['torch'] = None; sys.modules['simpy'] = None\n"
            "from lbsim.recording import read_recording\n"
            f"rec = read_recording({str(job)!r}); print(rec.ranks, rec.steps_used)\n"
            "assert 'torch' not in {m for m, v in sys.modules.items() if v is not None}")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["3", "8"]


def test_docs_pandas_conversion_gives_a_readable_generic_csv(tmp_path: Path, monkeypatch) -> None:
    """docs/whatif.md's conversion of another tool's log (ms since the epoch, other names), run as written."""
    import pandas as pd

    text = (REPO / "docs" / "whatif.md").read_text()
    code = next(block.split("```", 1)[0] for block in text.split("```python")[1:] if "timings.csv" in block)
    rec = synthetic_recording(ranks=2, steps=5)
    epoch_ms = 1.7e12
    rows = [{"rank": r, "hostname": "n0", "it": k, "bs": int(rec.samples[r, k]),
             "t_load_ms": epoch_ms + 1e3 * rec.batch_ready_s[r, k], "t_bwd_last_hook_ms": epoch_ms + 1e3 * rec.last_bucket_s[r, k],
             "t_bwd_done_ms": epoch_ms + 1e3 * rec.step_end_s[r, k], "t_opt_ms": epoch_ms + 1e3 * rec.optimizer_end_s[r, k]}
            for k in range(5) for r in range(2)]
    pd.DataFrame(rows).to_csv(tmp_path / "timings.csv", index=False)
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "docs/whatif.md", "exec"), {})
    got = read_recording(tmp_path / "steps.csv")
    np.testing.assert_allclose(got.compute_s, rec.compute_s, atol=1e-5)
    assert got.devices == ("cuda:A100", "cuda:A100")
