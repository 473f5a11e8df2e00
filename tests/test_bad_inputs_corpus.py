"""Issue 16: a corpus of bad scenario files (``tests/bad_inputs/*.yaml``), each refused with exit 2.

Every file starts with ``# expect: TEXT``: ``lbsim run FILE`` must exit 2 with exactly one line on
stderr that contains TEXT (the key path and what is wrong), no traceback, and write nothing. The
files cover the bounds (alias bombs, nesting, long lists, worker counts, history lengths, big
integers), even splits that leave a worker no sample under every even-split scheme, a trace naming
a worker outside the cluster, YAML that is not plain data, and out-of-range values in every section.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lbsim.cli import main

CORPUS = Path(__file__).resolve().parent / "bad_inputs"
FILES = sorted(CORPUS.glob("*.yaml"))


def _expected(path: Path) -> str:
    first = path.read_text(encoding="utf-8").split("\n", 1)[0]
    assert first.startswith("# expect: "), f"{path.name}: the first line must be '# expect: TEXT'"
    return first.removeprefix("# expect: ")


def test_the_corpus_has_at_least_40_distinct_inputs() -> None:
    texts = {p.read_text(encoding="utf-8").split("\n", 1)[1] for p in FILES}
    assert len(texts) == len(FILES) >= 40


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_bad_input_is_refused(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)  # a default runs/ folder would be noticed
    rc = main(["run", str(path), "--out", str(tmp_path / "out")])
    captured = capsys.readouterr()
    assert rc == 2, captured.err
    lines = captured.err.strip("\n").split("\n")
    assert len(lines) == 1 and lines[0].startswith("lbsim: error: "), captured.err[:1000]
    assert "Traceback" not in captured.err and "internal error" not in captured.err
    assert _expected(path) in lines[0], lines[0]
    assert len(lines[0]) < 600
    assert captured.out == ""
    assert list(tmp_path.iterdir()) == []
