"""The ``network.nccl`` section: fitted figures of NCCL's all-reduce model, per protocol.

With ``network.algorithm: nccl_fitted`` the engines time every all-reduce with
:mod:`lbsim.network.nccl` (ring / tree x LL / LL128 / Simple, NCCL's pick per call) instead of the
link-only formulas. The figures are what ``lbsim calibrate-nccl`` fits (docs/collectives.md); the
bus bandwidths are the links': a node's NIC ``bandwidth_gbps`` is ``B_inter`` and its
``intra_bandwidth_gbps`` is ``B_intra``, so network contention slows them as it slows any link.
"""

from __future__ import annotations

from dataclasses import dataclass

from lbsim.fields import param
from lbsim.network.nccl import TREE_CHUNK_BYTES, NcclFigures, ProtocolFigures


@dataclass(frozen=True)
class NcclProtocol:
    """One protocol's figures (docs/collectives.md: ``b_p``, ``a_p``, ``x_p``, ``η_p``)."""

    base_s: float = param(help="launch and protocol set-up, once per call (b_p)", ge=0)
    intra_hop_s: float = param(help="one intra-node hop: a ring step or a chain hop (a_p)", ge=0)
    inter_hop_s: float = param(help="one network hop (x_p)", ge=0)
    efficiency: float = param(help="the protocol's share of the link bandwidth (η_p; Simple: 1)", gt=0, le=1)

    def figures(self) -> ProtocolFigures:
        return ProtocolFigures(self.base_s, self.intra_hop_s, self.inter_hop_s, self.efficiency)


@dataclass(frozen=True)
class NcclModel:
    """NCCL's all-reduce model: three protocols' figures, the NICs per node and the Simple tree chunk."""

    LL: NcclProtocol = param(help="the LL protocol's figures")
    LL128: NcclProtocol = param(help="the LL128 protocol's figures")
    Simple: NcclProtocol = param(help="the Simple protocol's figures")
    nics_per_node: int = param(1, "NICs per node, one per NCCL channel (a tree level's chunk crosses one)", gt=0)
    simple_chunk_bytes: float = param(TREE_CHUNK_BYTES["Simple"], "bytes a tree level forwards whole with the "
                                      "Simple protocol (NCCL's 256 KiB)", ge=0)

    def figures(self, intra_bytes_per_s: float, inter_bytes_per_s: float) -> NcclFigures:
        """The model with the links' bus bandwidths (bytes/s)."""
        return NcclFigures((self.LL.figures(), self.LL128.figures(), self.Simple.figures()),
                           intra_bytes_per_s, inter_bytes_per_s, self.nics_per_node, self.simple_chunk_bytes)
