"""SIGTERM ends a run as Ctrl-C does: what it registered (a staging folder, a lock) is removed.

The handler never raises into the interrupted code (an exception raised while a finaliser runs is
ignored by Python, and the run would go on). It stops the run's worker processes, runs the
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


def _handler(signum, frame) -> None:
    global _terminating
    _terminating = True
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    # A worker forked just before the flag was set joins the list a moment later: look until the
    # list has stayed empty for a while (at most a few seconds in all).
    deadline = time.monotonic() + 10
    quiet_since = time.monotonic()
    while time.monotonic() < deadline and time.monotonic() - quiet_since < 0.3:
        children = multiprocessing.active_children()
        if children:
            for child in children:
                child.terminate()
            for child in children:
                child.join(timeout=max(0.0, deadline - time.monotonic()))
            quiet_since = time.monotonic()
        else:
            time.sleep(0.05)
    for cleanup in reversed(_cleanups):
        try:
            cleanup()
        except OSError:
            pass
    os.kill(os.getpid(), signal.SIGTERM)
