"""The runtime's one driver -> loop table (lbsim.runtime.config.DRIVER_LOOPS).

Every driver a registered scheme uses has a loop; each entry's runner is the named function of the
named module (so the table cannot point at a loop that is not there); reading the table imports no
torch (the loops are imported on use, when a rank runs one).
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from lbsim.runtime.config import DRIVER_LOOPS, driver_of, supported_schemes, uses_server
from tests.conftest import REPO

pytest.importorskip("torch")


def test_every_registered_driver_has_a_loop() -> None:
    from lbsim.schemes.registry import scheme_names

    assert {driver_of(s) for s in scheme_names()} <= set(DRIVER_LOOPS)
    assert supported_schemes() == list(scheme_names())


@pytest.mark.parametrize("driver", sorted(DRIVER_LOOPS))
def test_runner_is_the_named_entry_point(driver: str) -> None:
    loop = DRIVER_LOOPS[driver]
    run = loop.runner()
    assert callable(run) and run.__module__ == loop.module and run.__name__ == loop.function


def test_server_flag_follows_the_driver() -> None:
    assert not uses_server("bsp") and uses_server("asp") and uses_server("wbsp")
    assert [d for d, loop in sorted(DRIVER_LOOPS.items()) if loop.server] == ["async", "wbsp"]


def test_the_table_imports_no_torch() -> None:
    code = ("import sys, lbsim.runtime.config, lbsim.runtime.worker; from lbsim.runtime.config import DRIVER_LOOPS; "
            "assert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO, env={"PYTHONPATH": str(REPO)}, timeout=60)
