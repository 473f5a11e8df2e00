"""The reference runtime: real data-parallel training on ``torch.distributed`` (docs/runtime.md).

Runs a scenario's scheme with the same ``lbsim`` scheme and sizing code as the simulator, one
process per worker (plus a parameter-server rank for the ``async`` and ``wbsp`` drivers), and
writes the simulator's records. Which loop runs a scheme follows from its driver alone
(:data:`lbsim.runtime.config.DRIVER_LOOPS`). Modules:

* :mod:`lbsim.runtime.launch` — start the ranks on this machine, watch them, name the one that failed;
* :mod:`lbsim.runtime.server_preload` — the lbsim modules the fork server imports once for every rank;
* :mod:`lbsim.runtime.worker` — the per-rank entry point (also ``torchrun -m lbsim.runtime.worker``), tasks;
* :mod:`lbsim.runtime.loop` — the ``sync`` driver: one round: draw, compute, observe, decide, weighted all-reduce, step;
* :mod:`lbsim.runtime.ps`, :mod:`lbsim.runtime.wbsp` — the ``async`` and ``wbsp`` drivers, with a parameter-server rank;
* :mod:`lbsim.runtime.model` — the numerics models in torch on a flat parameter vector, the shared data stream;
* :mod:`lbsim.runtime.records` — rank 0's records (and partial records of a failed run);
* :mod:`lbsim.runtime.inject`, :mod:`lbsim.runtime.burner` — emulated and real contention;
* :mod:`lbsim.runtime.resources` — CPU/memory availability readings, core pinning;
* :mod:`lbsim.runtime.dist` — process group, collectives with rank-naming errors, the failure hook;
* :mod:`lbsim.runtime.profile` — ``lbsim profile``: calibration as scenario overrides;
* :mod:`lbsim.runtime.profile_fit` — its fits, without torch (the launcher of ``lbsim validate`` refits with them);
* :mod:`lbsim.runtime.validate`, :mod:`lbsim.runtime.commands` — ``lbsim validate`` and the CLI commands;
* :mod:`lbsim.runtime.config` — options and the checks that a scenario can run;
* :mod:`lbsim.runtime.ddp` — LB-BSP as a library for ordinary DDP scripts under ``torchrun`` (docs/library.md).

Never imports ``simulator`` or ``simpy``; torch is imported only where a rank needs it.
"""
