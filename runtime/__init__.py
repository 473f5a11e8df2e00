"""The reference runtime: real data-parallel training on ``torch.distributed`` (docs/runtime.md).

Runs a scenario's scheme with the same ``lbsim`` scheme and sizing code as the simulator, one
process per worker (plus a parameter-server rank for the ``async`` and ``wbsp`` drivers), and
writes the simulator's records. Which loop runs a scheme follows from its driver alone
(:data:`runtime.config.DRIVER_LOOPS`). Modules:

* :mod:`runtime.launch` — start the ranks on this machine, watch them, name the one that failed;
* :mod:`runtime.worker` — the per-rank entry point (also ``torchrun -m runtime.worker``), tasks;
* :mod:`runtime.loop` — the ``sync`` driver: one round: draw, compute, observe, decide, weighted all-reduce, step;
* :mod:`runtime.ps`, :mod:`runtime.wbsp` — the ``async`` and ``wbsp`` drivers, with a parameter-server rank;
* :mod:`runtime.model` — the numerics models in torch on a flat parameter vector, the shared data stream;
* :mod:`runtime.records` — rank 0's records (and partial records of a failed run);
* :mod:`runtime.inject`, :mod:`runtime.burner` — emulated and real contention;
* :mod:`runtime.resources` — CPU/memory availability readings, core pinning;
* :mod:`runtime.dist` — process group, collectives with rank-naming errors, the failure hook;
* :mod:`runtime.profile` — ``lbsim profile``: calibration as scenario overrides;
* :mod:`runtime.validate`, :mod:`runtime.commands` — ``lbsim validate`` and the CLI commands;
* :mod:`runtime.config` — options and the checks that a scenario can run;
* :mod:`runtime.ddp` — LB-BSP as a library for ordinary DDP scripts under ``torchrun`` (docs/library.md).

Never imports ``simulator`` or ``simpy``; torch is imported only where a rank needs it.
"""
