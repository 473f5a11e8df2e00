"""``lbsim whatif``: a recorded job replayed, its straggler losses attributed, every scheme's gain predicted.

Modules: :mod:`~lbsim.whatif.fit` (the recording's compute curves, slowdowns and communication),
:mod:`~lbsim.whatif.scenario` (the fitted job as a scenario YAML and per-rank slowdown traces),
:mod:`~lbsim.whatif.attribution` (time lost to stragglers by rank and period),
:mod:`~lbsim.whatif.run` (the replays through the run lifecycle, the bootstrap),
:mod:`~lbsim.whatif.command` (the command line).
"""
