"""Tests for lbsim.contention.traces on the shipped trace copies and on hand-made files."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import numpy as np
import pytest

from lbsim.contention.traces import (
    detect_format,
    load_cluster_cpu,
    load_pai_minibatch,
    load_simple,
)
from lbsim.errors import InputError

TRACES = Path(__file__).resolve().parent.parent / "scenarios" / "traces"
JOB1, JOB2, JOB4 = (TRACES / f"pai_job_{k}_norm.csv" for k in (1, 2, 4))
CLUSTER = TRACES / "alibaba2018_cluster_cpu_300s.csv"
EXAMPLE = TRACES / "example_simple.csv"


def write(tmp_path: Path, text: str, name: str = "t.csv") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def raises(path, fn=load_simple, **kw) -> InputError:
    with pytest.raises(InputError) as info:
        fn(path, **kw)
    assert info.value.path == str(path)
    return info.value


# --- shipped files ---------------------------------------------------------------------------

def test_shipped_files_detected():
    for p in (JOB1, JOB2, JOB4):
        assert detect_format(p) == "pai_minibatch"
    assert detect_format(CLUSTER) == "cluster_cpu"
    assert detect_format(EXAMPLE) == "simple"
    assert (TRACES / "README.md").is_file()


def test_pai_job1_shape_and_median():
    m = load_pai_minibatch(JOB1)
    assert m.shape == (10, 300) and m.dtype == np.float64
    np.testing.assert_allclose(np.median(m, axis=0), 1.0, rtol=0, atol=1e-12)
    assert (m > 0).all()
    # Alibaba: worker 6 becomes a straggler mid-run (its worst iterations are mid-trace).
    w, i = np.unravel_index(np.argmax(m), m.shape)
    assert w == 6 and 100 <= i < 200 and m[w, i] > 2.0


def test_pai_job2_missing_cells_and_exact_duplicate():
    m = load_pai_minibatch(JOB2)
    assert m.shape == (10, 254)
    np.testing.assert_allclose(np.median(m, axis=0), 1.0, atol=1e-12)
    assert np.isfinite(m).all()


def test_pai_job4_persistent_stragglers():
    m = load_pai_minibatch(JOB4)
    assert m.shape == (10, 2183)
    mean = m.mean(axis=1)
    slow = set(np.flatnonzero(mean > 1.3).tolist())
    assert slow == {0, 5, 6, 7, 8}  # references.md §4.1: workers 0, 5-8 at 1.5-2.5x
    assert (mean[[1, 2, 3, 4, 9]] < 0.6).all()  # the fast group, ~0.46-0.49x


def test_cluster_cpu_series():
    cpu = load_cluster_cpu(CLUSTER)
    assert cpu.shape == (2243,) and cpu.dtype == np.float64
    assert cpu.mean() == pytest.approx(40.0, abs=0.5)
    assert 15 < cpu.min() < 17 and 78 < cpu.max() < 80
    mem = load_cluster_cpu(CLUSTER, column="mem_util_percent")
    assert mem.shape == (2243,) and not np.array_equal(mem, cpu)


def test_example_simple():
    tr = load_simple(EXAMPLE)
    assert sorted(tr) == [0, 1, 2, 3]
    times, factors = tr[1]
    np.testing.assert_array_equal(times, [0.0, 20.0, 60.0])
    np.testing.assert_array_equal(factors, [1.0, 3.0, 1.0])


# --- simple format ---------------------------------------------------------------------------

def test_simple_round_trip(tmp_path):
    want = {0: ([0.0, 5.5, 12.0], [1.0, 2.0, 1.0]), 3: ([1.0, 30.0], [0.5, 4.0])}
    rows = [(t, w, s) for w, (ts, ss) in want.items() for t, s in zip(ts, ss, strict=False)]
    rows.reverse()  # any order is allowed
    text = " time_s , worker ,slowdown \n" + "".join(f"{t!r}, {w} ,{s!r}\n" for t, w, s in rows)
    got = load_simple(write(tmp_path, text + "\n\n"))
    assert sorted(got) == [0, 3]
    for w, (ts, ss) in want.items():
        assert got[w][0].dtype == np.float64 and got[w][1].dtype == np.float64
        np.testing.assert_array_equal(got[w][0], ts)
        np.testing.assert_array_equal(got[w][1], ss)


@pytest.mark.parametrize("fn", [load_simple, load_pai_minibatch, load_cluster_cpu, detect_format])
def test_missing_file(tmp_path, fn):
    err = raises(tmp_path / "nope.csv", fn)
    assert err.message == "trace file not found"
    err = raises(str(tmp_path / "nope.csv.gz"), fn)  # a str path is reported as given
    assert err.message == "trace file not found"


def test_empty_and_header_only(tmp_path):
    assert "empty" in raises(write(tmp_path, "")).message
    assert "empty" in raises(write(tmp_path, "\n \n", "blank.csv")).message
    assert "no data rows" in raises(write(tmp_path, "time_s,worker,slowdown\n", "h.csv")).message
    assert "no data rows" in raises(write(tmp_path, CLUSTER.read_text().splitlines()[0], "c.csv"),
                                    load_cluster_cpu).message


def test_bad_header(tmp_path):
    p = write(tmp_path, "t,worker,slowdown\n0,0,1\n")
    err = raises(p)
    assert "time_s,worker,slowdown" in err.message
    err = raises(p, detect_format)
    for fmt in ("pai_minibatch", "cluster_cpu", "simple", "batch_time_norm", "cpu_util_percent"):
        assert fmt in err.message
    assert "batch_time_norm" in raises(p, load_pai_minibatch).message


@pytest.mark.parametrize(
    "row, words",
    [
        ("5,1,fast", ["line 3", "slowdown", "number", "'fast'"]),
        ("x,1,2", ["line 3", "time_s", "'x'"]),
        ("5,1.5,2", ["line 3", "worker", "integer"]),
        ("5,1,-2", ["line 3", "slowdown must be > 0"]),
        ("5,1,0", ["line 3", "slowdown must be > 0"]),
        ("-1,1,2", ["line 3", "time_s must be >= 0"]),
        ("5,-1,2", ["line 3", "worker must be an integer >= 0"]),
        ("5,1,nan", ["line 3", "finite"]),
        ("5,1", ["line 3", "expected 3 fields"]),
        ("5,1,2,7", ["line 3", "expected 3 fields"]),
    ],
)
def test_simple_bad_rows(tmp_path, row, words):
    err = raises(write(tmp_path, f"time_s,worker,slowdown\n0,0,1\n{row}\n1,0,1\n"))
    for w in words:
        assert w in err.message


def test_simple_duplicate_row(tmp_path):
    err = raises(write(tmp_path, "time_s,worker,slowdown\n0,0,1\n10,2,2\n\n10.0,2,3\n"))
    assert "line 5" in err.message and "duplicate" in err.message and "line 3" in err.message
    # the same time for different workers is fine
    assert sorted(load_simple(write(tmp_path, "time_s,worker,slowdown\n0,0,1\n0,1,2\n", "ok.csv"))) == [0, 1]


# --- Alibaba formats -------------------------------------------------------------------------

PAI_HEAD = ",worker,gpu,time,batch_time_norm\n"


def test_pai_small_file_fills_missing(tmp_path):
    text = PAI_HEAD + "0,1,25,1,100\n1,0,25,1,200\n2,2,25,1,400\n3,0,25,11,50\n4,2,25,11,100\n"
    m = load_pai_minibatch(write(tmp_path, text))
    # workers sorted (0, 1, 2), iterations sorted (1, 11)
    np.testing.assert_allclose(m, [[1.0, 2 / 3], [0.5, 1.0], [2.0, 4 / 3]])


def test_pai_without_index_column(tmp_path):
    m = load_pai_minibatch(write(tmp_path, "worker,gpu,time,batch_time_norm\n0,25,1,2\n1,25,1,4\n"))
    np.testing.assert_allclose(m, [[2 / 3], [4 / 3]])


@pytest.mark.parametrize(
    "row, words",
    [
        ("2,1,25,1,0", ["line 3", "batch_time_norm must be > 0"]),
        ("2,1,25,1,-5", ["line 3", "batch_time_norm must be > 0"]),
        ("2,1,25,1,slow", ["line 3", "batch_time_norm", "'slow'"]),
        ("2,one,25,1,5", ["line 3", "worker", "integer"]),
        ("2,1,25,1", ["line 3", "expected 5 fields"]),
        ("2,0,25,1,7", ["line 3", "line 2", "worker 0"]),  # conflicting duplicate
    ],
)
def test_pai_bad_rows(tmp_path, row, words):
    err = raises(write(tmp_path, PAI_HEAD + f"0,0,25,1,5\n{row}\n"), load_pai_minibatch)
    for w in words:
        assert w in err.message


def test_cluster_errors(tmp_path):
    head = "cpu_util_percent,mem_util_percent,net_in,net_out,disk_io_percent\n"
    p = write(tmp_path, head + "10,20,30,40,5\n101,20,30,40,5\n")
    err = raises(p, load_cluster_cpu)
    assert "line 3" in err.message and "[0, 100]" in err.message
    assert load_cluster_cpu(p, column="mem_util_percent").tolist() == [20.0, 20.0]
    err = raises(p, load_cluster_cpu, column="gpu_util")
    assert "gpu_util" in err.message
    for c in ("cpu_util_percent", "mem_util_percent", "net_in", "net_out", "disk_io_percent"):
        assert c in err.message
    err = raises(write(tmp_path, head + "10,20,30,40,5\n-1,2,3,4,5\n", "n.csv"), load_cluster_cpu)
    assert "line 3" in err.message
    err = raises(write(tmp_path, head + "1,2,3,4,5\n12%,2,3,4,5\n", "p.csv"), load_cluster_cpu)
    assert "line 3" in err.message and "'12%'" in err.message


# --- gzip --------------------------------------------------------------------------------------

def test_gz_reads_same_as_plain(tmp_path):
    for src, fn in ((JOB1, load_pai_minibatch), (CLUSTER, load_cluster_cpu), (EXAMPLE, load_simple)):
        gz = tmp_path / (src.name + ".gz")
        with open(src, "rb") as f, gzip.open(gz, "wb") as g:
            shutil.copyfileobj(f, g)
        assert detect_format(gz) == detect_format(src)
        plain, packed = fn(src), fn(gz)
        if isinstance(plain, dict):
            assert plain.keys() == packed.keys()
            for w in plain:
                np.testing.assert_array_equal(plain[w][0], packed[w][0])
                np.testing.assert_array_equal(plain[w][1], packed[w][1])
        else:
            np.testing.assert_array_equal(plain, packed)


def test_bad_gz_and_binary(tmp_path):
    err = raises(write(tmp_path, "time_s,worker,slowdown\n0,0,1\n", "plain.csv.gz"))
    assert "gzip" in err.message
    data = gzip.compress(b"time_s,worker,slowdown\n" + b"1,2,3\n" * 1000)
    trunc = tmp_path / "trunc.csv.gz"
    trunc.write_bytes(data[: len(data) // 2])
    assert "gzip" in raises(trunc).message
    binary = tmp_path / "bin.csv"
    binary.write_bytes(b"\xff\xfe\x00\x81garbage")
    assert "cannot read" in raises(binary).message


def test_directory_is_not_a_trace(tmp_path):
    assert raises(tmp_path).message == "trace file not found"
