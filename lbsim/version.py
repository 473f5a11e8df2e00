"""lbsim's one version number: ``lbsim --version``, ``lbsim.__version__``, provenance.json, sweep.json
and the package metadata (setup.py reads it from this file)."""

__version__ = "0.2.0"
