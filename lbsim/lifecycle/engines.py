"""Which engine the lifecycle runs when the caller names none: the simulator.

The one place in the core that names an engine; it imports it on call, so importing the core
loads neither simpy nor the simulator (tests/test_import_boundary.py).
"""

from __future__ import annotations

from lbsim.engine import Engine


def default_engine() -> Engine:
    """The simulator's :func:`lbsim.simulator.run.simulate` (implements :class:`lbsim.engine.Engine`)."""
    from lbsim.simulator.run import simulate

    return simulate
