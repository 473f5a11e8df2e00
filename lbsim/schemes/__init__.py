"""Synchronization schemes: each module holds one scheme's decision logic and registers it.

A new scheme is one module here plus one import line below.
"""

from lbsim.schemes import asp, bsp, dssp, elastic_bsp, lbbsp, loft, ssp, static, wbsp  # noqa: F401  (registration side effect)
from lbsim.schemes.registry import build_scheme, scheme_configs, scheme_names  # noqa: F401
