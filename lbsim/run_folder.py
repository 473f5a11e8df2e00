"""One output folder, one complete run: staging, an atomic swap, and a lock.

A command that writes a run folder ``OUT`` (``run``, ``compare``, ``train``, ``profile``,
``validate``) writes every file into a temporary sibling ``OUT/../.OUT.<random>.tmp`` and, when the
run is complete, swaps it with ``OUT`` in one step (Linux ``renameat2(RENAME_EXCHANGE)``; elsewhere
two renames, the previous folder kept as ``.OUT.<random>.prev`` between them and restored by the
next run if a kill fell in that gap). So:

* ``OUT`` always holds exactly one complete run: never files of two runs side by side, never a
  half-written one; a run killed at any point (even SIGKILL) leaves the previous complete run
  intact, and its leftovers (``.OUT.*.tmp``) are removed by the next run into ``OUT``;
* a run that fails with lbsim's own error leaves ``OUT`` as it was (a runtime run whose rank
  crashed is a complete run: its folder, with ``failure.json``, is swapped in).

:func:`folder_lock` is the one lock lbsim uses (``flock`` on a file, non-blocking): a second
command writing the same folder is refused with exit 2 while the first runs. Run folders are locked
through the sibling ``.OUT.lock`` (removed after the run); a sweep through ``OUT/.lock``.

An existing ``OUT`` that is not empty and holds no lbsim output is never replaced (a mistyped
``--out ~`` must not swap a home folder away). Which folder a run goes to in the first place
(:func:`choose_out`): a default folder that holds an earlier run is kept and the new run gets a
fresh name (``DIR-2``, ...), unless ``--replace``; a folder named with ``--out`` is replaced, and
the command says so.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import errno
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from lbsim.errors import InputError
from lbsim.metrics.writers import fsync_dir, new_folder_mode

# A folder holding any of these was written by lbsim (a run, compare, train, profile, validate, advise or whatif).
RUN_MARKERS = ("scenario.resolved.yaml", "summary.json", "compare.csv", "failure.json", "profile.json",
               "validation.json", "advise.json", "whatif.json")


def _cannot_write(folder: Path, err: OSError) -> InputError:
    """``--out``'s folder refuses new files; say why in words a user can act on."""
    why = err.strerror or str(err)
    if err.errno == errno.ENOENT and folder.is_dir():  # it exists, yet "no such file": /proc, /sys and the like
        why = f"the folder exists but takes no new files ({why}: a virtual file system?)"
    elif err.errno in (errno.EACCES, errno.EPERM):
        why = f"no permission to create files there ({why})"
    elif err.errno == errno.EROFS:
        why = f"a read-only file system ({why})"
    return InputError("--out", f"cannot write to {folder}: {why}; choose another --out")


@contextlib.contextmanager
def folder_lock(lock_file: Path, target: Path, *, what: str = "run", remove: bool = False) -> Iterator[None]:
    """Hold an exclusive lock on ``lock_file`` for the block, or refuse at once (InputError on ``--out``).

    With ``remove`` the lock file is deleted on release; a process that opened it just before is
    not fooled: after locking, the path must still name the file it locked, else it tries again.
    """
    try:
        import fcntl
    except ImportError:  # not POSIX: no lock
        yield
        return
    while True:
        try:
            fh = open(lock_file, "a")  # noqa: SIM115 — held for the whole block
        except OSError as err:
            raise _cannot_write(lock_file.parent, err) from None
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            fh.close()
            raise InputError("--out", f"another lbsim {what} is writing to {target}; wait for it or use another --out") from None
        try:
            same = os.stat(lock_file).st_ino == os.fstat(fh.fileno()).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        fh.close()  # the previous holder removed it between our open and our lock
    try:
        yield
    finally:
        if remove:
            with contextlib.suppress(OSError):
                os.unlink(lock_file)
        fh.close()


def check_replaceable(out: Path) -> None:
    """``out`` may be replaced by a run: absent, empty, or holding lbsim output."""
    if not out.exists():
        return
    if not out.is_dir():
        raise InputError("--out", f"{out} exists and is not a directory; give a directory path")
    try:
        names = {p.name for p in out.iterdir()}
    except OSError as err:
        raise InputError("--out", f"cannot read {out}: {err.strerror or err}") from None
    if names and not names & set(RUN_MARKERS):
        raise InputError("--out", f"{out} is not empty and holds no lbsim run; give a new or an lbsim output folder")


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically (Linux renameat2 RENAME_EXCHANGE); False where that is not available."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    if fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.ENOTSUP):
        return False  # old kernel or a file system without it: two renames instead
    raise OSError(code, os.strerror(code), str(a), None, str(b))


def swap_in(stage: Path, out: Path) -> None:
    """Make the complete folder ``stage`` the new ``out``; the previous ``out`` (if any) is removed."""
    fsync_dir(stage)
    if not out.exists():
        os.rename(stage, out)
    elif _exchange(stage, out):
        shutil.rmtree(stage, ignore_errors=True)  # now the previous run
    else:
        prev = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".prev", dir=out.parent))
        os.rmdir(prev)
        os.rename(out, prev)
        os.rename(stage, out)
        shutil.rmtree(prev, ignore_errors=True)
    fsync_dir(out.parent)


def _recover(out: Path) -> None:
    """Remove what a killed run into ``out`` left; restore the previous run if a kill split the swap.

    Only names made for ``out`` match (``.OUT.<8 random characters>.tmp|prev``): a folder ``OUT.2``
    beside it has its own.
    """
    mine = re.compile(rf"\.{re.escape(out.name)}\.[a-z0-9_]{{8}}\.(tmp|prev)")
    leftovers = [p for p in out.parent.iterdir() if mine.fullmatch(p.name) and p.is_dir() and not p.is_symlink()]
    prevs = sorted((p for p in leftovers if p.name.endswith(".prev")), key=lambda p: p.stat().st_mtime)
    if not out.exists() and prevs:
        os.rename(prevs[-1], out)
        leftovers.remove(prevs[-1])
    for p in leftovers:
        shutil.rmtree(p, ignore_errors=True)


@contextlib.contextmanager
def staged_run(out: Path, *, keep_on: tuple[type[BaseException], ...] = ()) -> Iterator[Path]:
    """Write a run into a temporary sibling of ``out`` (yielded) and swap it in when the block ends.

    Checked before anything is written: ``out`` can be replaced and its parent written (else an
    InputError on ``--out``), and no other lbsim command holds the folder (the lock). When the block
    raises, the staged folder is removed and ``out`` is untouched, unless the exception is one of
    ``keep_on`` (a failed run whose folder is still its complete record): then it is swapped in too.
    """
    out = Path(os.path.abspath(out))
    if out.is_symlink():  # the folder it points to is the one replaced
        out = Path(os.path.realpath(out))
    check_replaceable(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise InputError("--out", f"cannot create {out.parent}: {err.strerror or err}") from None
    with folder_lock(out.parent / f".{out.name}.lock", out, remove=True):
        _recover(out)
        check_replaceable(out)
        try:
            stage = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
        except OSError as err:
            raise _cannot_write(out.parent, err) from None
        new_folder_mode(stage)  # mkdtemp makes 0700; a run folder is as readable as any new folder
        try:
            yield stage
        except keep_on:
            swap_in(stage, out)
            raise
        except BaseException as err:
            shutil.rmtree(stage, ignore_errors=True)
            if isinstance(err, OSError) and err.filename and str(err.filename).startswith(str(stage) + os.sep):
                # name the file as the user knows it (OUT/x), not by the staging folder that is gone now
                where = out / os.path.relpath(err.filename, stage)
                raise OSError(err.errno, err.strerror, str(where)) from err
            raise
        swap_in(stage, out)


# -- where a new run goes: keep an earlier run in the default folder -----------------------------
#
# A default folder (no --out: runs/<scenario>/<scheme>, .../compare, .../runtime/<scheme>, ...) that
# already holds a run is kept: the new run gets the first free name DIR-2, DIR-3, ... and the
# command says so on stderr. --replace writes over the default folder instead. A folder named with
# --out is the user's choice: a run there replaces the earlier one whole, and the
# command says that it did. Nothing else is ever replaced.

MAX_FRESH_NAMES = 10_000  # DIR-2 .. DIR-10000: beyond, the user is asked to choose


def holds_output(path: Path) -> bool:
    """Whether ``path`` is a folder with something in it (an earlier run, or anything else)."""
    try:
        return path.is_dir() and any(path.iterdir())
    except OSError:
        return True  # unreadable: never written over silently


@dataclasses.dataclass(frozen=True)
class OutChoice:
    """Where a run is written and what the command tells the user about it (None: nothing to tell)."""

    path: Path
    note: str | None = None
    replaces: bool = False  # an earlier run in ``path`` is replaced


def choose_out(requested: str | Path | None, default: Path, *, replace: bool = False) -> OutChoice:
    """The folder a run goes to: ``requested`` (``--out``) as given, else ``default`` or a fresh sibling.

    * ``--out DIR``: DIR, replacing an earlier run there (the note says so);
    * no ``--out``, the default folder absent or empty: the default;
    * no ``--out``, the default holds a run, ``replace``: the default, replaced (the note says so);
    * no ``--out``, the default holds a run: the first of ``DIR-2``, ``DIR-3``, ... that does not
      exist, the default kept (the note says where the run went and how to replace instead).
    """
    if requested is not None:
        out = Path(requested)
        return OutChoice(out, f"replaced the earlier run in {out}/" if holds_output(out) else None, holds_output(out))
    if not holds_output(default):
        return OutChoice(default)
    if replace:
        return OutChoice(default, f"replaced the earlier run in {default}/ (--replace)", True)
    for k in range(2, MAX_FRESH_NAMES + 1):
        fresh = default.with_name(f"{default.name}-{k}")
        if not fresh.exists() and not fresh.is_symlink():
            return OutChoice(fresh, f"{default}/ holds an earlier run, kept; this run is in {fresh}/ "
                                    f"(--replace writes over {default}/ instead, --out DIR chooses)")
    raise InputError("--out", f"{default} and {default}-2 .. -{MAX_FRESH_NAMES} all exist; give --out DIR or --replace")
