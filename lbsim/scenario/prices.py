"""List prices of the catalog's instance types, for cost estimates (``lbsim advise``).

Every figure is the **on-demand list price in US dollars per instance-hour**, Linux, shared
tenancy, region US East (N. Virginia) ``us-east-1``, from the AWS "Amazon EC2 On-Demand Pricing"
page (aws.amazon.com/ec2/pricing/on-demand/) as it listed them in 2024 (:data:`AS_OF`). c5.4xlarge
and c5.18xlarge also appear in AWS's EC2 Auto Scaling user guide ("Spot price per unit hour
example": $0.68 and $3.06 On-Demand). Not included: storage (EBS), data transfer, taxes, Savings
Plans, Reserved or Spot discounts. Prices change: AWS lowered the P4d (and P5) on-demand prices in
June 2025, after this snapshot, so the p4d.24xlarge figure here is the older, higher one. An
instance with no sourced price here (p5e.48xlarge: not in the snapshot) has none: its cost is
reported as unknown unless ``--price`` gives one. Any price
can be replaced for one run (``lbsim advise --price p4d.24xlarge=21.96``).

How a cluster is charged (:func:`node_price_per_hour`, per node): a node of a multi-GPU instance
pays the share of the GPUs its workers use, ``price * workers / gpus_per_node`` (one A100 of a
p4d.24xlarge is 1/8 of it: the rest of the instance is taken to serve other jobs); a single-GPU
instance is its whole price; a CPU instance is its whole price whatever number of workers it holds. A parameter server's shards are charged as
:data:`SERVER_INSTANCE` each (its NIC, 25 Gbit/s, is the default ``server_bandwidth_gbps``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from lbsim.scenario.catalog import INSTANCES

AS_OF = "2024"
REGION = "us-east-1 (US East, N. Virginia)"
SOURCE = ("AWS, Amazon EC2 On-Demand Pricing (aws.amazon.com/ec2/pricing/on-demand/), Linux, shared tenancy, "
          f"{REGION}, list prices as of {AS_OF}")
SERVER_INSTANCE = "c5.18xlarge"  # one parameter-server shard: 72 vCPU, 25 Gbit/s (the default server NIC)


@dataclass(frozen=True)
class Price:
    instance: str
    usd_per_hour: float
    source: str = SOURCE
    note: str = ""


_PRICES = [
    Price("g4dn.xlarge", 0.526),
    Price("g4dn.12xlarge", 3.912),
    Price("p3.2xlarge", 3.06),
    Price("p3.16xlarge", 24.48),
    Price("p4d.24xlarge", 32.7726, note="before AWS's June 2025 P4d price reduction"),
    Price("g5.xlarge", 1.006),
    Price("p2.xlarge", 0.90, note="previous-generation instance (p2)"),
    Price("g3.4xlarge", 1.14, note="previous-generation instance (g3)"),
    Price("c5.xlarge", 0.17),
    Price("c5.4xlarge", 0.68, note="also AWS EC2 Auto Scaling user guide, spot example table"),
    Price("c5.18xlarge", 3.06, note="also AWS EC2 Auto Scaling user guide, spot example table"),
]
PRICES: Mapping[str, Price] = MappingProxyType({p.instance: p for p in _PRICES})


def price_per_hour(instance: str, overrides: Mapping[str, float] | None = None) -> float:
    """The instance's price per hour (an override first); KeyError for an instance with none."""
    if overrides and instance in overrides:
        return overrides[instance]
    return PRICES[instance].usd_per_hour


def node_price_per_hour(instance: str, workers: int, overrides: Mapping[str, float] | None = None) -> float:
    """What a node of ``instance`` holding ``workers`` workers costs per hour: the GPUs' share of a
    GPU instance (``price * workers / gpus_per_node``), a whole CPU instance (any number of workers)."""
    gpus = INSTANCES[instance].gpus_per_node
    price = price_per_hour(instance, overrides)
    return price if gpus == 0 else price * min(workers, gpus) / gpus
