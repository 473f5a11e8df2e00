"""Per-sample cost: sequence lengths, what a sample of length L costs, and who computes which sample.

:mod:`~lbsim.samples.config` is the scenario's ``workload.sample_cost`` section,
:mod:`~lbsim.samples.lengths` the length distributions (a file of lengths or a histogram, a capped
lognormal, a constant), :mod:`~lbsim.samples.model` the resolved model both engines and the schemes
use: each round's seeded draw of lengths, ``c(L) = a L + b L^2`` in units of the reference sample,
a worker's work and tokens under packing or padding, and the assignment of a round's samples to
workers (:func:`~lbsim.samples.model.assign_round`). docs/sample-cost.md states the model.
"""
