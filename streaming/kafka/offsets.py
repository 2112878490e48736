"""Offsets of a Kafka source: parsing, JSON form, ranges and the per-trigger cap.

Inside the source an offset map is ``dict[(topic, partition), offset]`` where the offset
is the next offset to read. Spark checkpoints it in the JSON form of Spark's own Kafka
source, ``{"topic": {"0": 42}}``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import NamedTuple

from streaming.kafka.errors import KafkaOptionError

TP = tuple[str, int]
OffsetMap = dict[TP, int]
EARLIEST = "earliest"
LATEST = "latest"
# Markers of Spark's JSON offset specifications.
EARLIEST_MARKER = -2
LATEST_MARKER = -1


class OffsetRange(NamedTuple):
    """Offsets ``[start, end)`` of one topic partition."""

    topic: str
    partition: int
    start: int
    end: int


def parse_topics(value: str | None) -> list[str]:
    """Parse the ``subscribe`` option (comma-separated topic names).

    Raises
    ------
    KafkaOptionError
        If no topic is named.
    """
    topics = [t.strip() for t in (value or "").split(",") if t.strip()]
    if not topics:
        raise KafkaOptionError("option 'subscribe' must name at least one topic")
    return list(dict.fromkeys(topics))


def parse_spec(value: str | None, option: str, default: str) -> str | OffsetMap:
    """Parse ``startingOffsets``/``endingOffsets``.

    Parameters
    ----------
    value : str or None
        ``"earliest"``, ``"latest"`` or JSON ``{"topic": {"0": 23, "1": -2}}`` where
        ``-2`` means earliest and ``-1`` latest.
    option : str
        Option name, for error messages.
    default : str
        Value used when ``value`` is None.

    Returns
    -------
    str or OffsetMap
        ``"earliest"``, ``"latest"`` or an offset map that may hold the markers.
    """
    text = (value if value is not None else default).strip()
    if text.lower() in (EARLIEST, LATEST):
        return text.lower()
    try:
        raw = json.loads(text)
        return from_json(raw, allow_markers=True)
    except (ValueError, TypeError, AttributeError) as exc:
        raise KafkaOptionError(
            f"option {option} must be 'earliest', 'latest' or JSON like "
            f'{{"topic": {{"0": 42}}}}, got {text!r}: {exc}'
        ) from None


def from_json(raw: Mapping[str, Mapping[str, int]], allow_markers: bool = False) -> OffsetMap:
    """Convert the JSON form ``{"topic": {"0": 42}}`` to an offset map.

    Raises
    ------
    ValueError
        If the structure is not topic -> partition -> offset or an offset is negative
        (other than the markers when ``allow_markers``).
    """
    if not isinstance(raw, Mapping):
        raise ValueError("offsets must be a JSON object of topics")
    result: OffsetMap = {}
    lowest = EARLIEST_MARKER if allow_markers else 0
    for topic, parts in raw.items():
        if not isinstance(parts, Mapping):
            raise ValueError(f"offsets of topic {topic!r} must be an object")
        for part, offset in parts.items():
            if isinstance(offset, bool) or not isinstance(offset, int) or offset < lowest:
                raise ValueError(f"bad offset {offset!r} for {topic}-{part}")
            result[(str(topic), int(part))] = offset
    return result


def to_json(offsets: Mapping[TP, int]) -> dict[str, dict[str, int]]:
    """Convert an offset map to the JSON form, topics and partitions sorted."""
    result: dict[str, dict[str, int]] = {}
    for (topic, part), offset in sorted(offsets.items()):
        result.setdefault(topic, {})[str(part)] = int(offset)
    return result


INITIAL_OFFSETS_VERSION = "v1"
"""The version line of a checkpoint's initial offsets file (Spark's ``KafkaSourceInitialOffsetWriter``)."""


def initial_offsets_text(offsets: Mapping[TP, int]) -> bytes:
    """The initial offsets of a query's source as its checkpoint's ``sources/<n>/0`` holds them
    (the Java connector's file: a version line, then the JSON form)."""
    return f"{INITIAL_OFFSETS_VERSION}\n{json.dumps(to_json(offsets), separators=(',', ':'))}".encode()


def read_initial_offsets(data: bytes) -> OffsetMap:
    """The offsets of a ``sources/<n>/0`` file (:func:`initial_offsets_text`; the Java connector
    writes a NUL byte before the version line).

    Raises
    ------
    ValueError
        If it is not a version line followed by the JSON form.
    """
    version, _, text = data.decode("utf-8").lstrip("\x00").partition("\n")
    if version != INITIAL_OFFSETS_VERSION:
        raise ValueError(f"initial offsets of version {version!r}, not {INITIAL_OFFSETS_VERSION}")
    return from_json(json.loads(text))


def ranges(start: Mapping[TP, int], end: Mapping[TP, int]) -> list[OffsetRange]:
    """Non-empty ranges from ``start`` to ``end``; a partition absent from ``start`` starts at 0."""
    out = []
    for tp in sorted(end):
        s = start.get(tp, 0)
        if end[tp] > s:
            out.append(OffsetRange(tp[0], tp[1], s, end[tp]))
    return out


def cap(start: Mapping[TP, int], end: Mapping[TP, int], max_records: int) -> OffsetMap:
    """Limit the records between ``start`` and ``end`` to ``max_records`` in total.

    The cap is split across partitions in proportion to their backlog (largest
    remainder, ties to the lower topic-partition), so the total is exactly
    ``min(max_records, backlog)`` and every partition with a backlog gets its share.

    Parameters
    ----------
    start, end : Mapping[(str, int), int]
        Offsets; a partition absent from ``start`` starts at 0.
    max_records : int
        Cap on the total number of offsets, at least 1.

    Returns
    -------
    OffsetMap
        End offsets with ``start <= capped <= end`` for each partition in ``end``.
    """
    if max_records < 1:
        raise KafkaOptionError(f"maxOffsetsPerTrigger must be positive, got {max_records}")
    backlog = {tp: max(0, end[tp] - start.get(tp, 0)) for tp in end}
    total = sum(backlog.values())
    if total <= max_records:
        return dict(end)
    shares = {tp: backlog[tp] * max_records // total for tp in backlog}
    left = max_records - sum(shares.values())
    by_remainder = sorted(backlog, key=lambda tp: (-(backlog[tp] * max_records % total), tp))
    for tp in by_remainder[:left]:
        shares[tp] += 1
    return {tp: start.get(tp, 0) + shares[tp] if backlog[tp] else end[tp] for tp in end}
