"""The pattern set as a view of the registry: a small whole-set file per version that changes a pattern.

Under the registry directory::

    patterns/<version:012d>.json   {"format", "version", "batch_id", "time", "base", "patterns"}

``patterns`` is ``{id: [CEL text, since, partition attribute or None]}``, every live pattern at
that version (few: bounded by the tenants' ``patterns`` quota). It is written by
:meth:`~streaming.registry_columns.ColumnRegistry.apply` in the step that records the version
(atomically, :meth:`Directory.write`), and read by the ``patterns`` query's executors
(:func:`latest`, the newest by listing, cached per process by version).

``since`` is the epoch a pattern sees instances from (:meth:`matchers.cayuga.engine.Engine.add`):
``version + base`` of its last upsert, and the view's ``epoch`` is ``version + base``.
``base`` is 0 but for a registry that imported the pattern registry of an earlier release
(:func:`streaming.registry_columns.migrate.import_patterns`): its last version, so that epochs
keep growing past those of the instances that release started, and the imported patterns keep
their ``since``.
"""

from __future__ import annotations

import re
from typing import NamedTuple

import orjson

from streaming.errors import RegistryError
from streaming.storage import Directory

VIEWS = "patterns"
FORMAT = 1
_VIEW = re.compile(r"^(\d{12})\.json$")

Patterns = dict[str, list]
"""``{subscription id: [CEL text, since, partition attribute or None]}``."""


class View(NamedTuple):
    """The live patterns at registry ``version`` (recorded by batch ``batch_id``)."""

    version: int
    batch_id: int
    base: int
    patterns: Patterns

    @property
    def epoch(self) -> int:
        """The engines' epoch at this view (instances started now are of it)."""
        return self.version + self.base


EMPTY = View(0, -1, 0, {})


def view_name(version: int) -> str:
    return f"{version:012d}.json"


def versions(directory: Directory) -> list[int]:
    """The versions that have a view (:class:`RegistryError` when there is no view directory)."""
    try:
        names = directory.sub(VIEWS).names()
    except FileNotFoundError:
        raise RegistryError(f"no pattern view at {directory.sub(VIEWS).uri} (is the checkpoint location "
                            "shared with the executors?)") from None
    return sorted(int(m.group(1)) for n in names if (m := _VIEW.match(n)))


def write(directory: Directory, view: View, time: float) -> None:
    obj = {"format": FORMAT, "version": view.version, "batch_id": view.batch_id, "time": time, "base": view.base,
           "patterns": view.patterns}
    directory.sub(VIEWS).write(view_name(view.version), orjson.dumps(obj))


def read(directory: Directory, version: int) -> View:
    """The view written at ``version`` (:class:`RegistryError` if missing or unreadable)."""
    where = f"{directory.sub(VIEWS).uri}/{view_name(version)}"
    try:
        obj = orjson.loads(directory.sub(VIEWS).read(view_name(version)))
        view = View(int(obj["version"]), int(obj["batch_id"]), int(obj["base"]),
                    {str(k): [str(v[0]), int(v[1]), v[2]] for k, v in obj["patterns"].items()})
        fmt = int(obj["format"])
    except FileNotFoundError:
        raise RegistryError(f"pattern view {where} is missing") from None
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
        raise RegistryError(f"cannot read pattern view {where}: {type(exc).__name__}: {exc}") from None
    if fmt != FORMAT or view.version != version:
        raise RegistryError(f"pattern view {where} does not describe version {version} in format {FORMAT}")
    return view


def newest(directory: Directory, at: int | None = None) -> View:
    """The newest view (at or below version ``at``), :data:`EMPTY` when none is."""
    vs = [v for v in versions(directory) if at is None or v <= at]
    return read(directory, vs[-1]) if vs else EMPTY


_cache: dict[str, View] = {}


def latest(uri: str) -> View:
    """The newest view of the registry at ``uri`` (cached per process by version: a listing per call)."""
    directory = Directory(uri)
    vs = versions(directory)
    if not vs:
        return EMPTY
    cached = _cache.get(uri)
    if cached is None or cached.version != vs[-1]:
        cached = _cache[uri] = read(directory, vs[-1])
    return cached


def packed(text: str, attribute: str | None, since: int | None = None, base: int = 0) -> bytes:
    """A pattern's ``packed`` column in the registry's files: its CEL text and partition attribute
    (computed once, where its record is parsed); an imported pattern's also its ``since`` and
    the registry's ``base`` (:func:`streaming.registry_columns.migrate.import_patterns`)."""
    return orjson.dumps([text, attribute] if since is None else [text, attribute, since, base])


def entry(blob: bytes, version: int, base: int) -> list:
    """The view's ``[text, since, attribute]`` of a pattern whose last upsert (``packed`` column
    ``blob``) is of registry ``version``."""
    got = orjson.loads(blob)
    return [got[0], int(got[2]) if len(got) > 2 else version + base, got[1]]


def base_of(blob: bytes) -> int:
    """The ``base`` an imported pattern's ``packed`` column records (0: not imported)."""
    got = orjson.loads(blob)
    return int(got[3]) if len(got) > 3 else 0
