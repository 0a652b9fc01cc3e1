"""A run's files: every path beside its jsonl is named here and nowhere else (``test_layout`` checks).

A run is known by its jsonl (``--out``, or ``runs/<UTC time>-<env>/groups.jsonl``); its side
files take its name less ``.jsonl``. What a run does with them (its lock, records, index entry,
drop log, prune) is in the modules beside this one, as functions of a ``RunFiles``. No heavy
imports: views read it.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from vftui import paths, safe_files
from vftui.errors import UserError

_RUN, _CHECKPOINT, _LOCK, _LOG = ".run.json", ".checkpoint.json", ".lock", ".collector.log"
_SOCKET, _EVAL, _DROPS, _HTML = ".sock", ".eval", ".dropped.jsonl", ".html"
_SIDE = (_RUN, _CHECKPOINT, _LOCK, _LOG, _SOCKET, _DROPS, _HTML)
_APPENDED = (
    _LOG,
)  # only ever appended to, a link or FIFO there passed over: no reason to take another name
_ATROPOS = "atropos"
_STEP_EVAL = "step_{:06d}"  # an rl run's eval at a trainer step (--eval-every), in its eval folder
_MAX_SOCKET_PATH = 100  # bytes; the kernel's limit is 107
_SLUG_CHARACTERS = "A-Za-z0-9_.-"
_RUN_DIR_NAME = re.compile(rf"\d{{8}}-\d{{6}}-[{_SLUG_CHARACTERS}]+")


@dataclass(frozen=True)
class RunFiles:
    """The paths of the run whose jsonl is ``jsonl``."""

    jsonl: Path

    @property
    def run_json(self) -> Path:
        """What the run was asked (``records.RunRecord``)."""
        return self._beside(_RUN)

    @property
    def checkpoint(self) -> Path:
        return self._beside(_CHECKPOINT)

    @property
    def lock_path(self) -> Path:
        return self._beside(_LOCK)

    @property
    def log(self) -> Path:
        """What the environment and its libraries wrote (``collector.captured``)."""
        return self._beside(_LOG)

    @property
    def drops(self) -> Path:
        return self._beside(_DROPS)

    @property
    def html(self) -> Path:
        return self._beside(_HTML)

    @property
    def eval_dir(self) -> Path:
        """An eval's results: ``results.jsonl`` and ``metadata.json`` (vf-eval's), ``eval_atropos``."""
        return self._beside(_EVAL)

    @property
    def eval_atropos(self) -> Path:
        """atroposlib's own eval files, in the eval folder."""
        return atropos_in(self.eval_dir)

    def eval_at_step(self, step: int) -> Path:
        """An rl run's eval at trainer step ``step`` (``--eval-every``), an eval folder of its own in the run's:
        ``NAME.eval/step_000040/``; a resumed run whose trainer counts from 0 again takes ``step_000040_1``...
        (``store.numbered``), never an earlier eval's."""
        return self.eval_dir / _STEP_EVAL.format(step)

    @property
    def folder(self) -> Path:
        return self.jsonl.parent

    @property
    def side_files(self) -> tuple[Path, ...]:
        """The files vftui writes beside the jsonl, named after it (the eval folder aside)."""
        return tuple(self._beside(suffix) for suffix in _SIDE)

    @property
    def taken_by(self) -> Path | None:
        """The first of the run's paths something is at (its jsonl, a side file it writes or removes, its eval
        folder), if any: a new run takes a name only where nothing is, so it writes over no file of the user's
        or of another run's (``b.dropped.jsonl`` is the drop log of ``b.jsonl`` and may be a run's jsonl)."""
        replaced = (self._beside(s) for s in _SIDE if s not in _APPENDED)
        return next((p for p in (self.jsonl, *replaced, self.eval_dir) if os.path.lexists(p)), None)

    @property
    def real_jsonl(self) -> Path:
        """The jsonl's path with its links followed: a link loop at it (a damaged run) is this path as it
        stands, for the reader to refuse by name, where ``Path.resolve`` raised and took every listing down."""
        return Path(os.path.realpath(self.jsonl))

    @property
    def digest(self) -> str:
        """A hash of the jsonl's path: names its index entry, and a socket too long to sit beside it."""
        return hashlib.sha256(os.fsencode(self.real_jsonl)).hexdigest()[:24]

    @property
    def socket(self) -> Path:
        """Where the run listens: beside its jsonl, or (a path too long for a socket) in a private folder
        of ours, named after it, so both ends find it from the jsonl alone."""
        beside = self._beside(_SOCKET)
        if len(os.fsencode(beside)) <= _MAX_SOCKET_PATH:
            return beside
        return _private_folder() / f"{self.digest}{_SOCKET}"

    @property
    def socket_is_private(self) -> bool:
        """The socket is in the shared temporary folder's ``vftui-<uid>``: ours alone, or refused."""
        return self.socket.parent == _private_folder()

    @property
    def in_runs_dir(self) -> bool:
        """Its folder is one of the default runs folder's."""
        return self.folder.parent.resolve() == paths.runs_dir().resolve()

    @property
    def made_by_vftui(self) -> bool:
        """Its folder is one ``new`` made: in the runs folder, named as ``new`` names them."""
        return self.in_runs_dir and _RUN_DIR_NAME.fullmatch(self.folder.name) is not None

    def dump_path(self, now: float) -> Path:
        """Where a dump of the run's window made at ``now`` goes."""
        return self.folder / f"dump-{time.strftime('%Y%m%d-%H%M%S', time.localtime(now))}.jsonl"

    def _beside(self, suffix: str) -> Path:
        return self.jsonl.with_suffix(suffix)

    @classmethod
    def new(cls, out: Path | None, env: str) -> RunFiles:
        """A new run's: ``out`` (``--out``, not a link), or a new run folder's ``groups.jsonl``. ``out`` must end
        in .jsonl: its side files take its name less its suffix, so ``a.v1`` and ``a.v2`` would share
        ``a.run.json`` and ``a.checkpoint.json``, and ``--resume`` finds a run by its .jsonl."""
        if out is None:
            try:
                return cls(_new_run_dir(env) / "groups.jsonl")
            except OSError as e:
                raise UserError(
                    f"cannot create a run folder under {paths.runs_dir()}: {e.strerror}"
                ) from e
        out = safe_files.given_file(out, "--out")
        if out.exists() and not out.is_file():
            what = "a folder" if out.is_dir() else "not a regular file"
            raise UserError(f"--out {out} is {what}; give a .jsonl file path")
        if out.suffix != ".jsonl":
            raise UserError(
                f"--out {out}: a run's file must end in .jsonl (e.g. --out {out}.jsonl): its side files "
                f"take its name less its suffix ({cls(out).run_json.name}, ...), as another run's could"
            )
        return cls(out)

    @classmethod
    def find(cls, path: Path, asked_by: str = "--resume") -> RunFiles:
        """The run at ``path`` (a run folder, its jsonl or its .run.json); ``asked_by`` starts the refusal."""
        if path.is_dir():
            found = cls.all_in(path)
            if len(found) != 1:
                what = "no run" if not found else f"{len(found)} runs"
                raise UserError(
                    f"{asked_by} {path}: found {what} there; name the run's .jsonl file instead"
                )
            return found[0]
        if (described := cls.of_record(path)) is not None:
            return described
        if path.suffix == ".jsonl" and cls(path).run_json.exists():
            return cls(path)
        raise UserError(f"{asked_by} {path}: not a vftui run (expected a run folder or its .jsonl)")

    @classmethod
    def to_resume(cls, path: Path) -> RunFiles:
        """The run ``--resume PATH`` names (``find``), its jsonl refused if it is a link."""
        return cls(safe_files.given_file(cls.find(path).jsonl, "--resume"))

    @classmethod
    def of_record(cls, path: Path) -> RunFiles | None:
        """The run ``path`` describes when it is a run's ``.run.json``; else None."""
        if not path.name.endswith(_RUN):
            return None
        return cls(Path(str(path).removesuffix(_RUN) + ".jsonl"))

    @classmethod
    def owners(cls, path: Path) -> list[RunFiles]:
        """The runs ``path`` could be the jsonl or a side file of, by its name (``b.dropped.jsonl`` is both
        ``b.jsonl``'s drop log and a run's own jsonl; ``b.html`` is ``b.jsonl``'s page)."""
        name = path.name
        return [
            cls(path.with_name(name.removesuffix(suffix) + ".jsonl"))
            for suffix in (".jsonl", *_SIDE)
            if name.endswith(suffix) and len(name) > len(suffix)
        ]

    @classmethod
    def all_in(cls, folder: Path, depth: int = 1) -> list[RunFiles]:
        """The runs described in ``folder`` (depth 1), or in its folders (depth 2), by their records' names."""
        pattern = f"{'*/' * (depth - 1)}*{_RUN}"
        return [files for p in sorted(folder.glob(pattern)) if (files := cls.of_record(p))]


def atropos_in(eval_folder: Path) -> Path:
    """atroposlib's own eval files (``evaluate_log``'s) in an eval's folder."""
    return eval_folder / _ATROPOS


def _private_folder() -> Path:
    """Where sockets too long for beside their jsonl go: ``$TMPDIR/vftui-<uid>``, mode 0700."""
    return Path(tempfile.gettempdir()) / f"vftui-{os.getuid()}"


def _new_run_dir(env: str) -> Path:
    """A fresh folder for a run, created here: ``runs/<UTC time>-<env>``, ``-1``, ``-2``... when
    taken, so two runs started in the same second (or a folder not writable) never share one."""
    slug = re.sub(rf"[^{_SLUG_CHARACTERS}]+", "-", env).strip("-") or "run"
    base = paths.runs_dir() / f"{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{slug}"
    candidate, n = base, 1
    base.parent.mkdir(parents=True, exist_ok=True)
    while True:
        try:
            candidate.mkdir()
            return candidate
        except FileExistsError:
            candidate = base.with_name(f"{base.name}-{n}")
            n += 1
