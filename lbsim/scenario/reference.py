"""The scenario reference page, generated from the schema's own help texts and defaults.

``python -m lbsim.scenario.reference > docs/scenarios.md`` regenerates it; a test checks the
committed page is current, so the docs cannot drift from the code.
"""

from __future__ import annotations

from lbsim.contention.config import contention_configs
from lbsim.fields import help_rows
from lbsim.samples.config import SampleCostConfig, length_configs
from lbsim.scenario.calibration_config import CalibrationDomain, CalibrationInfo, CalibrationInterval
from lbsim.scenario.data import DataConfig, DataPlacement, StorageNode
from lbsim.scenario.nccl_section import NcclModel, NcclProtocol
from lbsim.scenario.schema import Scenario
from lbsim.scenario.sections import Cluster, Overlap, WorkerGroup, Workload, network_configs
from lbsim.schemes.registry import scheme_configs, scheme_summary

INTRO = """# Scenario reference

A scenario is one YAML file. This page is generated from the schema
(`python -m lbsim.scenario.reference > docs/scenarios.md`); every key, its type, default and meaning.
Unknown keys are errors. Any key can be overridden on the command line with
`--set dotted.key=value` (the value is parsed as YAML; list items by index:
`--set cluster.groups.0.count=4`). Sections picked by `name:` are listed per variant.
"""


SAMPLE_COST_INTRO = (
    "Optional (default `null`: every sample costs the same). Samples of different lengths: each round's "
    "samples are a seeded draw from the length distribution, a sample of L tokens costs c(L) / c(L_ref) "
    "reference samples with c(L) = c0 + a L + b L^2 (docs/sample-cost.md)."
)

DATA_INTRO = (
    "Optional (default `null`: data are local and free, no fetch stage). Each worker reads its batch's "
    "samples before computing: local ones from its own shard, the rest from the storage node "
    "(cost model and sampling rules: `lbsim/fetch.py`). The local shares over all workers sum to at most 1."
)


OVERLAP_INTRO = (
    "Gradients are reduced in buckets during backward; of an all-reduce of `c` seconds after a step of `t` "
    "seconds of compute only `max(tail_share c, c - hide_share t)` delays the step (`lbsim/network/overlap.py`). "
    "All-reduce only: a parameter-server push follows the whole batch, so PS schemes never overlap."
)

NODES_INTRO = (
    "Workers sit `workers_per_node` to a node (default 1: each alone, as before nodes existed). A node's NIC "
    "(`bandwidth_gbps`, `nic_latency_s`) is shared by its workers; a hop between two of them crosses the intra-node "
    "link (`intra_bandwidth_gbps`, `intra_latency_s`: PCIe / NVLink). Unset figures come from the catalog instance. "
    "Network contention on a worker slows its node's links (the most slowed worker sets the pace). "
    "All-reduce formulas: `lbsim/network/collectives.py`."
)

NETWORK_INTRO = (
    "Parameter-server schemes (asp, ssp, dssp, elastic_bsp, wbsp, and bsp with `backup_workers`) need "
    "`parameter_server`; the other schemes run on either. `lbsim compare --cross-family` runs each scheme on its "
    "family's network: the scenario's own where it is of that kind, else one derived from it — from an all-reduce, "
    "a parameter server of one shard per worker node, each with the fastest node's NIC, `latency_s` = `alpha_s`; "
    "from a parameter server, the flat ring over the nodes' own NICs, `alpha_s` = `latency_s` "
    "(docs/design.md, Cross-family compare; `--network-variant KIND.KEY=VALUE` overrides a derived key)."
)

_YAML_WORDS = {"None": "null", "True": "true", "False": "false", "()": "[]"}


def _default(text: str) -> str:
    if text.startswith("{"):
        return "(see below)"
    return _YAML_WORDS.get(text, text)


CALIBRATION_INTRO = (
    "Optional (default `null`), written by `lbsim calibrate` into `fit.yaml`: the placements the figures were "
    "fitted on, what they exercised and the leave-one-placement-out interval (docs/validation.md). The engines "
    "never read it; `lbsim run` prints the mean iteration with its interval and flags a scenario whose nodes or "
    "per-GPU batch lie outside the fit placements' range."
)


def _table(rows: list[tuple[str, str, str, str]]) -> list[str]:
    out = ["| key | type | default | meaning |", "|---|---|---|---|"]
    for key, tp, default, text in rows:
        out.append(f"| `{key}` | {tp} | `{_default(default)}` | {text} |")
    return out + [""]


def reference_markdown() -> str:
    """The scenario reference (``docs/scenarios.md``), generated from the schema."""
    lines = [INTRO, "## Top level", ""]
    top = [r for r in help_rows(Scenario) if r[0] not in ("scheme", "network", "contention")]
    lines += _table(top + [
        ("network", "a mapping with `name`", "parameter_server", "communication model (below)"),
        ("contention", "a list of mappings with `name`", "[]", "slowdowns injected into workers (below)"),
        ("scheme", "a mapping with `name`", "bsp", "synchronization scheme (below; `lbsim schemes`)"),
    ])
    lines += ["## `workload`", ""] + _table(help_rows(Workload, "workload."))
    lines += ["### `workload.overlap`", "", OVERLAP_INTRO, ""] + _table(help_rows(Overlap, "workload.overlap."))
    lines += ["### `workload.sample_cost`", "", SAMPLE_COST_INTRO, ""] + _table(
        help_rows(SampleCostConfig, "workload.sample_cost."))
    for name, cls in sorted(length_configs().items()):
        lines += [f"#### `workload.sample_cost.lengths: {{name: {name}}}`", "", (cls.__doc__ or "").strip().splitlines()[0], ""]
        lines += _table(help_rows(cls, "workload.sample_cost.lengths."))
    lines += ["## `cluster`", ""] + _table(help_rows(Cluster, "cluster."))
    lines += ["### `cluster.groups[]`", "", NODES_INTRO, ""] + _table(help_rows(WorkerGroup, "cluster.groups[]."))
    lines += ["## `data`", "", DATA_INTRO, ""] + _table(help_rows(DataConfig, "data."))
    lines += ["### `data.placement[]`", ""] + _table(help_rows(DataPlacement, "data.placement[]."))
    lines += ["### `data.storage`", ""] + _table(help_rows(StorageNode, "data.storage."))
    lines += ["## `calibration`", "", CALIBRATION_INTRO, ""] + _table(help_rows(CalibrationInfo, "calibration."))
    lines += ["### `calibration.domain`", ""] + _table(help_rows(CalibrationDomain, "calibration.domain."))
    lines += ["### `calibration.interval`", ""] + _table(help_rows(CalibrationInterval, "calibration.interval."))
    for title, registry, prefix in (
        ("network", network_configs(), "network."),
        ("contention", contention_configs(), "contention[]."),
        ("scheme", scheme_configs(), "scheme."),
    ):
        lines += [f"## `{title}`", ""] + ([NETWORK_INTRO, ""] if title == "network" else [])
        for name, cls in sorted(registry.items()):
            doc = scheme_summary(name) if title == "scheme" else (cls.__doc__ or "").strip().splitlines()[0]
            lines += [f"### `{title}: {{name: {name}}}`", ""]
            if doc and not doc.startswith(cls.__name__ + "("):
                lines += [doc, ""]
            rows = help_rows(cls, prefix)
            lines += _table(rows) if rows else ["(no parameters)", ""]
            if name == "ring_allreduce":
                lines += ["#### `network.nccl` (algorithm `nccl_fitted`)", "", (NcclModel.__doc__ or "").strip(), ""]
                lines += _table(help_rows(NcclModel, "network.nccl."))
                lines += _table(help_rows(NcclProtocol, "network.nccl.{LL,LL128,Simple}."))
    return "\n".join(lines).rstrip() + "\n"


if __name__ == "__main__":  # pragma: no cover
    print(reference_markdown(), end="")
