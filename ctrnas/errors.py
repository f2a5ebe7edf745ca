"""Error types of ctrnas: raised early, caught only at the CLI, printed on one line."""

from __future__ import annotations


def _rebuild(cls, args: tuple, state: dict) -> "CtrnasError":
    error = cls.__new__(cls)
    error.args = args
    error.__dict__.update(state)
    return error


class CtrnasError(Exception):
    """Base class of every error ctrnas raises on purpose (bad input, bad config)."""

    def __reduce__(self):
        # as itself through a pickle (a worker process, a Ray actor), whatever its __init__ takes
        return _rebuild, (type(self), self.args, dict(self.__dict__))


class DataFormatError(CtrnasError):
    """A malformed row or value in a raw input file."""

    def __init__(self, file: str, line: int | None, field: str | None, reason: str):
        self.file, self.line, self.field, self.reason = str(file), line, field, reason
        where = self.file
        if line is not None:
            where += f", line {line}"
        if field is not None:
            where += f", field {field}"
        super().__init__(f"{where}: {reason}")


class RecipeError(CtrnasError):
    """A recipe/config value that is unknown, missing or of the wrong type."""

    def __init__(self, source: str, key: str, reason: str):
        self.source, self.key, self.reason = source, key, reason
        super().__init__(f"{source}: key '{key}': {reason}")


class ArchValidationError(CtrnasError):
    """An architecture that does not fit its search space."""

    def __init__(self, block: int | None, field: str, value, reason: str):
        self.block, self.field, self.value, self.reason = block, field, value, reason
        where = f"block {block}" if block is not None else "architecture"
        super().__init__(f"{where}, field '{field}' = {value!r}: {reason}")


class PathError(CtrnasError):
    """An input or output path that cannot be used as asked (a folder where a file is needed, not writable...)."""

    def __init__(self, path, reason: str):
        self.path, self.reason = str(path), reason
        super().__init__(f"{self.path}: {reason}")


class DamagedFile(CtrnasError):
    """A file ctrnas reads that cannot be decoded (not UTF-8, not JSON, not Parquet, not a torch file, nested
    too deeply, over its size limit): "damaged FILE: reason"."""

    def __init__(self, path, reason: str):
        self.path, self.reason = str(path), reason
        super().__init__(f"damaged {self.path}: {reason}")


class FolderInUseError(CtrnasError):
    """Another ctrnas process holds the lock of an output folder."""


class DeviceError(CtrnasError):
    """A device that cannot be used here (no CUDA, bad index) or an install that cannot run on it."""


class NotEnoughMemory(CtrnasError):
    """A stage that would not fit in the memory available (estimated before it starts)."""


class WorkerDied(CtrnasError):
    """A worker process ended while running a job (killed by a signal, e.g. the out-of-memory killer)."""

    def __init__(self, job: str, exitcode: int | None, worker: str = "worker", how: str | None = None):
        import signal

        self.job, self.exitcode = job, exitcode
        if how is None and exitcode is not None and exitcode < 0:
            try:
                how = f"killed by signal {-exitcode} ({signal.Signals(-exitcode).name})"
            except ValueError:
                how = f"killed by signal {-exitcode}"
            if exitcode == -signal.SIGKILL:
                how += "; often the out-of-memory killer: try fewer workers"
        elif how is None:
            how = f"exited with code {exitcode}"
        super().__init__(f"{worker} died while running {job}: {how}")


class Interrupted(KeyboardInterrupt):
    """SIGTERM (or another stop signal) turned into an exception in the parent, so cleanup runs once."""

    def __init__(self, signum: int):
        import signal

        self.signum = signum
        super().__init__(f"stopped by {signal.Signals(signum).name}")
