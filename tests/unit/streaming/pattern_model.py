"""A reference model of the pattern registry of the earlier release (its own query and files,
replaced by the one registry's patterns): the oracle of the pattern side of ``test_registry_admit``.

Per batch, the records in offset order: a record whose envelope is refused is the match query's
to report (ignored here); a delete, or an expression record, removes the pattern of its id (the
tenant's internal id) if there is one; a pattern record whose text does not compile, or that
names a target, is an error record (stage ``pattern``); a tenant's upsert of a new pattern past
its ``patterns`` quota is refused; the others register the pattern. A batch at or below the last
one that recorded is a replay: judged against the patterns before it, it changes nothing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from streaming.patterns.registry import PATTERN, pattern_change
from streaming.records import DEFAULT_LIMITS, DELETE, ErrorRecord, Position, error, read_envelope
from streaming.tenants import OPERATOR, Tenants


class PatternModel:
    """``{internal id: CEL text}`` per recorded batch."""

    def __init__(self) -> None:
        self.versions: list[tuple[int, dict[str, str]]] = [(-1, {})]

    def latest(self) -> dict[str, str]:
        return self.versions[-1][1]

    def before(self, batch_id: int) -> dict[str, str]:
        return [p for b, p in self.versions if b < batch_id][-1]

    def apply(self, batch_id: int, rows: Iterable[tuple], tenants: Tenants | None = None) -> list[ErrorRecord]:
        """A batch of records ``(key, value, topic, partition, offset)`` in offset order; its error records."""
        known = dict(self.before(batch_id))
        held = Counter(Tenants.split(p)[0] for p in known)
        errors: list[ErrorRecord] = []
        changed = False
        for key, value, topic, partition, offset in rows:
            position = Position(topic, partition, offset)
            tenant = tenants.tenant_of_topic(topic) if tenants is not None else OPERATOR
            envelope = read_envelope(key, value, position, DEFAULT_LIMITS)
            if isinstance(envelope, ErrorRecord):
                continue
            op, public, obj = envelope
            sub_id = Tenants.internal(tenant, public) if tenants is not None else public
            if op == DELETE or obj is None or "pattern" not in obj:
                if sub_id in known:
                    del known[sub_id]
                    held[tenant] -= 1
                    changed = True
                continue
            judged = pattern_change(public, obj, key, value, position)
            if isinstance(judged, ErrorRecord):
                errors.append(judged)
                continue
            if sub_id not in known and tenants is not None:
                reason = tenants.refusal(tenant, Tenants.split(sub_id)[1], "patterns", held[tenant] + 1)
                if reason is not None:
                    errors.append(error(PATTERN, value, position, reason, key))
                    continue
            if sub_id not in known:
                held[tenant] += 1
            known[sub_id] = obj["pattern"]
            changed = True
        if batch_id > self.versions[-1][0] and changed:
            self.versions.append((batch_id, known))
        return errors
