"""One writer per output folder: an OS file lock on FOLDER/.ctrnas.lock, held while a command writes there.

The lock is `fcntl.flock` on the lock file. The kernel drops it when the holder exits, however it exits
(SIGKILL included), so a dead writer never blocks the next one. While held, the file says who holds it (pid,
host, command, start time); a clean release empties it. So text found in a file we could lock means its
writer died without releasing it: we say so on stderr and take over.

Readers of a prepared dataset folder (`run`, `train`, `warmup`, `study`, `predict --data`) take a shared
lock on it (`reading`): any number of readers at once, and no writer (`prepare`) while one reads, so a
folder is never replaced under a running job. A reader writes no record; a writer refused by readers says so.

The lock file is opened with O_NOFOLLOW and must be a regular file with one link, empty or holding a holder
record: a symlink or another file planted at the lock's path is refused, never truncated or written.

Locks are per process and re-entrant: `ctrnas run` may lock its data folder and then call `prepare`, which
locks the same folder again (a shared lock held by the process is upgraded for the writer, then restored).
POSIX only (TorchRec needs Linux or macOS anyway).
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import stat
import sys
import time
from pathlib import Path

from ctrnas.errors import FolderInUseError, PathError

LOCK_FILE = ".ctrnas.lock"

_held: dict[str, "FolderLock"] = {}  # resolved folder -> the lock this process holds on it
_pending: dict[str, "FolderLock"] = {}  # resolved folder -> a reader's lock waiting for its folder to be made


def _describe(text: str) -> str:
    """A holder record as words ("process 123 on host h (`ctrnas prepare`, since 2026-01-01 10:00:00)")."""
    try:
        rec = json.loads(text)
        return (f"process {rec['pid']} on host {rec['host']} (`ctrnas {rec['command']}`, "
                f"since {rec['started']})")
    except (ValueError, KeyError, TypeError):
        return "an unknown process"


def _holder(fd: int, tries: int = 50) -> str:
    """The holder's description; a holder that has just taken the lock may not have written its record yet,
    so an empty or half-written record is read again for up to ~0.5 s before it counts as unknown."""
    for _ in range(tries):
        text = os.pread(fd, 4096, 0).decode("utf-8", "replace")
        if (described := _describe(text)) != "an unknown process":
            return described
        time.sleep(0.01)
    return described


def _ensure_folder(folder: Path) -> None:
    if folder.exists() and not folder.is_dir():
        raise PathError(folder, "exists and is not a folder; give a folder path for the output")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise PathError(folder, "a part of this path is a file, not a folder") from None
    except PermissionError:
        raise PathError(folder, "cannot create this folder: permission denied") from None
    except OSError as e:
        raise PathError(folder, f"cannot create this folder: {e.strerror}") from None


def _open_lock_file(path: Path, folder: Path, shared: bool = False) -> int | None:
    """The lock file's descriptor: never through a symlink, and only a regular file with one link that is
    empty or holds a holder record (so a lock never truncates or writes a file it did not create)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o644)
    except OSError as e:
        if os.path.islink(path):
            raise PathError(path, "is a symbolic link, not a ctrnas lock file; remove it (ctrnas never "
                            "follows or writes through it)") from None
        if shared:  # a read-only dataset folder: nobody can prepare into it either
            return None
        raise PathError(folder, f"cannot write here ({e.strerror})") from None
    st = os.fstat(fd)
    text = os.pread(fd, 4096, 0).decode("utf-8", "replace").strip() if stat.S_ISREG(st.st_mode) else ""
    if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1 or (text and _describe(text) == "an unknown process"
                                                               and not _is_partial_record(text)):
        os.close(fd)
        raise PathError(path, "is not a ctrnas lock file (not a plain file of its own, or it holds other "
                        "data); move it away: ctrnas never truncates a file it did not create")
    return fd


def _is_partial_record(text: str) -> bool:
    """A holder record being written right now (its writer has just taken the lock)."""
    return text.startswith("{") and "\n" not in text and len(text) < 4096 and '"pid"' in text[:20]


class FolderLock:
    """`with FolderLock(folder, "prepare criteo"):` holds the folder's lock (creating the folder) or raises
    FolderInUseError naming the holder. `took_over` is the dead holder's description when we took over.

    `shared=True` is a reader's lock (see the module docstring): it creates no folder, and on one that does
    not exist yet it holds nothing until `acquire` is called again (e.g. after the data stage made it)."""

    def __init__(self, folder: str | Path, command: str, shared: bool = False):
        self.folder, self.command, self.shared = Path(folder), command, shared
        self.path = self.folder / LOCK_FILE
        self.took_over: str | None = None
        self._fd: int | None = None
        self._outer: "FolderLock | None" = None
        self._upgraded = self._exclusive = False
        self._depth = 0

    @property
    def held(self) -> bool:
        return self._fd is not None or self._outer is not None

    def acquire(self) -> "FolderLock":
        if self.held:
            return self
        if self.shared:
            if not self.folder.is_dir():
                # nothing to read yet: the reader's own error says so, or the writer that makes the folder in
                # this process (a run's data stage) hands the lock over when it ends
                _pending[str(self.folder.resolve())] = self
                return self
            _pending.pop(str(self.folder.resolve()), None)
        else:
            _ensure_folder(self.folder)
        key = str(self.folder.resolve())
        outer = _held.get(key)
        if outer is not None:  # this process holds it already
            if outer.shared and not self.shared and not outer._exclusive:
                self._upgrade(outer)
            outer._depth += 1
            self._fd, self._outer = None, outer
            return self
        fd = _open_lock_file(self.path, self.folder, self.shared)
        if fd is None:
            return self
        try:
            fcntl.flock(fd, (fcntl.LOCK_SH if self.shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            if self.shared:
                raise FolderInUseError(f"{self.folder}: being written by {holder}; wait for it to finish") from None
            if holder == "an unknown process":
                holder = "another ctrnas process reading it (run, train, warmup, study or predict)"
            raise FolderInUseError(f"{self.folder}: in use by {holder}; wait for it to finish, or write to "
                                   "another folder") from None
        except OSError as e:  # a file system without locks (some network mounts): go on, but say so
            os.close(fd)
            print(f"ctrnas: {self.folder}: cannot lock this folder ({e.strerror}); make sure no other ctrnas "
                  "writes to it meanwhile", file=sys.stderr)
            self._fd = None
            return self
        self._fd, self._depth, self._exclusive = fd, 1, not self.shared
        _held[key] = self
        if not self.shared:
            self._write_record()
        return self

    def _write_record(self) -> None:
        previous = os.pread(self._fd, 4096, 0).decode("utf-8", "replace").strip()
        if previous:
            self.took_over = _describe(previous)
            print(f"ctrnas: {self.folder}: taking over the lock left by {self.took_over}, which ended "
                  "without releasing it (killed?)", file=sys.stderr)
        record = {"pid": os.getpid(), "host": socket.gethostname(), "command": self.command,
                  "started": time.strftime("%Y-%m-%d %H:%M:%S")}
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, (json.dumps(record) + "\n").encode(), 0)

    def _upgrade(self, outer: "FolderLock") -> None:
        """A writer inside this process's own reader lock: the shared lock becomes exclusive until it ends."""
        try:
            fcntl.flock(outer._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise FolderInUseError(f"{self.folder}: in use by another ctrnas process reading it (run, train, "
                                   "warmup, study or predict); wait for it to finish, or write to another "
                                   "folder") from None
        outer._exclusive, self._upgraded = True, True
        outer.command, command = self.command, outer.command
        try:
            outer._write_record()
        finally:
            outer.command = command

    def release(self) -> None:
        if self.shared and _pending.get(str(self.folder.resolve())) is self:
            del _pending[str(self.folder.resolve())]
        if self._outer is not None:
            outer, self._outer = self._outer, None
            if self._upgraded:  # back to the reader's shared lock
                self._upgraded = False
                os.ftruncate(outer._fd, 0)
                fcntl.flock(outer._fd, fcntl.LOCK_SH)
                outer._exclusive = False
            outer._depth -= 1
            return
        if self._fd is None:
            return
        self._depth -= 1
        if self._depth > 0:
            return
        key = str(self.folder.resolve())
        _held.pop(key, None)
        try:
            if self._exclusive:
                os.ftruncate(self._fd, 0)  # a clean release: nothing for the next holder to report
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
        if key in _pending:  # a reader of this process waited for the folder this writer made
            _pending.pop(key).acquire()

    def __enter__(self) -> "FolderLock":
        return self.acquire()

    def __exit__(self, *exc) -> bool:
        self.release()
        return False


def folder_lock(folder: str | Path, command: str) -> FolderLock:
    """The lock of an output folder for `command` (use as a context manager around all writing there)."""
    return FolderLock(folder, command)


def reading(folder: str | Path, command: str) -> FolderLock:
    """A reader's shared lock on a prepared dataset folder (use as a context manager around the reading)."""
    return FolderLock(folder, command, shared=True)
