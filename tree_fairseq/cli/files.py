"""Files written whole or not at all: the one place the plugin's commands and scripts do that.

A file is written under a name of its own beside its final path (``.NAME.partial-XXXXXXXX``, in
the same folder, so that the rename cannot cross file systems) and renamed onto the path once
complete. A run that stops part-way (an error, Ctrl-C, SIGTERM) leaves the earlier file or none,
never half of one, and removes its partial file (SIGKILL leaves it: a hidden file that nothing
reads). Two runs writing one path at once each write their own partial file, so the path ends up
as one of them whole, never a mix of both; refusing the second run is the caller's (e.g. with
:func:`tree_fairseq.cli.locking.output_lock`). A caller that holds such a lock may use the fixed
name ``PATH.tmp`` instead (``locked=True``), which the next run finds and removes after a SIGKILL.
The file gets the permissions ``open()`` would give it (0666 less the umask), not the 0600 of a
temporary file. A path that is a symlink (also one to a file not yet written) is written at the file
it leads to, so the link stays a link and the file it names is the one that changes.

Only the standard library is imported (and :mod:`tree_fairseq.cli.termination`, which is too).
"""

import json
import os
import shlex
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

from tree_fairseq.cli.termination import removed_on_sigterm


def current_umask() -> int:
    """The process's umask: from /proc where Linux shows it, else by setting it and setting it back
    (for an instant, in which another thread's new file would get umask 0)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0)
    os.umask(mask)
    return mask


def resolved_output(path):
    """The file an output ``path`` writes: the file a link leads to (replacing the link itself by
    a file would leave the file it names as it was), but never one a device link resolves to
    (stdout's), and ``path`` itself otherwise."""
    if os.path.islink(path) and not leads_to_a_device(path):
        return os.path.realpath(path)
    return path


@contextmanager
def replacing(path, locked: bool = False) -> Iterator[str]:
    """A path beside ``path`` for the body to write; renamed onto ``path`` when the body ends
    without an exception, removed otherwise. With ``locked`` the caller holds the output's lock (no
    other run writes there) and the partial file is ``PATH.tmp``: a name the next run can find and
    remove when a run was killed outright. A link is followed: the file it leads to is replaced."""
    path = resolved_output(path)
    if locked:
        partial = os.fspath(path) + ".tmp"
    else:
        directory, name = os.path.split(os.path.abspath(path))
        descriptor, partial = tempfile.mkstemp(prefix=f".{name}.partial-", dir=directory)
        try:
            os.fchmod(descriptor, 0o666 & ~current_umask())
        finally:
            os.close(descriptor)
    try:
        with removed_on_sigterm(partial):
            yield partial
            os.replace(partial, path)
    finally:
        if os.path.lexists(partial):
            os.remove(partial)


def write_text(path, text: str, locked: bool = False) -> None:
    """``text`` as ``path`` (UTF-8, newlines as given), whole or not at all (``locked``: :func:`replacing`)."""
    with replacing(path, locked) as partial:
        with open(partial, "w", encoding="utf-8", newline="") as out:
            out.write(text)


def read_lines(path: str) -> list[str]:
    """The lines of a file (split at newlines only), trailing whitespace stripped as sacreBLEU's
    command line strips it. Bytes that are not UTF-8, a carriage return inside a line (which
    would split it in two where ``wc -l`` counts one) and a byte-order mark (read as part of the
    first word) are refused, naming the line."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise ValueError(f"{path} line {line}: bytes that are not UTF-8 ({data[error.start:error.end]!r}): "
                         "give UTF-8 text") from None
    if text.startswith("\ufeff"):  # read as part of the first word: that sentence scored against another word
        raise ValueError(f"{path} line 1 starts with a UTF-8 byte-order mark (bytes EF BB BF): remove it, "
                         f"e.g. sed -i '1s/^\\xEF\\xBB\\xBF//' {shlex.quote(path)}")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for number, line in enumerate(lines, 1):
        if "\r" in line.rstrip("\r"):
            raise ValueError(f"{path} line {number} holds a carriage return inside the line: one test sentence "
                             "per line, ended by a newline")
    return [line.rstrip() for line in lines]


def write_lines(path, lines, locked: bool = False) -> None:
    """One line of ``lines`` a line of ``path`` (each ended by a newline), whole or not at all."""
    write_text(path, "".join(line + "\n" for line in lines), locked)


def write_json(path, value, sort_keys: bool = False, locked: bool = False) -> None:
    """``value`` as indented JSON ending in a newline, whole or not at all."""
    write_text(path, json.dumps(value, indent=1, sort_keys=sort_keys) + "\n", locked)


def same_file(path, other) -> bool:
    """Whether two paths name one file: the same file when both exist, else the same path once
    links are followed (a link to a file not yet written names that file)."""
    if os.path.exists(path) and os.path.exists(other):
        return os.path.samefile(path, other)
    return os.path.realpath(path) == os.path.realpath(other)


def leads_to_a_device(path: str) -> bool:
    """Whether ``path`` or a link it leads through is in /dev or /proc (``/dev/stdout`` resolves to
    whatever the standard output is, a regular file when it is redirected: replacing the link
    would break the device for every later program)."""
    def folder_resolved(path):  # the links of the folders followed, not of the file
        return os.path.join(os.path.realpath(os.path.dirname(os.path.abspath(path))), os.path.basename(path))

    path = folder_resolved(path)
    for _ in range(40):
        if path.startswith(("/dev/", "/proc/")):
            return True
        if not os.path.islink(path):
            return False
        path = folder_resolved(os.path.join(os.path.dirname(path), os.readlink(path)))
    return True  # a loop of links


def check_output(option: str, output, inputs) -> None:
    """Refuse an output (named by ``option``) that exists as other than a plain file (a folder, a
    device, a pipe: the rename of :func:`replacing` would put a file in the place of it, or of the
    link leading to it), with no folder to be written in, or that is one of ``inputs``,
    (description, path) pairs: writing it would replace that input."""
    if os.path.exists(output) and not os.path.isfile(output) or leads_to_a_device(output):
        raise ValueError(f"{option} {output} is {'a folder' if os.path.isdir(output) else 'not a plain file'}: "
                         "name a file")
    folder = os.path.dirname(os.path.realpath(output))  # where replacing() writes: links followed
    if not os.path.isdir(folder):
        raise ValueError(f"{option} {output}: no folder {folder} to write it in")
    for given, path in inputs:
        if same_file(output, path):
            raise ValueError(f"{option} {output} is an input ({given}): writing it would replace it; "
                             "name another file")
