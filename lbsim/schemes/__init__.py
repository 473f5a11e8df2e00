"""Synchronization schemes: each module holds one scheme's decision logic and registers it.

A new scheme is one module: a config dataclass, a class with a ``driver`` (``sync``, ``async`` or
``wbsp``: :mod:`lbsim.schemes.base`) and one ``@register_scheme`` line. Every module of this
package is imported here (in name order), so the module alone registers it; a scheme kept outside
the package is named in the ``LBSIM_SCHEME_MODULES`` environment variable (comma-separated
importable modules), which every engine process, runtime ranks included, reads when it loads the
schemes. Both engines then run it through its driver's loop: neither lists scheme names. The
registry is :mod:`lbsim.schemes.registry` (this package re-exports nothing: the registry imports it
to load every scheme, so a re-export would make the two import each other).
"""

import importlib
import os
import pkgutil

for _module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
    importlib.import_module(f"{__name__}.{_module}")  # registration side effect
for _module in filter(None, (m.strip() for m in os.environ.get("LBSIM_SCHEME_MODULES", "").split(","))):
    importlib.import_module(_module)
