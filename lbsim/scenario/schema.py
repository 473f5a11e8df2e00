"""The scenario: one YAML file describes a cluster, its contention, a workload and a scheme.

```yaml
seed: 7
workload: {model: resnet50_imagenet, global_batch: 1024, updates: 200}
cluster:
  groups:
    - {instance: p3.2xlarge, count: 2}
    - {instance: c5.18xlarge, count: 2, samples_per_s: 60}   # inline override
network: {name: parameter_server, shards: 2}
contention:
  - {name: scheduled, workers: [0], start_s: 10, end_s: 40, slowdown: 3}
scheme: {name: ssp, staleness: 2}
```
Sections are frozen dataclasses (:mod:`lbsim.scenario.sections`,
:mod:`lbsim.contention.config`, :mod:`lbsim.scenario.data`, each scheme's config); ``network``,
``contention`` items and ``scheme`` are picked by their ``name:``. The optional ``data:`` section
places the dataset on workers and a storage node (default: data local and free).
"""

from __future__ import annotations

from dataclasses import dataclass

from lbsim.contention.config import ContentionConfig, contention_configs
from lbsim.fields import param
from lbsim.scenario.calibration_config import CalibrationInfo
from lbsim.scenario.data import DataConfig
from lbsim.scenario.numerics_config import NumericsConfig
from lbsim.scenario.sections import (
    Cluster,
    NetworkConfig,
    ParameterServerConfig,
    Workload,
    network_configs,
)
from lbsim.schemes.base import SchemeConfig
from lbsim.schemes.registry import BASELINE_SCHEME, scheme_configs


def default_scheme() -> SchemeConfig:
    """The baseline scheme's configuration with its defaults: a scenario's scheme when it names none."""
    config: SchemeConfig = scheme_configs()[BASELINE_SCHEME]()
    return config


@dataclass(frozen=True)
class Scenario:
    cluster: Cluster = param(help="the workers, by group")
    seed: int = param(0, "seed of every random stream in the run", ge=0)
    name: str = param("", "a short name for tables and plots")
    description: str = param("", "free text")
    workload: Workload = param(Workload(), "what is trained and for how long")
    network: NetworkConfig = param(ParameterServerConfig(), "communication model", registry=network_configs)
    contention: tuple[ContentionConfig, ...] = param((), "slowdowns injected into workers", registry=contention_configs)
    scheme: SchemeConfig = param(None, "synchronization scheme and its parameters (`lbsim schemes`)", registry=scheme_configs)
    data: DataConfig | None = param(None, "where the training data lives and what fetching it costs (null: local and free)")
    numerics: NumericsConfig = param(NumericsConfig(), "train a real model in the simulation (off: throughput only)")
    calibration: CalibrationInfo | None = param(None, "written by `lbsim calibrate`: the fit's interval and domain, "
                                                      "reported by `lbsim run` (null: not calibrated)")

    def __post_init__(self) -> None:
        if self.scheme is None:
            object.__setattr__(self, "scheme", default_scheme())
