"""SIGTERM ends a run as Ctrl-C does: what it registered (a staging folder, a lock) is removed.

The handler never raises into the interrupted code (an exception raised while a finaliser runs is
ignored by Python, and the run would go on). It stops the run's worker processes (SIGTERM, then
SIGKILL for any still alive after 10 s), runs the
registered clean-ups, restores SIGTERM's default action and sends the signal again: the run ends
with the usual status of a SIGTERM (143 in a shell). Processes forked while the handler is
installed (multiprocessing pools, fairseq-preprocess's among them) start with SIGTERM's default
action, so that a pool stops its workers exactly as without the handler; one forked once the
handler has begun (a pool replaces a worker that was stopped) exits at once.
"""

import multiprocessing
import os
import shutil
import signal
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager

_cleanups: list[Callable[[], None]] = []
_previous = None
_fork_hook_registered = False
_terminating = False


@contextmanager
def removed_on_sigterm(path: str):
    """Remove the file or folder ``path`` when SIGTERM ends the run inside the body."""
    def remove() -> None:
        if os.path.isdir(path):
            shutil.rmtree(path, ignore_errors=True)
        elif os.path.lexists(path):
            os.remove(path)

    with on_sigterm(remove):
        yield


@contextmanager
def on_sigterm(cleanup: Callable[[], None]):
    """Run ``cleanup`` (after the newer ones) when SIGTERM ends the run inside the body. Only in the
    main thread of the main interpreter; elsewhere the body runs without it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _install()
    _cleanups.append(cleanup)
    try:
        yield
    finally:
        if cleanup in _cleanups:  # a forked child starts with none
            _cleanups.remove(cleanup)
        if not _cleanups:
            _uninstall()


def _install() -> None:
    global _previous, _fork_hook_registered
    if signal.getsignal(signal.SIGTERM) is _handler:
        return
    if not _fork_hook_registered:
        os.register_at_fork(after_in_child=_default_in_child)
        _fork_hook_registered = True
    _previous = signal.signal(signal.SIGTERM, _handler)


def _uninstall() -> None:
    if signal.getsignal(signal.SIGTERM) is _handler:
        signal.signal(signal.SIGTERM, _previous if _previous is not None else signal.SIG_DFL)


def _default_in_child() -> None:
    if _terminating:
        os._exit(128 + signal.SIGTERM)
    if signal.getsignal(signal.SIGTERM) is _handler:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _cleanups.clear()


def _live_children() -> list[int]:
    """The process ids of this process's children that have not exited: from ``/proc`` (every
    thread's children), else multiprocessing's list of its own. Not multiprocessing's resource
    tracker, started beside spawned workers: it ignores SIGTERM (a SIGKILL would come only after
    10 s), and ends by itself once the run has ended."""
    try:
        pids = set()
        for thread in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{thread}/children") as f:
                pids.update(int(pid) for pid in f.read().split())
    except OSError:
        return [child.pid for child in multiprocessing.active_children()]
    live = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state not in ("Z", "X") and not _resource_tracker(pid):
            live.append(pid)
    return live


def _resource_tracker(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"multiprocessing.resource_tracker" in f.read()
    except OSError:
        return False


def _handler(signum, frame) -> None:
    global _terminating
    _terminating = True
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    # Every process the run forked, seen by the kernel (a worker forked just before the flag may
    # not be in multiprocessing's list yet); those forked from now on exit at once.
    # A child still alive after 10 s of SIGTERMs (one forked while another thread held a lock can
    # hang in C, where no handler runs) gets SIGKILL.
    deadline = time.monotonic() + 10
    while children := _live_children():
        stop = signal.SIGTERM if time.monotonic() < deadline else signal.SIGKILL
        for pid in children:
            try:
                os.kill(pid, stop)
            except ProcessLookupError:
                pass
        if stop == signal.SIGKILL:
            break
        time.sleep(0.05)
    for cleanup in reversed(_cleanups):
        try:
            cleanup()
        except OSError:
            pass
    os.kill(os.getpid(), signal.SIGTERM)
