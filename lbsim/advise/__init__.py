"""``lbsim advise``: which scheme to use on a cluster, how sure, at what cost, and why (docs/advise.md).

cluster.py (the compact cluster line), unknowns.py (``--vary``, ``--colocated``), plan.py (schemes
on their family's network against one baseline), execute.py (the runs, in parallel), analysis.py
(intervals, tails, slowdown probability, decision, why), cost.py (prices), html.py (the report),
run.py (request -> plan -> report), command.py (the CLI).
"""
