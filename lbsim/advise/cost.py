"""What a scheme costs: the cluster's price per hour, and the time and money to process N samples.

* **Price per hour** of a run's cluster (:func:`cluster_price`): every node at its catalog list
  price (:mod:`lbsim.scenario.prices`: on-demand, us-east-1, dated and sourced), a multi-GPU
  node charged for the GPUs its workers use; a parameter-server scheme also pays its server:
  ``shards`` instances of :data:`lbsim.scenario.prices.SERVER_INSTANCE` (``--price server=X``
  replaces the figure; ``--price INSTANCE=X`` any instance's). An instance with no list price
  (and no ``--price``) makes the cost unknown (NaN, shown as a dash), never a guess.
* **Time to process N samples**: ``N / throughput`` (the throughput's interval maps to the
  time's, ends swapped); **cost** = time x price per hour. N defaults to one epoch of the model's
  dataset (:data:`EPOCH_SAMPLES`); with numerics on, the time and cost to reach the target accuracy
  are given too (the run's ``time_to_target_s``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from lbsim.errors import InputError
from lbsim.limits import short_repr
from lbsim.scenario import catalog
from lbsim.scenario.prices import PRICES, SERVER_INSTANCE, node_price_per_hour, price_per_hour
from lbsim.scenario.schema import Scenario
from lbsim.workers import WorkerSpec

SERVER = "server"
# one epoch of each catalog model's dataset (the default N of "time and cost to process N samples")
EPOCH_SAMPLES: Mapping[str, tuple[int, str]] = {
    "resnet50_imagenet": (1_281_167, "one epoch of ImageNet-1k (1,281,167 training images, references.md §1.3)"),
    "resnet18_cifar10": (50_000, "one epoch of CIFAR-10 (50,000 training images)"),
    "bert_base_squad": (87_599, "one epoch of SQuAD v1.1 (87,599 training questions, Rajpurkar et al. 2016)"),
}


def parse_prices(items: Sequence[str]) -> dict[str, float]:
    """``--price INSTANCE=USD_PER_HOUR`` (or ``server=...``) as a mapping; InputError naming the item."""
    out: dict[str, float] = {}
    valid = [*catalog.instance_names(), SERVER]
    for text in items:
        key, sep, raw = text.partition("=")
        key = key.strip()
        if not sep or key not in valid:
            raise InputError("--price", f"expected INSTANCE=USD_PER_HOUR with INSTANCE one of {', '.join(valid)}, "
                                        f"got {short_repr(text)}")
        try:
            value = float(raw)
        except ValueError:
            raise InputError(f"--price {key}", f"expected US dollars per hour, got {short_repr(raw)}") from None
        if not 0 <= value < 1e6:
            raise InputError(f"--price {key}", f"expected >= 0 and < 1e6 US dollars per hour, got {short_repr(raw)}")
        out[key] = value
    return out


def default_samples(model: str) -> tuple[int, str]:
    """The samples of one epoch of ``model``'s dataset, and how the figure reads in the report."""
    return EPOCH_SAMPLES.get(model, (1_000_000, "1,000,000 samples (no dataset size known for this model)"))


def cluster_price(scenario: Scenario, workers: Sequence[WorkerSpec], overrides: Mapping[str, float]) -> dict[str, Any]:
    """The cluster's price per hour: ``usd_per_hour`` and one line per kind of node (and the server)."""
    nodes: dict[int, list[WorkerSpec]] = {}
    for w in workers:
        nodes.setdefault(w.node, []).append(w)
    per_kind: dict[tuple[str, int], int] = {}
    for ws in nodes.values():
        key = (ws[0].instance, len(ws))
        per_kind[key] = per_kind.get(key, 0) + 1
    lines = []
    total = 0.0
    for (instance, k), count in sorted(per_kind.items()):
        gpus = catalog.INSTANCES[instance].gpus_per_node
        share = f" ({k} of its {gpus} GPUs)" if gpus > 1 and k < gpus else ""
        if instance not in overrides and instance not in PRICES:
            total = math.nan  # no cost rather than a made-up one
            lines.append({"what": f"{count} x {instance}{share}", "usd_per_hour": math.nan,
                          "source": f"no list price in lbsim: give --price {instance}=USD_PER_HOUR"})
            continue
        each = node_price_per_hour(instance, k, overrides)
        total += each * count
        lines.append({"what": f"{count} x {instance}{share}", "usd_per_hour": each * count,
                      "source": "--price" if instance in overrides else PRICES[instance].source})
    net = scenario.network
    if getattr(net, "kind", "") == "parameter_server":
        shards = getattr(net, "shards", 1)
        each = overrides.get(SERVER, price_per_hour(SERVER_INSTANCE, overrides))
        total += each * shards
        lines.append({"what": f"{shards} x parameter-server shard ({SERVER_INSTANCE} each)", "usd_per_hour": each * shards,
                      "source": "--price" if SERVER in overrides or SERVER_INSTANCE in overrides else PRICES[SERVER_INSTANCE].source})
    return {"usd_per_hour": total, "lines": lines}
