"""The ``calibration:`` section: what ``lbsim calibrate`` knows about the figures it wrote.

``lbsim calibrate`` writes it into ``fit.yaml``; a scenario built from that file keeps it, and
``lbsim run`` then prints the run's mean iteration with its interval and says whether the
scenario's placement and batch lie outside what the fit placements exercised
(:mod:`lbsim.calibration.interval`). The engines never read it: it changes no simulated figure.

```yaml
calibration:
  fit_placements: ["2", "4", "11", "22", "1111"]
  interval: {nominal: 0.8, low_factor: 0.91, high_factor: 1.12, folds: 5}
  domain: {max_nodes: 4, max_gpus_one_node: 4, max_gpus_per_node_multi: 2, local_bsz: [8, 1024]}
```
"""

from __future__ import annotations

from dataclasses import dataclass

from lbsim.errors import InputError
from lbsim.fields import param


@dataclass(frozen=True)
class CalibrationInterval:
    """The calibration's nominal interval: ``[mean · low_factor, mean · high_factor]``."""

    nominal: float = param(help="nominal coverage of the interval (0.8: 80 %)", gt=0, le=1)
    low_factor: float = param(help="low end of the interval as a factor of the prediction", gt=0)
    high_factor: float = param(help="high end of the interval as a factor of the prediction", gt=0)
    folds: int = param(help="fit placements left out in turn to estimate it", gt=0)

    def check(self) -> None:
        """``low_factor ≤ high_factor``."""
        if self.low_factor > self.high_factor:
            raise InputError("low_factor", f"must be <= high_factor ({self.high_factor}), got {self.low_factor}")


@dataclass(frozen=True)
class CalibrationDomain:
    """What the fit placements exercised: the most nodes, the largest nodes, the per-GPU batch range."""

    max_nodes: int = param(help="most nodes in a fit placement", gt=0)
    max_gpus_one_node: int = param(help="GPUs of the largest one-node fit placement (0: none)", ge=0)
    max_gpus_per_node_multi: int = param(help="GPUs on the largest node of a multi-node fit placement (0: none)", ge=0)
    local_bsz: tuple[int, ...] = param(help="[min, max] per-GPU batch of the fit rows")

    def check(self) -> None:
        """``local_bsz`` is ``[min, max]`` with ``0 < min ≤ max``."""
        if len(self.local_bsz) != 2 or not 0 < self.local_bsz[0] <= self.local_bsz[1]:
            raise InputError("local_bsz", f"expected [min, max] with 0 < min <= max, got {list(self.local_bsz)}")


@dataclass(frozen=True)
class CalibrationInfo:
    """The ``calibration`` section ``lbsim calibrate`` writes: the fit placements, their domain and the interval."""

    fit_placements: tuple[str, ...] = param(help="the placements the figures were fitted on", nonempty=True)
    domain: CalibrationDomain = param(help="what the fit placements exercised (beyond it: extrapolation)")
    interval: CalibrationInterval | None = param(None, "leave-one-placement-out interval (null: too few fit placements)")

    def reasons(self, node_sizes: tuple[int, ...], local_bsz: float) -> tuple[str, ...]:
        """Why a run of ``node_sizes`` GPUs per node at ``local_bsz`` extrapolates (:func:`extrapolation_reasons`)."""
        d = self.domain
        return extrapolation_reasons(d.max_nodes, d.max_gpus_one_node, d.max_gpus_per_node_multi, d.local_bsz,
                                     node_sizes, local_bsz)


def extrapolation_reasons(max_nodes: int, max_gpus_one_node: int, max_gpus_per_node_multi: int,
                          local_bsz_range: tuple[int, ...], placement: tuple[int, ...],
                          local_bsz: float) -> tuple[str, ...]:
    """Why a prediction for ``placement`` at ``local_bsz`` extrapolates (empty: inside the fit domain).

    ``nodes``: more nodes than any fit placement; ``gpus_per_node``: a node with more GPUs than any
    fit placement of its kind (one node, or several) had, falling back on the other kind when the fit
    had none of this one; ``batch``: a per-GPU batch outside the fit rows' ``[min, max]``. A
    single-GPU prediction never extrapolates.
    """
    if sum(placement) <= 1:
        return ()
    out = []
    if len(placement) > max_nodes:
        out.append("nodes")
    same_kind = max_gpus_per_node_multi if len(placement) > 1 else max_gpus_one_node
    ref = same_kind or max(max_gpus_one_node, max_gpus_per_node_multi)
    if max(placement) > ref:
        out.append("gpus_per_node")
    if not local_bsz_range[0] <= local_bsz <= local_bsz_range[-1]:
        out.append("batch")
    return tuple(out)
