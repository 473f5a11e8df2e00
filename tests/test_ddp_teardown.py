"""lbsim.runtime.ddp.end_group: the DDP models dropped are freed while the group is registered, then the
group is destroyed on every rank; a model still alive is named in a warning (2 gloo ranks)."""

from __future__ import annotations

import gc
import json
import time
import warnings
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
from rank_harness import start_ranks  # noqa: E402


def _rank(rank: int, folder: str) -> None:
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    from lbsim.runtime.ddp import LoadBalancer, end_group, live_ddp_models

    torch.set_num_threads(1)
    seen: dict[str, object] = {}
    for case in ("dropped", "kept"):
        dist.init_process_group("gloo", init_method=f"file://{folder}/{case}", rank=rank, world_size=2)
        model = DDP(torch.nn.Linear(3, 2))
        lb = LoadBalancer(8, variant="cpu")
        lb.attach(model)
        for idx in lb.sampler(16, seed=0):
            model(torch.randn(len(idx), 3)).sum().backward()
        lb.finish()
        if case == "dropped":
            del model
        seen[f"{case}_alive"] = live_ddp_models()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            end_group()
        seen[f"{case}_warnings"] = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
        seen[f"{case}_initialized"] = dist.is_initialized()
        if case == "kept":  # the hazard end_group warns of: let gloo's threads retire their work before the
            time.sleep(0.5)  # Reducer frees the group (the GIL is free while this rank sleeps)
            del model
            gc.collect()
    Path(folder, f"rank{rank}.json").write_text(json.dumps(seen))


def test_end_group_frees_dropped_models_first_and_names_a_live_one(tmp_path: Path) -> None:
    start_ranks(_rank, (str(tmp_path),), 2)
    for rank in range(2):
        seen = json.loads((tmp_path / f"rank{rank}.json").read_text())
        assert seen["dropped_alive"] == 0 and seen["dropped_warnings"] == [] and seen["dropped_initialized"] is False
        assert seen["kept_alive"] == 1 and seen["kept_initialized"] is False
        (message,) = seen["kept_warnings"]
        assert message.startswith("1 DistributedDataParallel model(s) still alive at end_group(): drop them first")
