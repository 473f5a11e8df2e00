"""Every ``python`` block of docs/api.md runs, in order, in one namespace, in a scratch folder
that links the repository's ``scenarios/`` (so outputs land in the scratch ``runs/``)."""

from __future__ import annotations

import contextlib
import io
import os
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "api.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def test_api_doc_examples_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = [body for kind, body in FENCE.findall(DOC.read_text(encoding="utf-8")) if kind == "python"]
    assert len(blocks) >= 4
    (tmp_path / "scenarios").symlink_to(REPO / "scenarios")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    namespace: dict[str, object] = {}
    for i, block in enumerate(blocks):
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile(block, f"{DOC.name}[python block {i}]", "exec"), namespace)  # noqa: S102
    assert (tmp_path / "runs" / "api_demo" / "compare" / "compare.csv").is_file()
    assert (tmp_path / "runs" / "api_demo" / "ssp" / "iterations.parquet").is_file()
