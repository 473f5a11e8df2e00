"""Tests for lbsim.scenario.catalog: provenance, consistency and fidelity to references.md."""

import csv
import dataclasses
import re
import statistics
from collections import defaultdict
from pathlib import Path

import pytest

from lbsim.scenario import catalog
from lbsim.scenario.catalog import INSTANCES, MODELS, PERFORMANCE, performance


def step_time(p, b):
    return p.t0_s + b / p.samples_per_s


REPO = Path(__file__).resolve().parents[1]


def _measured_file(source: str) -> Path | None:
    """The shipped measurement a "measured:" source names (``data/measured/...json``), if any."""
    m = re.search(r"(data/measured/\S+\.json)", source)
    return REPO / m.group(1) if m else None


def test_every_entry_has_a_source_citing_real_data_or_a_shipped_measurement():
    for entry in [*INSTANCES.values(), *MODELS.values(), *PERFORMANCE.values()]:
        assert entry.source.strip(), entry
        if entry.source.startswith("measured:"):
            path = _measured_file(entry.source)
            assert path is not None and path.is_file(), entry  # the measurement ships with lbsim
        else:
            assert "references.md §" in entry.source, entry
    for p in PERFORMANCE.values():
        if not p.source.startswith("measured:"):
            assert re.search(r"\[D\d+\]", p.source), p  # names the data key, not just the section


def test_measured_entries_are_the_fits_in_their_files():
    """A measured catalog curve is the fit its file holds (to the digits the catalog keeps)."""
    import json

    checked = 0
    for p in PERFORMANCE.values():
        path = _measured_file(p.source)
        if path is None:
            continue
        record = json.loads(path.read_text(encoding="utf-8"))
        if "samples_per_s" in record:  # lbsim profile-model
            t0, x = record["t0_s"], record["samples_per_s"]
        else:  # lbsim profile: one group
            t0, x = record["groups"][0]["t0_s"], record["groups"][0]["samples_per_s"]
        assert p.t0_s == pytest.approx(t0, rel=1e-3) and p.samples_per_s == pytest.approx(x, rel=1e-3), p
        checked += 1
    assert checked >= 3


def test_inferred_figures_are_flagged():
    for p in PERFORMANCE.values():
        if "inferred" in p.note:
            assert p.note.startswith("inferred:"), p
    # entries built from scaling, single points or guessed caps must say so
    for key in [("resnet18_cifar10", "p3.2xlarge"), ("resnet18_cifar10", "g5.xlarge"),
                ("resnet50_imagenet", "g5.xlarge"), ("resnet50_imagenet", "g3.4xlarge"),
                ("resnet50_imagenet", "c5.xlarge"), ("resnet50_imagenet", "c5.4xlarge")]:
        assert PERFORMANCE[key].note.startswith("inferred:"), key


def test_numbers_positive():
    for i in INSTANCES.values():
        assert i.vcpus > 0 and i.bandwidth_gbps > 0
    for m in MODELS.values():
        assert m.gradient_bytes > 0
    for p in PERFORMANCE.values():
        assert p.t0_s >= 0 and p.samples_per_s > 0 and p.max_batch > 0, p
        assert step_time(p, 1) > 0


def test_keys_are_consistent():
    assert all(k == v.name for k, v in INSTANCES.items())
    assert all(k == v.name for k, v in MODELS.items())
    for (model, instance), p in PERFORMANCE.items():
        assert (p.model, p.instance) == (model, instance)
        assert model in MODELS and instance in INSTANCES


def test_required_content_present():
    for name in ["g4dn.xlarge", "p3.2xlarge", "g5.xlarge", "p4d.24xlarge", "p2.xlarge",
                 "g3.4xlarge", "c5.xlarge", "c5.4xlarge", "c5.18xlarge"]:
        assert name in INSTANCES
    assert set(MODELS) >= {"resnet18_cifar10", "resnet50_imagenet", "bert_base_squad"}
    assert catalog.instance_names() == sorted(INSTANCES)
    assert catalog.model_names() == sorted(MODELS)
    for i in INSTANCES.values():
        assert (i.kind == "cpu") == (i.accelerator == "none")


def test_gradient_sizes_match_section_3_3():
    assert MODELS["resnet50_imagenet"].gradient_bytes == 98_000_000
    assert MODELS["resnet18_cifar10"].gradient_bytes == pytest.approx(11.7e6 * 4)
    assert MODELS["bert_base_squad"].gradient_bytes == 440_000_000


def test_effective_bandwidth_respects_single_flow_cap():
    for i in INSTANCES.values():
        assert i.bandwidth_gbps <= catalog.SINGLE_FLOW_CAP_GBPS
    assert INSTANCES["g4dn.xlarge"].bandwidth_gbps == 5.0
    assert INSTANCES["p3.2xlarge"].bandwidth_gbps == 2.5    # baseline below the cap
    assert INSTANCES["c5.xlarge"].bandwidth_gbps == 1.25
    assert INSTANCES["c5.18xlarge"].bandwidth_gbps == 5.0   # 25 Gbit/s baseline, capped
    assert INSTANCES["p4d.24xlarge"].bandwidth_gbps == 5.0  # 400/8 per GPU, capped


@pytest.mark.parametrize("b, measured", [(64, 0.060), (513, 0.355), (32, 0.043), (1024, 0.702)])
def test_t4_resnet18_fit_reproduces_pollux_medians(b, measured):
    # medians printed in references.md §1.1 for the T4 ResNet-18/CIFAR-10 profile
    p = performance("resnet18_cifar10", "g4dn.xlarge")
    assert step_time(p, b) == pytest.approx(measured, rel=0.10)


@pytest.mark.parametrize("model, instance, b, measured", [
    ("resnet50_imagenet", "g4dn.xlarge", 200, 0.924),
    ("resnet50_imagenet", "p3.2xlarge", 163, 0.312),     # V100-32GB profile
    ("resnet50_imagenet", "p4d.24xlarge", 800, 0.774),
    ("resnet18_cifar10", "p4d.24xlarge", 4096, 0.407),
    ("bert_base_squad", "g4dn.xlarge", 12, 0.922),
])
def test_other_fits_reproduce_section_1_1_medians(model, instance, b, measured):
    assert step_time(performance(model, instance), b) == pytest.approx(measured, rel=0.10)


def test_k80_two_point_fit_reproduces_tf_benchmarks():
    p = performance("resnet50_imagenet", "p2.xlarge")
    assert 32 / step_time(p, 32) == pytest.approx(49.0, rel=0.01)
    assert 64 / step_time(p, 64) == pytest.approx(51.5, rel=0.01)
    assert p.max_batch == 64


def _raw_t4_trace():
    return Path(__file__).resolve().parents[1] / "data" / "pollux_t4" / "cifar10_placements.csv"  # shipped


def test_t4_resnet18_fit_against_raw_trace():
    times = defaultdict(list)
    with open(_raw_t4_trace()) as fh:
        for row in csv.DictReader(fh):
            if row["placement"] == "1":
                times[int(row["local_bsz"])].append(float(row["step_time"]))
    p = performance("resnet18_cifar10", "g4dn.xlarge")
    assert max(times) == p.max_batch
    for b, ts in times.items():
        assert step_time(p, b) == pytest.approx(statistics.median(ts), rel=0.10), b


def test_faster_gpus_have_higher_throughput():
    x = {i: performance("resnet50_imagenet", i).samples_per_s
         for i in ["p4d.24xlarge", "p3.2xlarge", "g4dn.xlarge", "p2.xlarge"]}
    assert x["p4d.24xlarge"] > x["p3.2xlarge"] > x["g4dn.xlarge"] > x["p2.xlarge"]
    r18 = {i: performance("resnet18_cifar10", i).samples_per_s
           for i in ["p4d.24xlarge", "p3.2xlarge", "g4dn.xlarge"]}
    assert r18["p4d.24xlarge"] > r18["p3.2xlarge"] > r18["g4dn.xlarge"]
    # §1.3: M60 is 1.3x-1.75x faster than K80 (Torch7); our figures come from different stacks
    assert performance("resnet50_imagenet", "g3.4xlarge").samples_per_s > x["p2.xlarge"]


def test_cpu_scaling_is_sub_linear():
    x = {i: performance("resnet50_imagenet", i).samples_per_s
         for i in ["c5.xlarge", "c5.4xlarge", "c5.18xlarge"]}
    assert x["c5.18xlarge"] == 69.0
    assert x["c5.xlarge"] < x["c5.4xlarge"] < x["c5.18xlarge"]
    per_vcpu = [x[i] / INSTANCES[i].vcpus for i in ["c5.xlarge", "c5.4xlarge", "c5.18xlarge"]]
    assert per_vcpu[0] > per_vcpu[1] > per_vcpu[2]
    assert 3.3 <= x["c5.18xlarge"] / x["c5.xlarge"] <= 4.2  # measured Keras ratio range, §5.1
    # every CPU is slower than the slowest GPU on the same model
    assert x["c5.18xlarge"] < performance("resnet50_imagenet", "p4d.24xlarge").samples_per_s


def test_memory_caps_follow_device_memory():
    def cap(m, i):
        return performance(m, i).max_batch
    for m in ["resnet18_cifar10", "resnet50_imagenet", "bert_base_squad"]:
        assert cap(m, "p3.2xlarge") < cap(m, "p4d.24xlarge")  # 16 GB < 40 GB
    assert cap("resnet50_imagenet", "g3.4xlarge") <= cap("resnet50_imagenet", "p2.xlarge")


def test_missing_pairs_return_none():
    assert performance("resnet18_cifar10", "c5.xlarge") is None
    assert performance("bert_base_squad", "p2.xlarge") is None
    assert performance("no_such_model", "g4dn.xlarge") is None


def test_catalog_rows_cover_every_entry():
    rows = catalog.catalog_rows()
    assert len(rows) == len(PERFORMANCE)
    assert {(r["model"], r["instance"]) for r in rows} == set(PERFORMANCE)
    keys = {"model", "instance", "kind", "accelerator", "t0_s", "samples_per_s", "max_batch",
            "bandwidth_gbps", "source"}
    for r in rows:
        assert set(r) == keys
        assert all(isinstance(v, str) and v for v in r.values())
        p = PERFORMANCE[(r["model"], r["instance"])]
        assert float(r["t0_s"]) == pytest.approx(p.t0_s)
        assert float(r["samples_per_s"]) == pytest.approx(p.samples_per_s)
        assert int(r["max_batch"]) == p.max_batch
        assert float(r["bandwidth_gbps"]) == INSTANCES[r["instance"]].bandwidth_gbps
    row = next(r for r in rows if (r["model"], r["instance"]) == ("resnet18_cifar10", "g4dn.xlarge"))
    assert (row["t0_s"], row["samples_per_s"], row["bandwidth_gbps"]) == ("0.0177", "1505", "5")


def test_mappings_and_entries_are_read_only():
    with pytest.raises(TypeError):
        INSTANCES["x"] = INSTANCES["g4dn.xlarge"]
    with pytest.raises(TypeError):
        MODELS["x"] = MODELS["resnet18_cifar10"]
    with pytest.raises(TypeError):
        PERFORMANCE[("a", "b")] = next(iter(PERFORMANCE.values()))
    with pytest.raises(TypeError):
        del PERFORMANCE[("resnet18_cifar10", "g4dn.xlarge")]
    with pytest.raises(dataclasses.FrozenInstanceError):
        performance("resnet18_cifar10", "g4dn.xlarge").samples_per_s = 1.0


def test_nodes_and_links() -> None:
    from lbsim.scenario.sections import Overlap

    g = INSTANCES["g4dn.12xlarge"]  # the Pollux/Sia testbed
    assert (g.gpus_per_node, g.accelerator) == (4, "T4 16GB")
    # effective figures from the measured BERT-base sync tails (references.md §1.6), not the rated 50 Gbit/s:
    # 2 nodes x 1 GPU: 440 MB in 0.76 s; 1 node x 4 GPUs: 2 (3/4) 440 MB in 93 ms
    assert g.bandwidth_gbps == pytest.approx(440e6 * 8 / 0.76 / 1e9, abs=0.01)
    assert g.intra_bandwidth_gbps == pytest.approx(2 * 0.75 * 440e6 * 8 / 0.093 / 1e9, abs=0.1)
    assert "rated 50 Gbit/s" in g.description and "§1.6" in g.source
    assert INSTANCES["p4d.24xlarge"].gpus_per_node == 8 and INSTANCES["p3.16xlarge"].gpus_per_node == 8
    for i in INSTANCES.values():
        assert (i.gpus_per_node > 1) == (i.intra_bandwidth_gbps is not None), i.name
        if i.intra_bandwidth_gbps is not None:
            assert i.intra_latency_s is not None and i.link_note.startswith("inferred:")
        assert i.gpus_per_node == (0 if i.kind == "cpu" else i.gpus_per_node) >= 0
        assert i.shared_node_slowdown == 0.0  # no source gives one: calibrate it
    for m in MODELS.values():
        assert m.overlap == Overlap()  # no overlap unless a scenario (or calibration) says so
    for many, one in [("g4dn.12xlarge", "g4dn.xlarge"), ("p3.16xlarge", "p3.2xlarge")]:  # same GPU, same curve
        for model in MODELS:
            a, b = performance(model, many), performance(model, one)
            assert (a is None) == (b is None), model
            if a is None or b is None:  # a model measured on neither (the examples' models: on the H200 only)
                continue
            assert (a.t0_s, a.samples_per_s, a.max_batch) == (b.t0_s, b.samples_per_s, b.max_batch)
