"""The ``workload.sample_cost`` section: lengths of the samples and what a sample of length L costs.

```yaml
workload:
  sample_cost:
    lengths: {name: file, path: ../data/token_lengths/azure_conv_2023.csv}
    hidden_size: 4096          # c(L) = a L + b L^2 with b = a / (6 hidden_size)
    batching: packing          # or padding
    max_tokens: 262144         # memory cap per worker batch, in (packed or padded) tokens
```
Without the section (the default) every sample costs the same and nothing here runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from lbsim.errors import InputError
from lbsim.fields import param

MAX_TOKENS = 2**31  # the longest sample and the largest token cap lbsim accepts (int32 tokens)


@dataclass(frozen=True)
class FileLengths:
    """Lengths read from a CSV file: a ``tokens`` column (one row per sample), optionally ``count``."""

    kind: ClassVar[str] = "file"
    path: str = param(help="CSV with a `tokens` column (one row per sample) and optionally `count` (a histogram: "
                           "how many samples have that length); relative to the scenario file", nonempty=True)


@dataclass(frozen=True)
class LognormalLengths:
    """``L = clip(round(median exp(sigma Z)), min_tokens, max_tokens)``, Z standard normal."""

    kind: ClassVar[str] = "lognormal"
    median_tokens: float = param(help="median length in tokens (exp of the log-mean)", gt=0)
    sigma: float = param(help="standard deviation of log length", ge=0, le=10)
    max_tokens: int = param(help="cap: longer draws are truncated to this length", gt=0, le=MAX_TOKENS)
    min_tokens: int = param(1, "floor: shorter draws are raised to this length", gt=0, le=MAX_TOKENS)

    def check(self) -> None:
        """``min_tokens ≤ max_tokens``."""
        if self.min_tokens > self.max_tokens:
            raise InputError("min_tokens", f"{self.min_tokens} is above max_tokens {self.max_tokens}")


@dataclass(frozen=True)
class ConstantLengths:
    """Every sample has the same length."""

    kind: ClassVar[str] = "constant"
    tokens: int = param(help="the length of every sample", gt=0, le=MAX_TOKENS)


def length_configs() -> dict[str, type]:
    """The length distributions a scenario can name: ``{kind: config class}``."""
    return {c.kind: c for c in (FileLengths, LognormalLengths, ConstantLengths)}


LengthsConfig = FileLengths | LognormalLengths | ConstantLengths


@dataclass(frozen=True)
class SampleCostConfig:
    """Per-sample cost: lengths ``L`` drawn from a distribution, a sample costing ``c(L) = c0 + a L + b L²``
    (in units of the reference sample's cost), batches packed or padded, an optional cap in tokens."""

    lengths: LengthsConfig = param(help="distribution of sample lengths in tokens (file, lognormal, constant)",
                                   registry=length_configs)
    cost_linear: float = param(1.0, "a in c(L) = c0 + a L + b L^2 (only ratios of costs matter)", gt=0)
    cost_quadratic: float | None = param(None, "b in c(L) = c0 + a L + b L^2 (null: a / (6 hidden_size), the attention "
                                               "share of a transformer's FLOPs, Narayanan et al. SC'21)", ge=0)
    cost_per_sample: float = param(0.0, "c0 in c(L) = c0 + a L + b L^2: a fixed cost per sample whatever its length "
                                        "(per-sequence launches and bookkeeping; 0 for the FLOPs model)", ge=0)
    hidden_size: int = param(4096, "transformer hidden size h for the default b = a / (6 h)", gt=0)
    reference_tokens: float | None = param(None, "length of the sample at which each worker's samples_per_s holds "
                                                 "(null: the distribution's mean length)", gt=0)
    batching: Literal["packing", "padding"] = param("packing", "packing: a batch costs the sum of its samples' c(L); "
                                                    "padding: every sample is padded to the batch's longest")
    max_tokens: int | None = param(None, "memory cap of one worker's batch in tokens (packed: the sum of lengths; "
                                         "padded: count x longest); null: no cap in tokens", gt=0, le=MAX_TOKENS)
    gradient_mean: Literal["per_sample", "per_token"] = param(
        "per_sample", "the update's mean: per_sample weighs worker i's gradient by its samples / all samples, "
                      "per_token by its tokens / all tokens (a token-level loss, as language models use)")

    @property
    def quadratic(self) -> float:
        """b of ``c(L) = c0 + a L + b L^2``."""
        return self.cost_quadratic if self.cost_quadratic is not None else self.cost_linear / (6.0 * self.hidden_size)
