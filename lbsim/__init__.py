"""lbsim — which synchronization scheme, how much faster, on my cluster?

The shared core of lbsim: the scenario schema and catalog, contention profiles, batch sizing,
scheme decisions and metrics. It imports neither simpy nor torch; the two engines
(``simulator`` and ``runtime``) import it and carry out its decisions.
"""

__version__ = "0.1.0"
