"""Issue 16: a bounded fuzz of the command line over scenario trees and ``--set`` values.

Hypothesis mutates a small valid scenario (any key path replaced by an arbitrary YAML tree, unknown
keys added, sections dropped, aliases shared) and appends arbitrary ``--set KEY=VALUE`` options,
then runs ``lbsim run`` in-process on it. Each example runs under a time limit (``ITIMER_REAL``:
a hang is a failure) and a memory limit (``tracemalloc`` peak), and must end in one of two ways:

* exit 0 with a complete run folder, or
* exit 2 with one line on stderr (``lbsim: error: ...``), no traceback, and nothing written.

Exit 1 (lbsim's own fault), any exception escaping ``main``, a hang or a memory blow-up fails the
test. The example count (``EXAMPLES``) keeps the fuzz to about 20 s; it is derandomized, so a run is
reproducible. Runs are kept short by the fuzz itself: the base makes 3 updates and numbers are drawn
from small ones and from the absurd ones the bounds exist for (a valid example is a tiny run).
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
import tempfile
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from lbsim.cli import main

EXAMPLES = int(os.environ.get("LBSIM_FUZZ_EXAMPLES", "200"))  # more for a longer hunt
TIME_LIMIT_S = 60.0  # per example, a hang guard: a tiny scenario takes well under a second
MEMORY_LIMIT_BYTES = 200 * 2**20

BASE: dict[str, Any] = {
    "seed": 1,
    "workload": {"model": "resnet50_imagenet", "global_batch": 96, "updates": 3},
    "cluster": {"groups": [{"instance": "g4dn.xlarge", "count": 2}, {"instance": "p3.2xlarge", "count": 1}]},
    "network": {"name": "parameter_server"},
    "contention": [{"name": "scheduled", "workers": [0], "start_s": 0.1, "end_s": 0.5, "slowdown": 2}],
    "scheme": {"name": "bsp"},
}
NAMES = ["bsp", "asp", "ssp", "dssp", "static", "lbbsp", "loft", "wbsp", "elastic_bsp", "parameter_server",
         "ring_allreduce", "markov", "scheduled", "trace", "all", "g4dn.xlarge", "p3.2xlarge", "resnet50_imagenet"]
KEYS = ["seed", "workload", "cluster", "groups", "count", "instance", "network", "name", "scheme", "contention",
        "numerics", "enabled", "global_batch", "updates", "time_budget_s", "staleness", "fit_history", "workers",
        "hidden", "milestones", "data", "shards", "slowdown", "start_s", "end_s", "byzantine"]
PATHS = ["seed", "workload", "workload.global_batch", "workload.updates", "workload.time_budget_s", "cluster",
         "cluster.groups", "cluster.groups.0", "cluster.groups.0.count", "cluster.groups.1.instance", "network",
         "network.name", "network.shards", "contention", "contention.0", "contention.0.workers", "scheme",
         "scheme.name", "scheme.staleness", "scheme.fit_history", "scheme.variant", "numerics", "numerics.enabled",
         "numerics.hidden", "numerics.milestones", "data", "name", "description"]

# Small values (a valid example stays a tiny run) and absurd ones past every bound; nothing in between,
# where a valid scenario is merely a long run (say 16,000 updates of 80 workers) and not a fuzz finding.
numbers = st.one_of(st.integers(-3, 40), st.sampled_from([0, 10**9, 2**63, -(10**9), 10**400]),
                    st.floats(-1000, 1000), st.sampled_from([float("nan"), float("inf"), float("-inf"), 1e300]))
scalars = st.one_of(st.none(), st.booleans(), numbers, st.text(max_size=12), st.sampled_from(NAMES))
trees = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.one_of(st.sampled_from(KEYS), st.text(max_size=8)), inner, max_size=4)),
    max_leaves=12,
)
set_values = st.one_of(trees.map(lambda t: yaml.safe_dump(t, default_flow_style=True, width=10**6).strip()),
                       st.text(alphabet="[]{},:&*!|>'\"#- abc019.\n", max_size=30))
set_options = st.lists(st.tuples(st.one_of(st.sampled_from(PATHS), st.text(alphabet="abc.0123_", max_size=12)), set_values)
                       .map(lambda kv: f"{kv[0]}={kv[1]}"), max_size=3)


def _set_path(data: Any, path: str, value: Any) -> Any:
    """``data`` with ``path`` (dots, list indices) replaced by ``value``; a path that does not fit is left out."""
    node = data
    parts = path.split(".")
    for part in parts[:-1]:
        key: Any = int(part) if isinstance(node, list) and part.isdigit() else part
        try:
            node = node[key]
        except (KeyError, IndexError, TypeError):
            return data
    last: Any = int(parts[-1]) if isinstance(node, list) and parts[-1].isdigit() else parts[-1]
    if isinstance(node, dict) or (isinstance(node, list) and isinstance(last, int) and last < len(node)):
        node[last] = value
    return data


@st.composite
def scenario_texts(draw: st.DrawFn) -> str:
    data = yaml.safe_load(yaml.safe_dump(BASE))  # a fresh deep copy
    for _ in range(draw(st.integers(0, 2))):
        kind = draw(st.sampled_from(["replace", "replace", "add", "drop"]))
        if kind == "replace":
            data = _set_path(data, draw(st.sampled_from(PATHS)), draw(trees))
        elif kind == "add":
            data = _set_path(data, draw(st.sampled_from(PATHS)) + "." + draw(st.sampled_from(KEYS)), draw(trees))
        elif isinstance(data, dict) and data:
            data.pop(draw(st.sampled_from(sorted(data))), None)
    text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
    if draw(st.booleans()):  # shared structure: the same node under two keys, written with an anchor
        text = text.replace("scheme:", "scheme: &s", 1) + "description: *s\n" if "scheme:" in text else text
    return text


class _Hang(Exception):
    """Raised by the alarm; inside ``main`` it becomes exit 1 ("internal error: _Hang"), which fails the
    example like any exit 1, so hypothesis shrinks it and prints the scenario."""


def _alarm(_signum: int, _frame: Any) -> None:
    raise _Hang(f"an example ran past {TIME_LIMIT_S} s")


@pytest.fixture(scope="module", autouse=True)
def _code_loaded(tmp_path_factory: pytest.TempPathFactory) -> None:
    """One valid run before the examples, untraced: the modules a run imports load here, so the first
    example's peak is its run's, and tracemalloc does not trace (at 3x the CPU) the loading of lbsim's code."""
    root = tmp_path_factory.mktemp("warm")
    (root / "s.yaml").write_text(yaml.safe_dump(BASE), encoding="utf-8")
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["run", str(root / "s.yaml"), "--out", str(root / "out"), "-q"]) == 0


@settings(max_examples=EXAMPLES, deadline=None, derandomize=not os.environ.get("LBSIM_FUZZ_RANDOM"),
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])
@given(text=scenario_texts(), sets=st.one_of(st.just([]), set_options))
def test_fuzz_run_exits_0_or_2_within_limits(text: str, sets: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        scenario = root / "s.yaml"
        scenario.write_text(text, encoding="utf-8")
        out = root / "out"
        argv = ["run", str(scenario), *(a for kv in sets for a in ("--set", kv)), "--out", str(out), "-q"]
        stderr, stdout = io.StringIO(), io.StringIO()
        previous = signal.signal(signal.SIGALRM, _alarm)
        signal.setitimer(signal.ITIMER_REAL, TIME_LIMIT_S)
        tracemalloc.start()
        try:
            with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(stdout):
                rc = main(argv)
            _current, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
        err = stderr.getvalue()
        event(f"exit {rc}")
        assert peak < MEMORY_LIMIT_BYTES, f"peak {peak / 2**20:.0f} MB for {argv}"
        assert rc in (0, 2), f"exit {rc}: {err}\n{text}\n{sets}"
        assert "Traceback" not in err
        if rc == 2:
            lines = err.strip("\n").split("\n")
            assert len(lines) == 1 and lines[0].startswith("lbsim: error: "), err
            assert sorted(p.name for p in root.iterdir()) == ["s.yaml"], "a refused run wrote something"
        else:
            assert (out / "summary.json").is_file()
            assert sorted(p.name for p in root.iterdir()) == ["out", "s.yaml"]
