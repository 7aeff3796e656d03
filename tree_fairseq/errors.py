"""One line, not a traceback, for what the plugin refuses inside fairseq's own commands.

fairseq-train, fairseq-generate and fairseq-interactive import the plugin (``--user-dir``) and call
its tasks and models, whose refusals (a tree model with ``--task translation``, a data-bin without
trees, a node dictionary that does not match, a ``--max-tokens`` below a sentence's leaves plus
nodes, ...) are exceptions with a message that says what to do. Uncaught, Python prints them as a
traceback whose last line is that message. :func:`install` puts an exception hook in front of
Python's: an exception the plugin itself raised (``ValueError``, which :class:`TreeError` is, or
``OSError``, with the innermost frame of its traceback in this package) is printed as
``PROG: error: MESSAGE`` and the command exits with status 1; every other exception, and every
exception when ``TREE_FAIRSEQ_TRACEBACK=1`` is set, is left to the hook that was there before (a
programming error keeps its traceback).

A refusal raised while a DataLoader worker reads a batch (fairseq's default ``--num-workers 1``)
reaches the main process re-raised by torch (``ExceptionWrapper.reraise`` in ``torch._utils``):
the same type, whose message is ``Caught TYPE in DataLoader worker process N.`` and the worker's
formatted traceback. The innermost frame and message of that traceback are the original's, and
are read in its place (:func:`worker_original`): the same one line as with ``--num-workers 0``.

A refusal that fairseq's own code catches and replaces by a bare ``Exception`` of its own (the
trainer's "Cannot load model parameters from checkpoint ...", around a refusal of a module's
``upgrade_state_dict_named`` on resume) is one line too, the refusal's message followed by
fairseq's (:func:`wrapped_refusal`).
"""

import os
import re
import sys

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
REFUSALS = (ValueError, OSError)

#: What torch's ExceptionWrapper.reraise puts between its first line and the worker's traceback.
WORKER_TRACEBACK = "\nOriginal Traceback (most recent call last):\n"
_FRAME = re.compile(r'^  File "(.*)", line \d+, in ')


def _innermost_file(error: BaseException) -> str | None:
    frame = error.__traceback__
    if frame is None:
        return None
    while frame.tb_next is not None:
        frame = frame.tb_next
    return os.path.abspath(frame.tb_frame.f_code.co_filename)


def worker_original(error: BaseException) -> tuple[str, str] | None:
    """For an exception that torch re-raised from a DataLoader worker (raised in
    ``torch._utils``, its message ``Caught ... Original Traceback ...``): the file of the
    innermost frame of the worker's traceback and the worker exception's message; else None."""
    innermost = _innermost_file(error)
    if innermost is None or not innermost.endswith(os.path.join("torch", "_utils.py")):
        return None
    _, marker, original = str(error).partition(WORKER_TRACEBACK)
    lines = original.splitlines()
    frames = [index for index, line in enumerate(lines) if _FRAME.match(line)]
    if not marker or not frames:
        return None
    after = lines[frames[-1] + 1:]
    start = next((index for index, line in enumerate(after) if not line.startswith(" ")), None)
    if start is None:
        return None
    # "TYPE: MESSAGE" (TYPE module-qualified unless built in), or "TYPE" alone for an empty message
    _, _, message = "\n".join(after[start:]).strip("\n").partition(": ")
    return _FRAME.match(lines[frames[-1]]).group(1), message


def raised_by_plugin(error: BaseException) -> bool:
    """Whether the innermost frame of ``error``'s traceback is this package's code (for an
    exception re-raised from a DataLoader worker, the innermost frame of the worker's)."""
    original = worker_original(error)
    innermost = os.path.abspath(original[0]) if original else _innermost_file(error)
    return innermost is not None and innermost.startswith(PACKAGE_DIR + os.sep)


def wrapped_refusal(error: BaseException) -> BaseException | None:
    """The plugin's refusal that fairseq's code was handling when it raised ``error``, a bare
    ``Exception`` of its own (innermost frame in the fairseq package); else None."""
    context = error.__context__
    if type(error) is not Exception or context is None or error.__suppress_context__:
        return None
    innermost = _innermost_file(error)
    if innermost is None or f"{os.sep}fairseq{os.sep}" not in innermost:
        return None
    return context if isinstance(context, REFUSALS) and raised_by_plugin(context) else None


def one_line(error: BaseException) -> str:
    """``PROG: error: MESSAGE``, PROG the command's name (MESSAGE the worker exception's for
    one re-raised from a DataLoader worker)."""
    program = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "python"
    original = worker_original(error)
    message = (original[1] if original else str(error)) or type(error).__name__
    return f"{program}: error: {message}"


def _hook(kind, error, traceback, previous):
    if os.environ.get("TREE_FAIRSEQ_TRACEBACK", "") in ("", "0"):
        if issubclass(kind, REFUSALS) and raised_by_plugin(error):
            print(one_line(error), file=sys.stderr)
            return
        refusal = wrapped_refusal(error)
        if refusal is not None:
            print(f"{one_line(refusal)} ({error})", file=sys.stderr)
            return
    previous(kind, error, traceback)


def install() -> None:
    """Put the hook in front of the current one (once)."""
    if getattr(sys.excepthook, "tree_fairseq", False):
        return
    previous = sys.excepthook

    def hook(kind, error, traceback):
        _hook(kind, error, traceback, previous)

    hook.tree_fairseq = True
    sys.excepthook = hook
