"""One writer per output folder: an OS file lock on FOLDER/.ctrnas.lock, held while a command writes there.

The lock is `fcntl.flock` on the lock file. The kernel drops it when the holder exits, however it exits
(SIGKILL included), so a dead writer never blocks the next one. While held, the file says who holds it (pid,
host, command, start time); a clean release empties it. So text found in a file we could lock means its
writer died without releasing it: we say so on stderr and take over.

Locks are per process and re-entrant: `ctrnas run` may lock its data folder and then call `prepare`, which
locks the same folder again. POSIX only (TorchRec needs Linux or macOS anyway).
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import sys
import time
from pathlib import Path

from ctrnas.errors import FolderInUseError, PathError

LOCK_FILE = ".ctrnas.lock"

_held: dict[str, "FolderLock"] = {}  # resolved folder -> the lock this process holds on it


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


class FolderLock:
    """`with FolderLock(folder, "prepare criteo"):` holds the folder's lock (creating the folder) or raises
    FolderInUseError naming the holder. `took_over` is the dead holder's description when we took over."""

    def __init__(self, folder: str | Path, command: str):
        self.folder, self.command = Path(folder), command
        self.path = self.folder / LOCK_FILE
        self.took_over: str | None = None
        self._fd: int | None = None
        self._depth = 0

    def acquire(self) -> "FolderLock":
        _ensure_folder(self.folder)
        key = str(self.folder.resolve())
        outer = _held.get(key)
        if outer is not None:  # this process holds it already
            outer._depth += 1
            self._fd, self._outer = None, outer
            return self
        self._outer = None
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise PathError(self.folder, f"cannot write here ({e.strerror})") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise FolderInUseError(f"{self.folder}: in use by {holder}; wait for it to finish, or write to "
                                   "another folder") from None
        except OSError as e:  # a file system without locks (some network mounts): go on, but say so
            os.close(fd)
            print(f"ctrnas: {self.folder}: cannot lock this folder ({e.strerror}); make sure no other ctrnas "
                  "writes to it meanwhile", file=sys.stderr)
            self._fd = None
            return self
        previous = os.pread(fd, 4096, 0).decode("utf-8", "replace").strip()
        if previous:
            self.took_over = _describe(previous)
            print(f"ctrnas: {self.folder}: taking over the lock left by {self.took_over}, which ended "
                  "without releasing it (killed?)", file=sys.stderr)
        record = {"pid": os.getpid(), "host": socket.gethostname(), "command": self.command,
                  "started": time.strftime("%Y-%m-%d %H:%M:%S")}
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(record) + "\n").encode(), 0)
        self._fd, self._depth = fd, 1
        _held[key] = self
        return self

    def release(self) -> None:
        if self._outer is not None:
            self._outer._depth -= 1
            self._outer = None
            return
        if self._fd is None:
            return
        self._depth -= 1
        if self._depth > 0:
            return
        _held.pop(str(self.folder.resolve()), None)
        try:
            os.ftruncate(self._fd, 0)  # a clean release: nothing for the next holder to report
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> "FolderLock":
        return self.acquire()

    def __exit__(self, *exc) -> bool:
        self.release()
        return False


def folder_lock(folder: str | Path, command: str) -> FolderLock:
    """The lock of an output folder for `command` (use as a context manager around all writing there)."""
    return FolderLock(folder, command)
