"""profilectl's own files: atomic writes that honour the umask, JSON read back into typed stages.

Every file profilectl writes (env.json, manifest.json, summary.json, tables) is written to a
temporary name in the same folder and renamed, so a reader never sees half a file; every file it
reads back goes through `load_typed`, so a file that does not fit its type is one line naming it.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any, Callable, TypeVar

from profilectl.errors import FormatError

T = TypeVar("T")


def _file_mode() -> int:
    """0666 minus the process umask: what open() would give a new file."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def write_atomic(path: Path, write: Callable[[Any], None], binary: bool = False) -> None:
    """Write through `write(fh)` to a temp file beside `path`, fsync, then rename over it."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with (os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", newline="")) as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, _file_mode())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write_text_atomic(path: Path, text: str) -> None:
    write_atomic(path, lambda fh: fh.write(text))


def not_a_regular_file(path: Path) -> str | None:
    """What stands at `path` when it is neither absent, a regular file nor a symbolic link (which is
    replaced itself): 'a character device', 'a folder' ... Such a thing is never replaced."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"unreadable ({exc.strerror})"
    if stat.S_ISREG(mode) or stat.S_ISLNK(mode):
        return None
    kinds = ((stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
             (stat.S_ISFIFO, "a named pipe (fifo)"), (stat.S_ISSOCK, "a socket"))
    return next((name for test, name in kinds if test(mode)), "not a regular file")


class NotARegularFile(FileExistsError):
    """`write_text_new(replace=True)` found something that is not a regular file at the path."""


def write_text_new(path: Path, text: str, replace: bool = False) -> None:
    """`text` as a complete file at `path`, which must not exist (not even as a symbolic link)
    unless `replace`; a link there is replaced itself, never followed. FileExistsError when taken.
    Never replaces anything but a regular file or a link (NotARegularFile): not a device node such as
    /dev/null, a fifo, a socket or a folder, with or without `replace`."""
    standing = not_a_regular_file(path)
    if standing:
        raise NotARegularFile(f"{path} is {standing}")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", newline="") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, _file_mode())
        if replace:
            standing = not_a_regular_file(path)  # again, just before: it may have appeared meanwhile
            if standing:
                raise NotARegularFile(f"{path} is {standing}")
            os.replace(tmp, path)
            return
        try:
            os.link(tmp, path)  # atomic and never overwrites: fails on any existing name
        except FileExistsError:
            raise
        except OSError:  # a file system without hard links: claim the name exclusively, then fill it
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600))
            os.replace(tmp, path)
    finally:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def write_json_atomic(path: Path, payload: Any, indent: int | None = 2) -> None:
    """JSON, atomically. json.dumps (not json.dump) so indent=None uses the C encoder: several times
    faster for large summaries."""
    text = json.dumps(payload, indent=indent, default=str, ensure_ascii=False) + "\n"
    write_text_atomic(path, text)


def read_json(path: Path) -> Any:
    """A JSON file, or a one-line FormatError naming the file (and the line where it breaks)."""
    try:
        with open(path, "rb") as fh:
            return json.loads(fh.read())
    except OSError as exc:
        raise FormatError(f"{path}: cannot read ({exc.strerror})") from None
    except UnicodeDecodeError:
        raise FormatError(f"{path}: not valid JSON (not UTF-8 text)") from None
    except json.JSONDecodeError as exc:
        raise FormatError(f"{path}:{exc.lineno}: not valid JSON (truncated?): {exc.msg}") from None
    except RecursionError:
        raise FormatError(f"{path}: not valid JSON (nested too deeply)") from None


def load_typed(cls: type[T], data: Any, source: str | Path, what: str | None = None) -> T:
    """`data` (parsed JSON) as an instance of the frozen dataclass `cls`: every field's type is
    checked, lists become tuples, unknown keys are ignored (newer writers may add keys).
    A mismatch is one FormatError line: '<source>: not a valid <what>: wrong value type for field ...'."""
    import dacite  # imported here: only commands that read files back need it

    label = what or cls.__name__
    if not isinstance(data, dict):
        raise FormatError(f"{source}: not a valid {label}: expected a JSON object, found {type(data).__name__}")
    try:
        return dacite.from_dict(cls, data, config=dacite.Config(cast=[tuple], strict=False))
    except dacite.DaciteError as exc:
        raise FormatError(f"{source}: not a valid {label}: {exc}") from None
    except (TypeError, ValueError) as exc:
        raise FormatError(f"{source}: not a valid {label}: {exc}") from None


def read_typed(cls: type[T], path: Path, what: str | None = None) -> T:
    return load_typed(cls, read_json(path), path, what)
