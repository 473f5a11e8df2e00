"""The runtime's CUDA paths: ranks computing on a GPU, over gloo (sharing it) and over NCCL.

Skipped where no CUDA GPU is visible (CI); run on a GPU machine with ``pytest -q -k "cuda or nccl or
gpu"`` (docs/runtime.md, "On a GPU"). What they check:

* ``--backend gloo --device cuda`` with 2 ranks on one GPU: every tensor of the training loop lives
  on the GPU, collectives go through host memory (gloo gathers no CUDA tensors), and the run equals
  the CPU run of the same scenario (float64: the same samples, the same batches, weights within 1e-9)
  (a fixed split); LB-BSP's ``gpu_model`` variant and LOFT's median aggregation (its all_to_all) run;
* a 1-rank NCCL run and LB-BSP's ``gpu_model`` variant on the GPU.

The CPU half of the option (the checks before launch) is tested in CI: ``--device cuda`` without a
GPU, ``--backend nccl --device cpu`` and a parameter-server scheme on CUDA are exit 2.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("psutil")

from lbsim.cli import main  # noqa: E402
from lbsim.runtime.config import RuntimeOptions  # noqa: E402
from lbsim.runtime.launch import launch  # noqa: E402
from lbsim.runtime.worker import Job, Task  # noqa: E402

GPUS = torch.cuda.device_count() if torch.cuda.is_available() else 0
needs_gpu = pytest.mark.skipif(GPUS < 1, reason="no CUDA GPU")
REPO = Path(__file__).resolve().parents[1]
CPU4 = REPO / "scenarios" / "validation" / "cpu4.yaml"


def _scenario(tmp_path: Path) -> Path:
    text = (
        "name: cuda2\nseed: 3\n"
        "workload: {model: resnet50_imagenet, global_batch: 48, updates: 6}\n"
        "cluster:\n  groups:\n"
        "    - {instance: c5.xlarge, count: 1, t0_s: 0.0, samples_per_s: 1000, max_batch: 512}\n"
        "    - {instance: c5.xlarge, count: 1, t0_s: 0.0, samples_per_s: 3000, max_batch: 512}\n"
        "network: {name: ring_allreduce}\n"
        "numerics: {model: mlp, hidden: 32, learning_rate: 0.3}\n"
        "scheme: {name: static}\n"
    )
    path = tmp_path / "cuda2.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def _weights(run: Path) -> torch.Tensor:
    return torch.load(run / "model.pt")["w"].double()


@needs_gpu
def test_gloo_ranks_sharing_one_gpu_train_as_on_the_cpu(tmp_path: Path) -> None:
    path = _scenario(tmp_path)
    tasks = (Task("train", str(tmp_path / "static"), scheme="static"),
             Task("train", str(tmp_path / "gpu_model"), scheme="lbbsp", overrides=("scheme.variant=gpu_model",)),
             Task("train", str(tmp_path / "median"), scheme="loft",
                  overrides=("scheme.aggregation=median", "scheme.tolerance_f=0")))
    for device in ("cuda", "cpu"):
        out = tmp_path / device
        launch(Job(scenario=str(path), options=RuntimeOptions(backend="gloo", device=device, dtype="float64"),  # type: ignore[arg-type]
                   tasks=tuple(Task(t.kind, str(out / Path(t.out).name), scheme=t.scheme, overrides=t.overrides) for t in tasks)), 2)
    for name in ("static",):  # a fixed split: the same samples, so the same weights
        cuda, cpu = tmp_path / "cuda" / name, tmp_path / "cpu" / name
        s = json.loads((cuda / "summary.json").read_text())
        assert s["runtime"]["device"] == "cuda:0" and s["runtime"]["backend"] == "gloo"
        assert s["runtime"]["replicas_identical"] is True and s["updates"] == 6
        assert (cuda / "iterations.csv").read_text().count("\n") == (cpu / "iterations.csv").read_text().count("\n")
        assert torch.allclose(_weights(cuda), _weights(cpu), rtol=0, atol=1e-9), name
    for name in ("gpu_model", "median"):  # decided from measured times: they ran, on the GPU, replicas equal
        s = json.loads((tmp_path / "cuda" / name / "summary.json").read_text())
        assert s["updates"] == 6 and s["runtime"]["device"] == "cuda:0" and s["runtime"]["replicas_identical"] is True
    assert json.loads((tmp_path / "cuda" / "gpu_model" / "summary.json").read_text())["variant"] == "gpu_model"


@needs_gpu
def test_one_nccl_rank_trains_on_the_gpu(tmp_path: Path) -> None:
    out = tmp_path / "run"
    rc = main(["train", str(CPU4), "--set", "cluster.groups.0.count=1", "--set", "contention=[]",
               "--set", "workload.updates=5", "--set", "workload.global_batch=256", "--backend", "nccl", "--out", str(out), "-q"])
    assert rc == 0
    s = json.loads((out / "summary.json").read_text())
    assert s["runtime"]["backend"] == "nccl" and s["runtime"]["device"] == "cuda:0" and s["updates"] == 5


def test_device_options_are_checked_before_launch(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Exit 2 naming the option: nccl on the CPU; a server scheme on CUDA; CUDA where there is none."""
    base = [str(CPU4), "--set", "cluster.groups.0.count=2", "--set", "contention=[]", "--out", str(tmp_path / "x"), "-q"]
    assert main(["train", *base, "--backend", "nccl", "--device", "cpu"]) == 2
    assert "--device: nccl runs on GPUs only" in capsys.readouterr().err
    ps = [str(REPO / "scenarios" / "validation" / "ps_cpu3.yaml"), "--out", str(tmp_path / "x"), "-q"]
    assert main(["train", *ps, "--scheme", "asp", "--device", "cuda"]) == 2
    assert "parameter server, which the runtime runs on the CPU only" in capsys.readouterr().err
    if GPUS == 0:
        assert main(["train", *base, "--device", "cuda"]) == 2
        assert "--device: cuda: no CUDA GPU is visible here" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()
