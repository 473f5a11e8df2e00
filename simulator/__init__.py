"""The SimPy engine: carries out the decisions of lbsim's schemes on a simulated cluster.

Entry point: :func:`lbsim.simulator.run.simulate`. The engine imports the shared core (``lbsim``) and
never torch; it holds no scheme logic of its own — it asks the scheme and enacts the answer.
"""
