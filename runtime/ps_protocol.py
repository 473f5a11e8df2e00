"""The parameter server's messages: point-to-point tensors over torch.distributed (gloo).

Ranks ``0 .. n-1`` are the workers (worker i = rank i, as in the synchronous loop) and rank ``n``
is the server. Every message is a pair of tensor sends on the default process group, told apart
by tag:

* a **push** (worker -> server): a float64 header (:data:`PUSH`: what the worker measured of the
  iteration it just computed, and when it received the server's previous reply) followed by the
  payload (the gradient, or for WBSP the delta of its local steps) in the model's dtype;
* a **reply** (server -> worker): a float64 header (:data:`REPLY`: stop, the next batch, the model
  version, how long the server held the push) followed, when ``pull`` is set, by the server's
  current weights.

The server receives pushes from any source in arrival order (``recv(src=None)``): it handles one
push at a time, as the simulator's serial apply queue. Durations cross between processes, never
timestamps, except the iteration bounds each rank reads on its own clock (seconds since the
common start barrier, as in the synchronous loop).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from .dist import CollectiveError

PUSH = ("iteration", "batch", "start_s", "compute_end_s", "prev_end_s", "cpu_available", "mem_available",
        "cpu_measured", "real_compute_s", "loss", "steps", "rows", "final")
"""Fields of a push header. ``prev_end_s``: when this worker received the reply to its previous
push (the end of its previous iteration; NaN for its first push). ``steps``: local steps the payload
carries (1 for the asynchronous schemes). WBSP (:mod:`lbsim.runtime.wbsp`): ``rows``: step rows that
follow the payload (tag :data:`TAG_STEPS`); ``final``: 1 on a worker's last message, sent after
the reply that told it to stop (its payload is not applied)."""
REPLY = ("stop", "batch", "version", "server_s", "pull", "flag")
"""Fields of a reply header. ``version``: updates applied when the reply was sent (the version of
the weights that follow when ``pull`` is 1); ``server_s``: the server's time from receiving the push
to sending this reply (applying it and, when the scheme held the worker, the hold); ``flag``:
scheme-specific (WBSP: the round closed since this worker last pulled)."""
P = {name: i for i, name in enumerate(PUSH)}
R = {name: i for i, name in enumerate(REPLY)}
TAG_PUSH, TAG_PAYLOAD, TAG_REPLY, TAG_WEIGHTS = 11, 12, 13, 14
TAG_STEPS = 15
"""WBSP: the push's step rows (float64, ``rows`` x the fields of :data:`lbsim.runtime.wbsp.STEP`)."""


class Channel:
    """One rank's end of the worker <-> server messages; errors name the rank, the message and the round."""

    def __init__(self, rank: int, server: int, payload_numel: int, dtype: torch.dtype) -> None:
        self.rank = rank
        self.server = server
        self.push_buf = torch.zeros(len(PUSH), dtype=torch.float64)
        self.reply_buf = torch.zeros(len(REPLY), dtype=torch.float64)
        self.payload_buf = torch.zeros(payload_numel, dtype=dtype)

    def _call(self, what: str, round_: int, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except Exception as err:  # noqa: BLE001 - a failed transfer is reported like a failed collective
            raise CollectiveError(self.rank, what, round_, err) from err

    # -- worker side ----------------------------------------------------------------------------
    def push(self, header: dict[str, float], payload: torch.Tensor, round_: int) -> None:
        h = torch.full((len(PUSH),), float("nan"), dtype=torch.float64)
        for name, value in header.items():
            h[P[name]] = float(value)
        self._call("push header", round_, dist.send, h, self.server, tag=TAG_PUSH)
        self._call("push payload", round_, dist.send, payload.contiguous(), self.server, tag=TAG_PAYLOAD)

    def reply_of(self, weights: torch.Tensor, round_: int) -> dict[str, float]:
        """Wait for the server's reply; when it carries weights, copy them into ``weights``."""
        self._call("wait for the server's reply", round_, dist.recv, self.reply_buf, self.server, tag=TAG_REPLY)
        reply = {name: float(v) for name, v in zip(REPLY, self.reply_buf.tolist(), strict=True)}
        if reply["pull"] > 0.5:
            self._call("pull of the weights", round_, dist.recv, self.payload_buf, self.server, tag=TAG_WEIGHTS)
            weights.copy_(self.payload_buf)
        return reply

    # -- server side ----------------------------------------------------------------------------
    def next_push(self, round_: int) -> tuple[int, dict[str, float], torch.Tensor]:
        """The next push from any worker: ``(worker, header, payload)`` (the payload buffer is reused)."""
        src = self._call("receive of a push", round_, dist.recv, self.push_buf, None, tag=TAG_PUSH)
        src = int(src)
        self._call(f"receive of worker {src}'s payload", round_, dist.recv, self.payload_buf, src, tag=TAG_PAYLOAD)
        header = {name: float(v) for name, v in zip(PUSH, self.push_buf.tolist(), strict=True)}
        return src, header, self.payload_buf

    def reply(self, worker: int, fields: dict[str, float], weights: torch.Tensor | None, round_: int) -> None:
        h = torch.zeros(len(REPLY), dtype=torch.float64)
        for name, value in fields.items():
            h[R[name]] = float(value)
        h[R["pull"]] = 1.0 if weights is not None else 0.0
        self._call(f"reply to worker {worker}", round_, dist.send, h, worker, tag=TAG_REPLY)
        if weights is not None:
            self._call(f"weights to worker {worker}", round_, dist.send, weights.contiguous(), worker, tag=TAG_WEIGHTS)
