"""User-facing input errors.

Every mistake a user can make in a scenario, an override or a trace file is raised as
:class:`InputError`: it carries the *key path* (``cluster.groups[1].instance``) or file path
that is wrong and a message that says what is allowed. The CLI prints it on one line and exits
with code 2; nothing else in lbsim raises it.
"""

from __future__ import annotations


class InputError(Exception):
    """Invalid user input: a key path (or file) and what is allowed there."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}" if path else message)
        self.path = path
        self.message = message

    def under(self, prefix: str) -> InputError:
        """The same error with ``prefix`` prepended to its key path."""
        if not prefix:
            return self
        path = f"{prefix}{'' if self.path.startswith('[') else '.'}{self.path}" if self.path else prefix
        return InputError(path, self.message)
