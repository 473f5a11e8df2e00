"""Where a sweep's runs execute: a local process pool (default) or a Dask cluster.

A backend is anything with ``map_unordered(fn, items)``: it calls ``fn(payload)`` for every
``(key, payload)`` in ``items`` and yields ``(key, result)`` as each finishes, in completion
order, with the exception instead of the result when a call failed. Results never depend on the
backend: the driver orders rows by the sweep's point order.

* :class:`LocalPool` — ``concurrent.futures.ProcessPoolExecutor`` with ``jobs`` worker
  processes, started with ``forkserver`` where available (``spawn`` otherwise): no ``fork`` of a
  process that runs a progress-bar thread.
* :class:`DaskPool` — a ``dask.distributed`` client: ``DaskPool(Client("tcp://host:8786"))`` or,
  in tests, ``DaskPool(Client(LocalCluster(processes=False)))``. Dask is imported only here,
  inside the methods, and is the ``cluster`` extra (``pip install "lbsim[cluster]"``).
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol

from lbsim.errors import InputError

Items = Sequence[tuple[str, Any]]


class Backend(Protocol):
    def map_unordered(self, fn: Callable[[Any], Any], items: Items) -> Iterator[tuple[str, Any]]:
        """Run ``fn`` on each ``(key, payload)``; yield ``(key, result)`` as each finishes."""


def default_jobs() -> int:
    """The number of cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _exit_with_driver() -> None:
    """Pool-worker initializer: end this worker when the sweep's process dies (even by SIGKILL).

    A pool worker waits on a queue whose write end it holds itself, so it would never notice
    that its driver is gone and would live on as an orphan. A daemon thread waits on the
    parent's sentinel (``multiprocessing.parent_process()``) and exits the worker when it fires.
    """
    import threading

    parent = multiprocessing.parent_process()
    if parent is None:
        return

    def watch() -> None:
        parent.join()
        os._exit(1)

    threading.Thread(target=watch, name="lbsim-exit-with-driver", daemon=True).start()


class LocalPool:
    """Run tasks in ``jobs`` local worker processes (default: the CPUs this process may use)."""

    def __init__(self, jobs: int | None = None) -> None:
        if jobs is not None and jobs < 1:
            raise ValueError("jobs must be >= 1")
        self.jobs = jobs or default_jobs()

    def map_unordered(self, fn: Callable[[Any], Any], items: Items) -> Iterator[tuple[str, Any]]:
        """Run ``fn`` on each ``(key, payload)`` in a local process pool; yield results as they finish."""
        from concurrent.futures import ProcessPoolExecutor, as_completed

        if not items:
            return
        methods = multiprocessing.get_all_start_methods()
        ctx = multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")
        pool = ProcessPoolExecutor(max_workers=min(self.jobs, len(items)), mp_context=ctx, initializer=_exit_with_driver)
        try:
            futures = {pool.submit(fn, payload): key for key, payload in items}
            for fut in as_completed(futures):
                try:
                    yield futures[fut], fut.result()
                except Exception as err:  # noqa: BLE001 — reported per run by the driver
                    yield futures[fut], err
        finally:
            pool.shutdown(wait=True, cancel_futures=True)


class DaskPool:
    """Run tasks on a Dask cluster through ``client`` (a ``dask.distributed.Client``)."""

    def __init__(self, client: Any) -> None:
        self.client = client

    @classmethod
    def connect(cls, address: str, *, timeout_s: float = 30.0) -> DaskPool:
        """A client for the scheduler at ``address``; InputError if dask is missing or unreachable."""
        try:
            from dask.distributed import Client
        except ImportError:
            raise InputError("--scheduler", 'needs dask.distributed: pip install "lbsim[cluster]"') from None
        try:
            return cls(Client(address, timeout=timeout_s))
        except (OSError, TimeoutError, ValueError) as err:
            raise InputError("--scheduler", f"cannot connect to the Dask scheduler at {address}: {err}") from None

    def map_unordered(self, fn: Callable[[Any], Any], items: Items) -> Iterator[tuple[str, Any]]:
        """Run ``fn`` on each ``(key, payload)`` on the Dask cluster; yield results as they finish."""
        from dask.distributed import as_completed

        if not items:
            return
        futures = {self.client.submit(fn, payload, key=f"lbsim-run-{key}", pure=False): key for key, payload in items}
        try:
            for fut in as_completed(list(futures)):
                try:
                    yield futures[fut], fut.result()
                except Exception as err:  # noqa: BLE001 — reported per run by the driver
                    yield futures[fut], err
        finally:
            self.client.cancel([f for f in futures if not f.done()])
