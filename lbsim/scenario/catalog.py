"""Built-in catalog of EC2 instance types, models and measured per-worker performance.

The catalog is the set of default numbers a scenario can refer to by name ("4 x g4dn.xlarge
training resnet18_cifar10") instead of inventing parameters. Every figure is taken from
``docs/references.md`` (cited as "references.md §x [D#]"), except the entries lbsim
measured itself: their source names the measurement file shipped in ``data/measured/`` (GPU,
driver, torch/CUDA/cuDNN versions and date inside it, written by ``lbsim profile-model`` or ``lbsim
profile``). Anything that is not read or fitted from a source is flagged in ``note`` with "inferred:".

Compute model: one worker's iteration time for a local batch of ``b`` samples is affine,

    t(b) = t0_s + b / samples_per_s,        b <= max_batch

(references.md §1.1: R^2 >= 0.99 for ResNet-18/50 and BERT on T4/V100/A100). ``t0_s`` is the fixed
per-iteration overhead (framework, kernel launch, data loading), ``samples_per_s`` the asymptotic
throughput X; ``t0_s * samples_per_s`` is the batch at which the device reaches half of X. CPU
entries and single-point GPU figures use ``t0_s = 0`` (references.md §5.1: "I: t0 small relative to
CPU step times").

Caveat (references.md §5.1 note 1): the figures mix software stacks -- Pollux/Sia (PyTorch, AMP for
ResNet-50) for T4/V100/A100, Lambda ratios for A10G, TensorFlow 2017 / Torch7 for K80/M60 and Intel
Caffe for the c5 CPUs. Cross-family speed ratios are therefore indicative only; prefer one family per
scenario. Network figures are the *effective* per-flow bandwidth: the AWS baseline capped at the
5 Gbit/s single-flow limit (references.md §3.2), which §1.6 shows is what multi-node jobs really see.

Nodes and links: ``gpus_per_node`` is how many GPUs one instance holds (0 for CPU instances: any
number of worker processes may share one); ``bandwidth_gbps`` is the *node's* NIC (shared by the
workers a scenario puts on the node); ``intra_bandwidth_gbps`` / ``intra_latency_s`` are one hop
inside the node (PCIe / NVLink; ``None`` for one-GPU instances, which have no such hop). Where the
measured synchronisation times show the rated figures are not reached (g4dn.12xlarge, references.md
§1.6), the effective figure is used and the rated one given in the description.
``shared_node_slowdown`` is the compute slowdown per extra worker on a node
(:func:`lbsim.network.overlap.node_compute_factor`); no source gives one, so it is 0 everywhere
(calibrate it: ``lbsim calibrate``). Model profiles carry their all-reduce/backward overlap
(default: none, i.e. all communication after compute).

Any figure can be overridden inline in a scenario; (model, instance) pairs with no catalog entry
make ``performance()`` return ``None`` and must be given explicitly. ``intra_rated_gbps`` is the
intra-node link's *rated* figure where ``intra_bandwidth_gbps`` is an effective one (g4dn.12xlarge:
PCIe 3.0 x16); ``lbsim calibrate`` never fits an intra link faster than it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

from lbsim.scenario.sections import Overlap


@dataclass(frozen=True)
class InstanceType:
    """A catalog instance: accelerator, vCPUs, NIC bandwidth, GPUs per node and the intra-node link, with sources."""

    name: str
    kind: Literal["gpu", "cpu"]
    accelerator: str
    vcpus: int
    bandwidth_gbps: float
    description: str
    source: str
    gpus_per_node: int = 1
    intra_bandwidth_gbps: float | None = None
    intra_latency_s: float | None = None
    intra_rated_gbps: float | None = None  # the intra link's rated one-way figure (None: intra_bandwidth_gbps is)
    shared_node_slowdown: float = 0.0
    link_note: str = ""


@dataclass(frozen=True)
class ModelProfile:
    """A catalog model: gradient bytes and its overlap of communication with backward, with its source."""

    name: str
    gradient_bytes: int
    description: str
    source: str
    overlap: Overlap = Overlap()  # no overlap: all communication after compute


@dataclass(frozen=True)
class Performance:
    """A model on an instance: ``t(b) = t0_s + b / samples_per_s`` up to ``max_batch``, with its source."""

    model: str
    instance: str
    t0_s: float
    samples_per_s: float
    max_batch: int
    source: str
    note: str = ""


SINGLE_FLOW_CAP_GBPS = 5.0  # references.md §3.2: 5 Gbit/s per flow outside a cluster placement group

_BW = "references.md §3.1 [D18] Karpenter baseline; §3.2 [D20] AWS 5 Gbit/s single-flow cap"
_VCPU_I = "vCPU count inferred (AWS spec, not in references.md)"


def _inst(name, kind, acc, vcpus, baseline_gbps, description, source=_BW, **links):
    eff = min(baseline_gbps, SINGLE_FLOW_CAP_GBPS)
    desc = f"{description}; baseline {baseline_gbps:g} Gbit/s -> effective {eff:g} Gbit/s per flow"
    if kind == "cpu":
        links.setdefault("gpus_per_node", 0)
    return InstanceType(name, kind, acc, vcpus, eff, desc, source, **links)


# g4dn.12xlarge, the Pollux/Sia testbed (references.md §1.1, §1.6; traces README §6): 4 T4 per node,
# NIC rated 50 Gbit/s (§3.1). Measured BERT-base sync tails (§1.6, 440 MB fp32 gradient):
# 2 nodes x 1 GPU 0.76 s -> ring S / T = 4.63 Gbit/s effective between nodes;
# 1 node x 4 GPUs 93 ms -> 2 (3/4) S / T = 56.8 Gbit/s effective inside the node (a lower bound:
# part of the all-reduce may hide under backward).
_G4DN12_NIC_GBPS = round(440e6 * 8 / 0.76 / 1e9, 2)
_G4DN12_PCIE_GBPS = round(2 * 3 / 4 * 440e6 * 8 / 0.093 / 1e9, 1)
_LINK_G4DN12 = ("references.md §1.6 [D1] measured BERT sync tails on g4dn (effective NIC and PCIe "
                "bandwidth); §3.1 [D18] rated 50 Gbit/s; 4x T4 per node §1.1 [D2]")
_PCIE3_X16_GBPS = round(8 * 16 * 128 / 130, 1)  # PCIe 3.0 x16 one way: 126.0 Gbit/s
_LAT_I = "inferred: per-hop latency 10 us inside a node (no source; NCCL PCIe/NVLink hops are a few us)"


_INSTANCES = [
    _inst("g4dn.xlarge", "gpu", "T4 16GB", 4, 5.0,
          "1x NVIDIA T4 16 GB, 4 vCPU (references.md §5.1); burst up to 25 Gbit/s (inferred)"),
    _inst("p3.2xlarge", "gpu", "V100 16GB", 8, 2.5,
          f"1x NVIDIA V100 16 GB; burst up to 10 Gbit/s (inferred); {_VCPU_I}"),
    _inst("g5.xlarge", "gpu", "A10G 24GB", 4, 2.5,
          f"1x NVIDIA A10G 24 GB (Baseten, references.md §3.1); burst up to 10 Gbit/s (inferred); {_VCPU_I}"),
    _inst("p4d.24xlarge", "gpu", "A100 40GB", 12, 400.0 / 8,
          "modelled per GPU: one worker = 1 of the 8 A100 40 GB GPUs of a p4d.24xlarge; its share "
          "of the 400 Gbit/s node (400/8 = 50 Gbit/s) is capped at the 5 Gbit/s single-flow limit "
          "(inferred: one TCP flow per worker, no placement group/EFA); vcpus = 96/8 per GPU "
          f"({_VCPU_I})", gpus_per_node=8, intra_bandwidth_gbps=600 * 8 / 2, intra_latency_s=1e-5,
          link_note="inferred: intra = NVLink 3 (A100) 600 GB/s bidirectional per GPU, 300 GB/s = 2400 "
                    "Gbit/s one way (NVIDIA spec, not in references.md); " + _LAT_I),
    _inst("p3.16xlarge", "gpu", "V100 16GB", 64, 25.0,
          f"8x NVIDIA V100 16 GB per node (references.md §3.1), modelled per GPU, 8 per node; {_VCPU_I}",
          gpus_per_node=8, intra_bandwidth_gbps=150.0 * 8, intra_latency_s=1e-5,
          link_note="inferred: intra = NVLink 2 (V100) 300 GB/s bidirectional per GPU, 150 GB/s = 1200 "
                    "Gbit/s one way (NVIDIA spec, not in references.md); " + _LAT_I),
    _inst("p2.xlarge", "gpu", "K80 12GB", 4, 10.0 * 4 / 32,
          "1x K80 die 12 GB; AWS lists only 'High' network, so the baseline is inferred as the "
          "p2.8xlarge's 10 Gbit/s (SINGA docs) scaled by vCPUs 4/32 (§3.2: bandwidth scales with "
          f"vCPUs); {_VCPU_I}",
          "references.md §3.1 [D20] p2.8xlarge 10 Gbit/s; §3.2 [D20] vCPU scaling (inferred)"),
    _inst("g3.4xlarge", "gpu", "M60 8GB", 16, 5.0,
          f"1x NVIDIA Tesla M60 8 GB (references.md §5.1); {_VCPU_I}"),
    _inst("c5.xlarge", "cpu", "none", 4, 1.25,
          "4 vCPU Xeon (c5, references.md §5.1); burst up to 10 Gbit/s for minutes (R, §3.1)"),
    _inst("c5.4xlarge", "cpu", "none", 16, 5.0,
          "16 vCPU Xeon (c5, references.md §5.1); burst up to 10 Gbit/s for minutes (R, §3.1)"),
    _inst("c5.18xlarge", "cpu", "none", 72, 25.0,
          "72 vCPU Xeon Platinum 8124M (references.md §1.4, §5.1)"),
]
_INSTANCES.append(InstanceType(
    "g4dn.12xlarge", "gpu", "T4 16GB", 48, _G4DN12_NIC_GBPS,
    "4x NVIDIA T4 16 GB per node (the Pollux/Sia testbed, references.md §1.1 [D2]); modelled per GPU, 4 "
    f"per node; NIC rated 50 Gbit/s (§3.1), effective {_G4DN12_NIC_GBPS:g} Gbit/s between nodes and "
    f"{_G4DN12_PCIE_GBPS:g} Gbit/s over PCIe inside a node, from measured sync tails (§1.6); vcpus = 48 "
    f"per node ({_VCPU_I})",
    _LINK_G4DN12, gpus_per_node=4, intra_bandwidth_gbps=_G4DN12_PCIE_GBPS, intra_latency_s=1e-5,
    intra_rated_gbps=_PCIE3_X16_GBPS,
    link_note=_LAT_I + "; rated intra: T4 on PCIe 3.0 x16, 8 GT/s x 16 lanes x 128/130 = 126 Gbit/s one way "
                       "(NVIDIA T4 datasheet: PCIe Gen3 x16; inferred, not in references.md)"))
# p5e.48xlarge: 8 H200 per node. Its compute curves are lbsim's own measurement on one H200 (this
# project's GPU machine, not an AWS instance); the links are the AWS/NVIDIA specs, as for p4d.
_H200_DIR = "data/measured/h200_2026-11-26"
_INSTANCES.append(_inst(
    "p5e.48xlarge", "gpu", "H200 141GB", 24, 3200.0 / 8,
    "modelled per GPU: one worker = 1 of the 8 H200 141 GB GPUs of a p5e.48xlarge; its share of the 3200 "
    "Gbit/s EFA node (3200/8 = 400 Gbit/s) is capped at the 5 Gbit/s single-flow limit (inferred: one TCP "
    f"flow per worker, no EFA/NCCL plugin); vcpus = 192/8 per GPU ({_VCPU_I})",
    "inferred: AWS p5e.48xlarge spec (8x H200, 3200 Gbit/s EFA, 192 vCPU; not in references.md); "
    "references.md §3.2 [D20] AWS 5 Gbit/s single-flow cap",
    gpus_per_node=8, intra_bandwidth_gbps=450 * 8, intra_latency_s=1e-5,
    link_note="inferred: intra = NVLink 4 (H100/H200) 900 GB/s bidirectional per GPU, 450 GB/s = 3600 Gbit/s "
              "one way (NVIDIA spec, not in references.md); " + _LAT_I))
INSTANCES: Mapping[str, InstanceType] = MappingProxyType({i.name: i for i in _INSTANCES})

_MODELS = [
    ModelProfile("resnet18_cifar10", 46_800_000,
                 "ResNet-18 on CIFAR-10; 11.7 M fp32 parameters x 4 B = 46.8 MB gradient "
                 "(inferred, references.md §3.3 gives ~47 MB as I)",
                 "references.md §3.3 (I); workload as in §1.1 [D1][D2]"),
    ModelProfile("resnet50_imagenet", 98_000_000,
                 "ResNet-50 on ImageNet; fp32 parameter memory 98 MB (Lambda); note 25.6 M params "
                 "x 4 B = 102 MB, so Lambda's 'MB' may be MiB (inferred, ~4 % difference)",
                 "references.md §3.3 (R, LambdaColdStorage/lambda-tensorflow-benchmark summary.md)"),
    ModelProfile("bert_base_squad", 440_000_000,
                 "BERT-base (110 M params) SQuAD fine-tune, seq 384; 110 M x 4 B = 440 MB fp32 "
                 "gradient (inferred, references.md §3.3 / §1.6 give ~440 MB as I)",
                 "references.md §3.3 (I); workload as in §1.1 [D1][D2]"),
]
# The examples' models, measured by lbsim on a GPU (data/measured/): the DDP example's CNN and the
# runtime's MLP (hidden 4096, as scenarios/validation/cpu4.yaml), both on the bundled 8x8 digits.
_MODELS += [
    ModelProfile("digits_cnn", 605_480,
                 "examples/ddp_digits.py's Net (two 3x3 convolutions, GroupNorm, two linear layers) on 8x8 digits; "
                 "151,370 fp32 parameters x 4 B",
                 f"measured: lbsim profile-model, {_H200_DIR}/digits_cnn.json (parameter count)"),
    ModelProfile("digits_mlp", 1_228_840,
                 "the runtime's MLP (lbsim.runtime.model, hidden 4096) on 8x8 digits; 307,210 fp32 parameters x 4 B",
                 f"measured: lbsim profile, {_H200_DIR}/digits_mlp_lbsim_profile.json (gradient_bytes)"),
]
MODELS: Mapping[str, ModelProfile] = MappingProxyType({m.name: m for m in _MODELS})

# --- performance ---------------------------------------------------------------------------
_FIT = "Pollux/Sia affine fit, references.md §1.1 [D1][D2]; cap §1.2"
_CAP_I = "inferred: max_batch = largest profiled local_bsz (that it is a memory limit is I, §1.2)"
_V100_NOTE = ("inferred: fit from the V100-32GB (Azure ND40rs_v2) profile applied to the 16 GB V100 "
              "of p3.2xlarge (same compute); cap = half of the 32 GB profile's max, as references.md "
              "§5.1 suggests")

# A10G (g5): scale the V100 curve, t(b) -> t(b)/r. Ratios from Lambda A10 vs V100 16 GB (§1.3 [D3]),
# precision-matched: ResNet-18/CIFAR (Pollux FP32) uses FP32 349/369; ResNet-50 (Pollux AMP) FP16 638/833.
_A10_FP32 = round(349 / 369, 2)  # 0.95, the ratio references.md §5.1 names
_A10_FP16 = round(638 / 833, 2)  # 0.77

# K80 ResNet-50 (TF 2017, references.md §1.3 [D5]): 49.0 img/s at b=32, 51.5 at b=64 -> solve t(32), t(64).
_K80_T32, _K80_T64 = 32 / 49.0, 64 / 51.5
_K80_X = (64 - 32) / (_K80_T64 - _K80_T32)  # ~54.3 img/s
_K80_T0 = _K80_T32 - 32 / _K80_X  # ~0.063 s

# c5 CPUs: c5.18xlarge ~69 img/s (DAWNBench Intel Caffe, §1.3/§1.4 [D7]); smaller c5 scaled by the
# measured sub-linear vCPU law of the Keras simple-CNN (MXNet-MKL, §5.1 [D8]): c5.xlarge 223-253 vs
# c5.18xlarge 845-936 img/s -> midpoints 238 / 890.5 for 18x the vCPUs -> X ~ vcpus**0.456.
_C5_X = 69.0
_C5_EXP = math.log(238 / 890.5) / math.log(4 / 72)


def _c5(vcpus: int) -> float:
    return round(_C5_X * (vcpus / 72) ** _C5_EXP, 1)


_CPU_SRC = "DAWNBench Intel Caffe, references.md §1.3/§1.4 [D7]; scaling §5.1 [D8]"
_CPU_CAP = "inferred: cap 1024 (CPU host memory is not the limit at realistic batches)"
_CPU_T0 = "inferred: t0 = 0 (references.md §5.1: t0 small relative to CPU step times)"

_PERF = [
    # T4 (g4dn.xlarge): fits reproduce the shipped pollux_osdi21_t4_step_time files.
    Performance("resnet18_cifar10", "g4dn.xlarge", 0.0177, 1505, 1024, _FIT, _CAP_I),
    Performance("resnet50_imagenet", "g4dn.xlarge", 0.0797, 238, 200, _FIT,
                _CAP_I + "; ResNet-50 with apex AMP"),
    Performance("bert_base_squad", "g4dn.xlarge", 0.2267, 17.3, 12, _FIT,
                _CAP_I + "; fit over b = 4..12 only"),
    # T4 on the 4-GPU g4dn.12xlarge (the node the Pollux files were measured on): the same fits
    Performance("resnet18_cifar10", "g4dn.12xlarge", 0.0177, 1505, 1024, _FIT, _CAP_I),
    Performance("resnet50_imagenet", "g4dn.12xlarge", 0.0797, 238, 200, _FIT,
                _CAP_I + "; ResNet-50 with apex AMP"),
    Performance("bert_base_squad", "g4dn.12xlarge", 0.2267, 17.3, 12, _FIT,
                _CAP_I + "; fit over b = 4..12 only"),
    # V100 (p3.2xlarge)
    Performance("resnet18_cifar10", "p3.2xlarge", 0.0702, 5482, 1536, _FIT, _V100_NOTE + " (3072/2)"),
    Performance("resnet50_imagenet", "p3.2xlarge", 0.1138, 775, 300, _FIT,
                _V100_NOTE + " (600/2); AMP. FP32 cross-check: Lambda 369 img/s, Gavel 320 at b=128 "
                "(§1.3 [D3][D4])"),
    Performance("bert_base_squad", "p3.2xlarge", 0.1068, 48.1, 18, _FIT,
                _V100_NOTE + " (36/2); Lambda ran BERT-base FP32 at 24 on V100 16 GB (§1.2 [D3])"),
    # V100 on the 8-GPU p3.16xlarge: the p3.2xlarge curves (same GPU)
    Performance("resnet18_cifar10", "p3.16xlarge", 0.0702, 5482, 1536, _FIT, _V100_NOTE + " (3072/2)"),
    Performance("resnet50_imagenet", "p3.16xlarge", 0.1138, 775, 300, _FIT, _V100_NOTE + " (600/2); AMP"),
    Performance("bert_base_squad", "p3.16xlarge", 0.1068, 48.1, 18, _FIT, _V100_NOTE + " (36/2)"),
    # A100 (one GPU of p4d.24xlarge)
    Performance("resnet18_cifar10", "p4d.24xlarge", 0.0271, 10828, 4096, _FIT,
                _CAP_I + "; Sia DGX-A100 profile"),
    Performance("resnet50_imagenet", "p4d.24xlarge", 0.1192, 1244, 800, _FIT,
                _CAP_I + "; Sia DGX-A100 profile; AMP"),
    Performance("bert_base_squad", "p4d.24xlarge", 0.1195, 218, 48, _FIT,
                _CAP_I + "; Sia DGX-A100 profile"),
    # A10G (g5.xlarge): scaled V100 curve
    Performance("resnet18_cifar10", "g5.xlarge", round(0.0702 / _A10_FP32, 4), round(5482 * _A10_FP32),
                2048, "V100 fit references.md §1.1 [D2] x Lambda A10/V100 ratio §1.3/§5.1 [D3]; cap §1.2",
                f"inferred: V100 curve scaled by Lambda A10/V100 FP32 ResNet-50 ratio {_A10_FP32} "
                "(t0/r, X*r; A10 used for A10G, §1.3); inferred: cap from the 24 GB Quadro RTX 6000 "
                "Sia profile (2048)"),
    Performance("resnet50_imagenet", "g5.xlarge", round(0.1138 / _A10_FP16, 4), round(775 * _A10_FP16),
                400, "V100 fit references.md §1.1 [D2] x Lambda A10/V100 ratio §1.3 [D3]; cap §1.2",
                f"inferred: V100 AMP curve scaled by Lambda A10/V100 FP16 ResNet-50 ratio {_A10_FP16} "
                "(precision-matched; FP32 ratio would be 0.95; Lambda A10 FP16 = 638 img/s at b=448); "
                "inferred: cap from the 24 GB Quadro RTX 6000 Sia profile (400)"),
    # K80 (p2.xlarge), TensorFlow 2017
    Performance("resnet50_imagenet", "p2.xlarge", round(_K80_T0, 4), round(_K80_X, 1), 64,
                "TF 2017 benchmarks, references.md §1.3 [D5]; cap §1.2 [D5]",
                "inferred: cap 64 = the batch TF ran ResNet-50 at on one K80 die (memory-driven "
                "choice is I, §1.2); two-point fit through 49.0 img/s at b=32 and 51.5 at b=64 (FP32, "
                "synthetic data); Gavel (37-44 img/s) and Torch7 (40 at "
                "b=16) are slower (§1.3 [D4][D6])"),
    # M60 (g3.4xlarge), Torch7
    Performance("resnet50_imagenet", "g3.4xlarge", 0.0, round(16000 / 265.0, 1), 32,
                "Paperspace Torch7 cnn-benchmarks, references.md §1.3 [D6]; cap §1.2",
                "inferred: t0 = 0 (single point, no batch sweep): 265.0 ms fwd+bwd at b=16 = "
                "60.4 img/s; inferred: cap 32 for 8 GB (an 8 GB RTX 2080 ran ResNet-101 at 32, OOM at 64)"),
    # c5 CPUs, Intel Caffe
    Performance("resnet50_imagenet", "c5.18xlarge", 0.0, _C5_X, 1024, _CPU_SRC,
                _CPU_T0 + "; " + _CPU_CAP + "; 69 img/s per node in the 128-node DAWNBench run "
                "(73 with 64 nodes)"),
    Performance("resnet50_imagenet", "c5.4xlarge", 0.0, _c5(16), 1024, _CPU_SRC,
                f"inferred: 69 x (16/72)^{_C5_EXP:.3f} (sub-linear vCPU scaling, §5.1); "
                + _CPU_T0 + "; " + _CPU_CAP),
    Performance("resnet50_imagenet", "c5.xlarge", 0.0, _c5(4), 1024, _CPU_SRC,
                f"inferred: 69 x (4/72)^{_C5_EXP:.3f} (sub-linear vCPU scaling, §5.1); "
                + _CPU_T0 + "; " + _CPU_CAP),
]
# H200 (one GPU of p5e.48xlarge): lbsim's own measurements (lbsim profile-model / lbsim profile on an
# NVIDIA H200, driver 580.159.04, torch 2.11.0+cu130, CUDA 13.0, cuDNN 9.19, 2026-11-26; the files hold
# every timed size, the fit's R^2 and residuals). max_batch: the peak allocated memory of a step, affine
# in b, extrapolated to 90 % of the GPU's memory (an estimate, not an observed OOM).
_H200_SRC = "measured: lbsim profile-model on one NVIDIA H200 (torch 2.11.0+cu130, CUDA 13.0, driver 580.159.04), 2026-11-26"
_PERF += [
    Performance("resnet50_imagenet", "p5e.48xlarge", 0.007535, 2589, 3011, f"{_H200_SRC}, {_H200_DIR}/resnet50_bf16.json",
                "inferred: max_batch extrapolated from peak memory. torchvision resnet50 (no weights), 3x224x224, "
                "bf16 autocast (the other GPUs' entries are apex AMP fp16), NCHW, batches 32-256, median of 10 "
                "steps each, R^2 0.997; fp32 (TF32 convolutions): t0 0.00638 s, X 2318 img/s, cap ~1554 "
                f"({_H200_DIR}/resnet50_fp32.json)"),
    Performance("digits_cnn", "p5e.48xlarge", 0.001777, 2209460, 65536, f"{_H200_SRC}, {_H200_DIR}/digits_cnn.json",
                "inferred: max_batch is profile-model's bound (65536), memory would allow more. fp32, batches "
                "256-16384, median of 10 steps, R^2 0.993: launch-bound below ~1024 samples (2.2 ms flat), so "
                "the affine curve is off by up to 13 % there"),
    Performance("digits_mlp", "p5e.48xlarge", 0.001613, 7159690, 1024, f"measured: lbsim profile on one NVIDIA H200 "
                f"(1 NCCL rank, torch 2.11.0+cu130), 2026-11-26, {_H200_DIR}/digits_mlp_lbsim_profile.json",
                "inferred: max_batch = the scenario's cap, not a memory limit. The runtime's training step at "
                "batches 512-1024, trimmed means of 8 rounds: launch-bound (1.69-1.76 ms), so X is poorly determined"),
]
# Deliberately absent (no defensible figure in references.md): resnet18_cifar10 on K80/M60/CPU
# (only 224x224 Torch7 or noisy Gavel points, §1.3), bert_base_squad on A10G (Lambda A10/V100 ratio
# is 1.67 in FP32 but 0.71 in FP16), K80, M60 and CPUs.
PERFORMANCE: Mapping[tuple[str, str], Performance] = MappingProxyType(
    {(p.model, p.instance): p for p in _PERF})


def instance_names() -> list[str]:
    """Every catalog instance type, sorted."""
    return sorted(INSTANCES)


def model_names() -> list[str]:
    """Every catalog model, sorted."""
    return sorted(MODELS)


def performance(model: str, instance: str) -> Performance | None:
    """The sourced step-time curve of ``model`` on ``instance``, if the catalog has one."""
    return PERFORMANCE.get((model, instance))


def _fmt(x: float) -> str:
    return f"{x:g}"


def catalog_rows() -> list[dict[str, str]]:
    """One row per PERFORMANCE entry (sorted by model, instance), all values as strings."""
    rows = []
    for (model, instance), p in sorted(PERFORMANCE.items()):
        inst = INSTANCES[instance]
        rows.append({
            "model": model,
            "instance": instance,
            "kind": inst.kind,
            "accelerator": inst.accelerator,
            "t0_s": _fmt(p.t0_s),
            "samples_per_s": _fmt(p.samples_per_s),
            "max_batch": str(p.max_batch),
            "bandwidth_gbps": _fmt(inst.bandwidth_gbps),
            "source": p.source,
        })
    return rows
