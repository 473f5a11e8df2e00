"""``lbsim profile-model``: a module's training-step t(b), its fit, its memory cap and its bad input.

Timing is machine-dependent, so the end-to-end run checks the record's shape and consistency (the
fit is the least-squares line through the medians it reports); the arithmetic is checked exactly on
synthetic timings.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch")

from lbsim.cli import main  # noqa: E402
from lbsim.errors import InputError  # noqa: E402
from lbsim.runtime.profile_module import SizeTiming, _fit_quality, _memory_cap, build_module, check_request  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
NET = f"{REPO / 'examples' / 'ddp_digits.py'}:Net"


def test_memory_cap_extrapolates_the_affine_peak_to_90_percent() -> None:
    # M(b) = 1 GiB + 10 MiB b: 90 % of 8 GiB = 7.2 GiB -> (7.2 - 1) GiB / 10 MiB = 634.88 -> 634
    gib, mib = 2**30, 2**20
    sizes = [SizeTiming(b, 0.1, 0.1, 0.1, 3, gib + 10 * mib * b) for b in (16, 32, 64)]
    assert _memory_cap(sizes, 8 * gib) == int((0.9 * 8 * gib - gib) // (10 * mib))
    assert _memory_cap([SizeTiming(8, 0.1, 0.1, 0.1, 3, None)] * 2, gib) is None  # the CPU: no cap


def test_fit_quality_of_an_exact_line() -> None:
    b = [10, 20, 40]
    t = [0.01 + x / 1000 for x in b]
    r2, worst = _fit_quality(b, t, 0.01, 1000.0)
    assert r2 == pytest.approx(1.0) and worst == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("batches, warmup, reps, shape, classes, option", [
    ([8], 1, 3, [1, 8, 8], 10, "--batches"),
    ([8, 8], 1, 3, [1, 8, 8], 10, "--batches"),
    ([0, 8], 1, 3, [1, 8, 8], 10, "--batches"),
    ([8, 16], 1, 2, [1, 8, 8], 10, "--reps"),
    ([8, 16], 1, 3, [], 10, "--input-shape"),
    ([8, 16], 1, 3, [1, 8, 8], 1, "--classes"),
])
def test_bounds(batches: list[int], warmup: int, reps: int, shape: list[int], classes: int, option: str) -> None:
    with pytest.raises(InputError) as err:
        check_request(batches, warmup, reps, shape, classes)
    assert err.value.path == option


@pytest.mark.parametrize("spec, words", [
    ("resnet50", "expected SOURCE:NAME"),
    ("nowhere.py:Net", "no such file"),
    (f"{REPO / 'examples' / 'ddp_digits.py'}:Nope", "no callable 'Nope'"),
    ("lbsim.version:__version__", "no callable"),
    ("no_such_package_xyz:f", "cannot import no_such_package_xyz"),
])
def test_bad_model_specs_name_the_problem(spec: str, words: str) -> None:
    with pytest.raises(InputError) as err:
        build_module(spec, 10)
    assert words in str(err.value)


def test_profile_model_on_the_cpu(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "cnn"
    rc = main(["profile-model", NET, "--input-shape", "1,8,8", "--classes", "10", "--batches", "4,8,16",
               "--device", "cpu", "--warmup", "1", "--reps", "3", "--out", str(out)])
    assert rc == 0
    record = json.loads((out / "model_profile.json").read_text())
    assert [s["batch"] for s in record["sizes"]] == [4, 8, 16] and all(s["reps"] == 3 for s in record["sizes"])
    assert record["gradient_bytes"] == 605_480 and record["parameters"] == 151_370  # the catalog's digits_cnn
    assert record["max_batch"] is None and record["environment"]["device"] == "cpu"
    assert record["catalog_source"].startswith("measured by lbsim profile-model") and "median of 3 steps" in record["catalog_source"]
    import numpy as np

    b = np.array([s["batch"] for s in record["sizes"]], dtype=float)
    t = np.array([s["median_s"] for s in record["sizes"]])
    slope, t0 = np.polyfit(b, t, 1)
    if slope > 0 and t0 >= 0:  # the unconstrained least-squares line (else the fit goes through the origin)
        assert record["t0_s"] == pytest.approx(t0) and record["samples_per_s"] == pytest.approx(1 / slope)
    assert f"cluster.groups.0.t0_s={record['t0_s']:.6g}" in record["sets"]
    assert "results in" in capsys.readouterr().out


def test_bad_input_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "x"
    assert main(["profile-model", NET, "--input-shape", "1,8,8", "--batches", "4", "--device", "cpu", "--out", str(out)]) == 2
    assert "--batches" in capsys.readouterr().err
    assert main(["profile-model", NET, "--input-shape", "a,b", "--device", "cpu", "--out", str(out)]) == 2
    assert "--input-shape: expected comma-separated integers" in capsys.readouterr().err
    assert not out.exists()
