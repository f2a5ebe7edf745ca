"""What a dataset folder's writer may touch: only the files ctrnas wrote there, listed in its manifest.

FOLDER/ctrnas-manifest.json lists (relative paths) every file a writer created in the folder. It is rewritten
atomically before each new file is created, so a run killed at any point leaves a list that covers all it
wrote. Re-preparing removes only listed files; anything else in the folder (a file of yours in test/, a
subfolder) makes the writer refuse unless told to overwrite, and even then it is left in place. Folders
written before manifests existed are recognised by their meta.json (the shards it lists are ctrnas's).

The same rule for every other folder a command writes (a run's, a model's, a warm-up's): `claimed` marks
the manifest open with the files that were there before, so a writer killed at any point leaves a manifest
by which everything else is its own; at the end it lists what is there, less those files.

Also here: the check that a complete folder made from another source is not replaced silently, shared by
`ctrnas prepare` and a recipe's data stage so both say the same.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import threading
from pathlib import Path
from typing import Callable, Iterator

from ctrnas.errors import CtrnasError, PathError
from ctrnas.files import atomic_write_text, read_json
from ctrnas.locks import LOCK_FILE

MANIFEST = "ctrnas-manifest.json"
MANIFEST_FORMAT = "ctrnas-manifest/1"
SPLITS = ("train", "val", "test")
META, SOURCE_FILE, REJECTS_FILE = "meta.json", "ctrnas-source.json", "rejects.tsv"
# names only a ctrnas writer makes (a temp file before its rename, a staging stream): ours wherever they are
_TRANSIENT = re.compile(r"\.staging-\d+\.arrows|\..+\.tmp-\d+(\.\w+)?")  # ctrnas.files
_OWN_NAMES = {LOCK_FILE, SOURCE_FILE, MANIFEST}  # ctrnas's own names at the top of the folder
# paths a dataset writer may create (shards, meta, rejects, the preprocessing of data/preprocess.py)
_WRITES = re.compile(r"(meta\.json|rejects\.tsv|transform\.json|vocab\.parquet|(train|val|test)/part-\d+\.parquet)")


def _read_json(path: Path):
    """A record of ctrnas's, None when missing or damaged (a FIFO there is refused, not waited on)."""
    if not path.is_file():
        return None
    try:
        return read_json(path, "ctrnas record")
    except CtrnasError:
        return None


def listed_files(folder: Path) -> set[str]:
    """Files the folder's manifest lists, or, without one, those a ctrnas meta.json names."""
    man = _read_json(folder / MANIFEST)
    if isinstance(man, dict) and man.get("format") == MANIFEST_FORMAT:
        return {str(f) for f in man.get("files", [])} | {MANIFEST}
    meta = _read_json(folder / META)
    if not (isinstance(meta, dict) and str(meta.get("format", "")).startswith("ctrnas-dataset/")):
        return set()
    out = {META, SOURCE_FILE} | ({REJECTS_FILE} if meta.get("rejects_file") else set())
    out |= {"transform.json", "vocab.parquet"} if meta.get("transform_file") else set()  # data/preprocess.py
    for split in (meta.get("splits") or {}).values():
        if isinstance(split, dict):
            out |= {str(f) for f in split.get("files", [])}
    return out


def inventory(folder: Path) -> tuple[list[str], list[str]]:
    """(ours, foreign): relative paths of the files ctrnas wrote here and of everything else (a foreign
    folder is named with a trailing slash and not entered). Symlinks are never followed."""
    listed = listed_files(folder)
    ours, foreign = [], []
    for entry in sorted(os.scandir(folder), key=lambda e: e.name):
        if entry.is_dir(follow_symlinks=False):
            if entry.name not in SPLITS:
                foreign.append(entry.name + "/")
                continue
            for sub in sorted(os.scandir(entry.path), key=lambda e: e.name):
                rel = f"{entry.name}/{sub.name}"
                if sub.is_dir(follow_symlinks=False):
                    foreign.append(rel + "/")
                elif rel in listed or _TRANSIENT.fullmatch(sub.name):
                    ours.append(rel)
                else:
                    foreign.append(rel)
        elif entry.name in listed or entry.name in _OWN_NAMES or _TRANSIENT.fullmatch(entry.name):
            ours.append(entry.name)
        else:
            foreign.append(entry.name)
    return ours, foreign


def walk(folder: Path, skip=frozenset()) -> list[str]:
    """Every file under `folder` as a relative path, subfolders entered (symlinks listed, never followed);
    a subfolder in `skip` (relative paths) is listed with a trailing slash and not entered."""
    out = []
    for entry in sorted(os.scandir(folder), key=lambda e: e.name):
        rel = os.path.relpath(entry.path, folder)
        if entry.is_dir(follow_symlinks=False):
            if rel in skip:
                out.append(rel + "/")
            else:
                out.extend(f"{entry.name}/{r}" for r in walk(Path(entry.path), {s[len(entry.name) + 1:] for s in skip
                                                                              if s.startswith(entry.name + "/")}))
        else:
            out.append(rel)
    return out


def is_transient(rel: str) -> bool:
    """A temp file of a ctrnas writer (a staging stream, a file before its rename)."""
    return bool(_TRANSIENT.fullmatch(rel.rsplit("/", 1)[-1]))


def is_own_name(rel: str) -> bool:
    """A name only a ctrnas writer makes (its lock, manifest, a temp file before its rename)."""
    name = rel.rsplit("/", 1)[-1]
    return name in _OWN_NAMES or bool(_TRANSIENT.fullmatch(name))


def remove_transient(out: Path) -> None:
    """Delete the temp files a failed write left in `out` (its staging streams and .tmp files): names only a
    ctrnas writer makes, so nothing of the user's."""
    if not out.is_dir():
        return
    for rel in walk(out):
        if is_transient(rel):
            (out / rel).unlink(missing_ok=True)


def refusal(folder: Path, foreign: list[str], flag: str) -> CtrnasError:
    """The error for a folder holding files ctrnas did not write."""
    more = f" and {len(foreign) - 5} more" if len(foreign) > 5 else ""
    return CtrnasError(f"{folder} holds files ctrnas did not write ({', '.join(foreign[:5])}{more}); write to a "
                       f"new or empty folder, or pass {flag} to write beside them (ctrnas replaces only its own "
                       "files and leaves the others in place)")


def claim(folder: Path, overwrite: bool, flag: str = "--overwrite (in a recipe: data.overwrite=true)") -> list[str]:
    """Check that a writer may use `folder` (existing or not); returns the files of ours found there."""
    if not folder.exists():
        return []
    if not folder.is_dir():
        raise PathError(folder, "exists and is not a folder; give a folder path for the output")
    for split in SPLITS:
        if (folder / split).exists() and not (folder / split).is_dir():
            raise PathError(folder / split, "is a file, but this is where the dataset writes its split folder; "
                            "move it away")
    ours, foreign = inventory(folder)
    if foreign and not overwrite:
        raise refusal(folder, foreign, flag)
    # --overwrite writes beside foreign files, never over one: a file of the user's at a path a writer may
    # create (meta.json, a shard name) is refused even then
    clashes = [f for f in foreign if _WRITES.fullmatch(f)]
    if clashes:
        raise CtrnasError(f"{folder / clashes[0]}: a file ctrnas did not write (not in {MANIFEST}) where it writes "
                          "its own; --overwrite replaces only ctrnas's files: move it away or write to another folder")
    return [f for f in ours if f != LOCK_FILE]


def remove(folder: Path, files) -> None:
    """Delete these files of ours (META first, so the folder reads as incomplete from the first deletion)."""
    for rel in sorted(files, key=lambda f: f != META):
        try:
            (folder / rel).unlink(missing_ok=True)
        except IsADirectoryError:
            raise PathError(folder / rel, "is a folder where ctrnas wrote a file; move it away") from None


class Manifest:
    """The manifest of one folder being written: `add` lists a file before it is created (thread-safe)."""

    def __init__(self, folder: Path, files=(), extra: dict | None = None):
        self.folder, self.files, self.extra = Path(folder), set(files), dict(extra or {})
        self._lock = threading.Lock()
        self._write()

    def add(self, *rel: str) -> None:
        with self._lock:
            if not set(rel) <= self.files:
                self.files |= set(rel)
                self._write()

    def reset(self, files) -> None:
        """List exactly `files` (and the manifest itself): at the end of a write, what it left."""
        with self._lock:
            self.files = set(files)
            self._write()

    def _write(self) -> None:
        text = json.dumps({"format": MANIFEST_FORMAT, "files": sorted(self.files - {MANIFEST}), **self.extra},
                          indent=1)
        atomic_write_text(self.folder / MANIFEST, text)


OPEN = "open_since"  # manifest key while a writer writes: the files that were not ours when it began


def _manifest(folder: Path) -> dict | None:
    man = _read_json(folder / MANIFEST)
    return man if isinstance(man, dict) and man.get("format") == MANIFEST_FORMAT else None


def writer_inventory(folder: Path, writes: Callable[[str], bool], legacy: Callable[[Path], bool] | None = None,
                     skip=frozenset()) -> tuple[list[str], list[str]]:
    """(ours, foreign) files under a folder a command writes, by its manifest; without one, a folder
    `legacy` recognises (written before manifests existed) owns what `writes` names. Subfolders in `skip`
    (relative paths with their own rules) are in neither."""
    files = [f for f in walk(folder, skip) if not f.endswith("/")]
    man = _manifest(folder)
    if man is not None and isinstance(man.get(OPEN), list):  # a writer stopped while writing
        before = set(man[OPEN])
        return [f for f in files if f not in before], [f for f in files if f in before]
    if man is not None:
        listed = {str(f) for f in man.get("files", [])}
        mine = lambda f: f in listed or is_own_name(f)  # noqa: E731
    elif legacy is not None and legacy(folder):
        mine = lambda f: writes(f) or is_own_name(f)  # noqa: E731
    else:
        mine = is_own_name
    return [f for f in files if mine(f)], [f for f in files if not mine(f)]


def check_claim(folder: Path, overwrite: bool, flag: str, writes: Callable[[str], bool],
                legacy: Callable[[Path], bool] | None = None, skip=frozenset(),
                writer: str = "this command") -> tuple[list[str], list[str]]:
    """The refusals of `claimed`, nothing written; (ours, foreign) when the folder may be written."""
    if not folder.is_dir():
        return [], []
    ours, foreign = writer_inventory(folder, writes, legacy, skip)
    if foreign and not overwrite:
        raise refusal(folder, foreign, flag)
    clash = [f for f in foreign if writes(f)]
    if clash:
        raise CtrnasError(f"{folder / clash[0]}: not written by ctrnas, and {writer} writes there; move it "
                          "away (ctrnas never replaces files it did not write)")
    return ours, foreign


@contextlib.contextmanager
def claimed(folder: str | Path, overwrite: bool, flag: str, writes: Callable[[str], bool],
            legacy: Callable[[Path], bool] | None = None, skip=frozenset(),
            writer: str = "this command") -> Iterator[None]:
    """Claim a folder a command writes (call with its lock held) for the duration of the block: refused when
    it holds files ctrnas did not write, unless `overwrite`; even then a file of the user's where the writer
    writes (`writes`: a relative path -> whether this writer may create it) is refused and kept."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    ours, foreign = check_claim(folder, overwrite, flag, writes, legacy, skip, writer)
    manifest = Manifest(folder, ours, extra={OPEN: sorted(foreign)})
    try:
        yield
    finally:
        left = set(foreign)
        manifest.extra = {}
        manifest.reset([f for f in walk(folder, skip) if not (f.endswith("/") or f in left or is_own_name(f))])


# what a model folder's writers create (ctrnas.supernet.io, ctrnas.train.baselines.folder, `ctrnas train`'s
# trainer and results, ctrnas.data.preprocess), and a warm-up folder's (the pipeline's warm-up stage)
MODEL_WRITES = frozenset({"model.pt", "model.pt2", "dense_part.pt", "dense_part.pt2", "arch.json", "model_card.json",
                          "model_card.md", "transform.json", "vocab.parquet", "metrics.json", "checkpoint.pt"})
WARMUP_WRITES = frozenset({"supernet.pt", "warmup.json"})
WARMUP_DIRS = ("trainer",)


def model_writes(rel: str) -> bool:
    return rel in MODEL_WRITES


def warmup_writes(rel: str) -> bool:
    return rel in WARMUP_WRITES or rel.split("/", 1)[0] in WARMUP_DIRS


def _has_json(name: str, key: str) -> Callable[[Path], bool]:
    def legacy(folder: Path) -> bool:
        record = _read_json(folder / name)
        return isinstance(record, dict) and key in record
    return legacy


# folders written before manifests existed: a model card / warm-up record as ctrnas writes them
legacy_model_folder = _has_json("model_card.json", "versions")
legacy_warmup_folder = _has_json("warmup.json", "fingerprint")


def model_folder(folder: str | Path, overwrite: bool) -> contextlib.AbstractContextManager:
    """`claimed` for a model folder (`ctrnas train --out`, `ctrnas export --out`)."""
    return claimed(folder, overwrite, "--overwrite", model_writes, legacy_model_folder)


def check_model_folder(folder: str | Path, overwrite: bool) -> None:
    """The refusals of `model_folder` alone (a sharded training's ranks, which share no lock)."""
    check_claim(Path(folder), overwrite, "--overwrite", model_writes, legacy_model_folder)


def warmup_folder(folder: str | Path, overwrite: bool) -> contextlib.AbstractContextManager:
    """`claimed` for a warm-up folder (`ctrnas warmup --out`)."""
    return claimed(folder, overwrite, "--overwrite", warmup_writes, legacy_warmup_folder)
