"""One run at a time per output: two runs writing the same output would mix their work.

A run holds ``OUTPUT.lock`` (beside the output itself, links resolved; created atomically, holding its process id, host, start time and
command) while it writes OUTPUT, and removes it when it ends (also on an error, Ctrl-C or
SIGTERM). A second run on the same output is refused, naming the first. A lock left by a run that
was killed (SIGKILL, a machine that went down) is taken over when its process no longer runs on
this host; a lock of another host is never taken over (the message says how to remove it).
Takeovers are one at a time (``flock`` on ``OUTPUT.lock.takeover``, a file left in place), each
reading the lock again once it has its turn: two runs that found the same stale lock cannot both
remove it, the second one the lock the first had just made.
"""

import contextlib
import fcntl
import json
import os
import socket
import sys
import time
from contextlib import contextmanager

from tree_fairseq.cli.termination import removed_on_sigterm


@contextmanager
def output_lock(output: str, option: str):
    """Hold ``output + ".lock"`` for the body; ValueError when another live run holds it.
    ``option`` names the output in messages (``--output``, ``--destdir``)."""
    # The lock of what is written, not of its name: a symlink to the output (or to a folder above
    # it) names the same output, and must find the same lock.
    lock = os.path.realpath(output) + ".lock"
    _acquire(lock, output, option)
    try:
        with removed_on_sigterm(lock):
            yield
    finally:
        try:
            os.remove(lock)
        except FileNotFoundError:
            pass


@contextmanager
def empty_folder(folder: str, option: str):
    """Hold ``folder`` (made if absent) for the body of a run that does not resume: its lock is taken
    before it is found empty, so two runs at once cannot both find it so. ValueError for a file, a
    folder another run holds, or one not empty (a previous run's, whose checkpoint fairseq would go on
    from)."""
    make_folder(folder, option)
    with output_lock(folder, option):
        if os.listdir(folder):
            raise ValueError(f"{option} {folder} is not empty (a previous run's?): this script does not resume a "
                             f"run; remove it or give another {option}")
        yield


def make_folder(folder, option: str) -> None:
    """``folder`` made if absent (with the folders above it); ValueError in one line naming
    ``option`` when it cannot be: a file, a link to nothing, a file on the way, no permission."""
    folder = os.fspath(folder)
    if os.path.islink(folder) and not os.path.exists(folder):
        raise ValueError(f"{option} {folder} is a link to {os.readlink(folder)}, which does not exist: "
                         f"make that folder, or give another {option}")
    if os.path.exists(folder) and not os.path.isdir(folder):
        raise ValueError(f"{option} {folder} is a file: give a new or empty folder")
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as error:
        above = os.path.dirname(os.path.abspath(folder))
        while os.path.dirname(above) != above and (os.path.isdir(above) or not os.path.lexists(above)):
            above = os.path.dirname(above)
        why = f"{above} is not a folder" if not os.path.isdir(above) else error.strerror
        raise ValueError(f"{option} {folder}: cannot make the folder ({why})") from None


def _acquire(lock: str, output: str, option: str) -> None:
    record = json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "started": time.strftime("%Y-%m-%d %H:%M:%S"),
                         "command": " ".join(sys.argv)})
    for _ in range(3):
        try:
            descriptor = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            holder = _holder(lock)
            if holder is not None and not _alive(holder):
                _remove_if_stale(lock)
                continue
            about = (f"process {holder.get('pid')} on {holder.get('host')}, started {holder.get('started')}: "
                     f"{holder.get('command')}" if holder else "a run whose lock file cannot be read")
            raise ValueError(f"{option} {output} is being written by another run ({about}); wait for it to end, "
                             f"or remove {lock} if no such run is alive") from None
        with os.fdopen(descriptor, "w", encoding="utf-8") as f:
            f.write(record)
        return
    raise ValueError(f"{option} {output}: cannot take {lock}")


def _remove_if_stale(lock: str) -> None:
    """Remove ``lock`` if it is (still) the lock of a run that no longer runs. The lock is read again
    under the takeover's flock: what was read before may be gone, taken over by another run that
    holds it now. Under the flock the lock read cannot change before it is removed (only its live run
    or a takeover removes a lock), so a live run's lock is never removed."""
    with contextlib.ExitStack() as turn:
        try:
            fcntl.flock(turn.enter_context(open(lock + ".takeover", "a")), fcntl.LOCK_EX)  # released on close
        except OSError as error:
            raise ValueError(f"{lock} is the lock of a run that no longer runs, but cannot be taken over here "
                             f"({lock}.takeover: {error.strerror}): remove {lock} if no such run is alive") from None
        holder = _holder(lock)
        if holder is not None and not _alive(holder):
            print(f"{lock}: taking over the lock of run {holder.get('pid')}, which no longer runs", file=sys.stderr)
            os.remove(lock)


def _holder(lock: str) -> dict | None:
    try:
        with open(lock, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _alive(holder: dict) -> bool:
    """Whether the run of a lock still runs: its process exists on this host (another host's
    cannot be checked: taken as running)."""
    if holder.get("host") != socket.gethostname():
        return True
    try:
        os.kill(int(holder.get("pid")), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, TypeError, ValueError):
        return True
    return True
