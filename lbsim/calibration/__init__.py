"""Calibration from measurements: fit t(b), links, overlap and the collective; predict by simulation.

``lbsim calibrate MEASURED.csv --fit-placements 2,4,11,22,1111 --gradient-bytes N --out DIR``:
:mod:`~lbsim.calibration.measured` reads the rows, :mod:`~lbsim.calibration.fit` fits the model
of :mod:`~lbsim.calibration.model` on the fit placements only, :mod:`~lbsim.calibration.run`
writes ``fit.yaml`` and predicts every row with a simulation. :mod:`~lbsim.calibration.pollux`
is Pollux's own throughput model, fitted on the same rows for comparison, and
:mod:`~lbsim.calibration.report` computes the tables of ``docs/validation.md``.

``lbsim calibrate-nccl LOGS... --fit-nodes 1,2 --out DIR`` (:mod:`~lbsim.calibration.nccl_command`):
:mod:`~lbsim.calibration.nccl_tests` reads nccl-tests ``all_reduce_perf`` logs,
:mod:`~lbsim.calibration.nccl_fit` fits the figures of NCCL's all-reduce model
(:mod:`lbsim.network.nccl`) on the chosen node counts, :mod:`~lbsim.calibration.nccl_report`
scores every row with an interval, :mod:`~lbsim.calibration.nccl_scenario` writes the scenario and
:mod:`~lbsim.calibration.nccl_tables` computes the nccl-tests tables of the docs
(``docs/tools/`` holds the scripts that write both into the pages).
"""
