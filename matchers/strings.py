"""The string side path of phase 1: string operators other than equality.

Prefix, suffix, contains, LIKE, MATCHES, string ordering (``<`` ... ``>=``),
``BETWEEN`` on strings, case-insensitive ``=``, ``IN``, prefix and suffix, ``IN CIDR``, and
their negations.  Each attribute keeps, per operator family, its distinct operands with the
predicate ids that test them: prefix and suffix through hashed lookups of the value's
own prefixes and suffixes, contains through one Aho-Corasick scan, LIKE and MATCHES
through one RE2 set, ordering through sorted operands, case-insensitive equality
through one lookup of the folded value, CIDR through one lookup of the masked address
per prefix length.  A value is evaluated once per distinct (attribute,
string) and the result is cached until the attribute's predicates change.
"""

from __future__ import annotations

import bisect
import ipaddress
from collections.abc import Callable

import numpy as np

from matchers.events import STR, EventBatch
from matchers.expr import COMPLEMENT, NEGATIVE_OPS, Kind, Op, Pred
from matchers.operands import like_parse

STRING_SIDE_OPS = frozenset({
    Op.LT, Op.LE, Op.GT, Op.GE, Op.BETWEEN, Op.NOT_BETWEEN,
    Op.PREFIX, Op.NOT_PREFIX, Op.SUFFIX, Op.NOT_SUFFIX, Op.CONTAINS, Op.NOT_CONTAINS,
    Op.LIKE, Op.NOT_LIKE, Op.MATCHES, Op.NOT_MATCHES,
    Op.EQ_ICASE, Op.NE_ICASE, Op.IN_ICASE, Op.NOT_IN_ICASE, Op.CIDR, Op.NOT_CIDR,
    Op.PREFIX_ICASE, Op.NOT_PREFIX_ICASE, Op.SUFFIX_ICASE, Op.NOT_SUFFIX_ICASE,
})
"""Operators this evaluator owns when the operand is a string."""

_EMPTY = np.zeros(0, dtype=np.int32)
_CACHE_LIMIT = 200_000


def like_to_regex(pattern: str) -> str:
    """An RE2 pattern that full-matches exactly the strings the LIKE pattern matches."""
    import re2

    parts = ["(?s)"]
    for kind, text in like_parse(pattern):
        parts.append(re2.escape(text) if kind == "lit" else "." if kind == "one" else ".*")
    return "".join(parts)


class _Family:
    """Distinct operands of one operator family on one attribute, with positive and negated pids."""

    def __init__(self) -> None:
        self.index: dict[object, int] = {}
        self.operands: list[object] = []
        self.pos: list[set[int]] = []
        self.neg: list[set[int]] = []
        self.dirty = True

    def add(self, operand: object, pid: int, negated: bool) -> None:
        i = self.index.get(operand)
        if i is None:
            i = self.index[operand] = len(self.operands)
            self.operands.append(operand)
            self.pos.append(set())
            self.neg.append(set())
        (self.neg if negated else self.pos)[i].add(pid)
        self.dirty = True

    def remove(self, operand: object, pid: int, negated: bool) -> None:
        i = self.index[operand]
        (self.neg if negated else self.pos)[i].discard(pid)
        self.dirty = True

    def emit(self, hits: set[int], out: list[int]) -> None:
        """Positive pids of operands in ``hits``, negated pids of the others."""
        for i in hits:
            out.extend(self.pos[i])
        for i, negs in enumerate(self.neg):
            if negs and i not in hits:
                out.extend(negs)

    def empty(self) -> bool:
        return not any(self.pos) and not any(self.neg)


class _AttrStrings:
    """All side-path predicates of one attribute and their compiled matchers."""

    def __init__(self) -> None:
        self.families: dict[str, _Family] = {}
        self._compiled: dict[str, object] = {}

    def __getstate__(self) -> dict:
        """Operands only: compiled matchers (RE2 sets, automata) are rebuilt on first use."""
        return {"families": self.families}

    def __setstate__(self, state: dict) -> None:
        self.families = state["families"]
        self._compiled = {}
        for fam in self.families.values():
            fam.dirty = True

    def family(self, name: str) -> _Family:
        fam = self.families.get(name)
        if fam is None:
            fam = self.families[name] = _Family()
        return fam

    def evaluate(self, text: str) -> np.ndarray:
        out: list[int] = []
        for name, fam in self.families.items():
            if fam.operands:
                fam.emit(self._hits(name, fam, text), out)
        return np.unique(np.asarray(out, dtype=np.int32)) if out else _EMPTY

    def _hits(self, name: str, fam: _Family, text: str) -> set[int]:
        if fam.dirty:
            self._compiled[name] = _COMPILERS[name](fam.operands)
            fam.dirty = False
        return _MATCHERS[name](self._compiled[name], text)


def _compile_affix(operands: list) -> tuple[dict[str, int], list[int]]:
    return {op: i for i, op in enumerate(operands)}, sorted({len(op) for op in operands})


def _prefix_hits(compiled, text: str) -> set[int]:
    table, lengths = compiled
    return {table[text[:n]] for n in lengths if n <= len(text) and text[:n] in table}


def _suffix_hits(compiled, text: str) -> set[int]:
    table, lengths = compiled
    return {table[text[len(text) - n:]] for n in lengths if n <= len(text) and text[len(text) - n:] in table}


def _compile_contains(operands: list):
    import ahocorasick

    automaton = ahocorasick.Automaton()
    empty = set()
    for i, op in enumerate(operands):
        if op:
            automaton.add_word(op, i)
        else:
            empty.add(i)
    if len(automaton):
        automaton.make_automaton()
        return automaton, empty
    return None, empty


def _contains_hits(compiled, text: str) -> set[int]:
    automaton, empty = compiled
    hits = set(empty)
    if automaton is not None:
        hits.update(i for _, i in automaton.iter(text))
    return hits


def _compile_regex_set(patterns: list[str], full: bool):
    import re2

    regex_set = re2.Set.FullMatchSet() if full else re2.Set.SearchSet()
    for p in patterns:
        regex_set.Add(p)
    regex_set.Compile()
    return regex_set


def _compile_order(operands: list) -> tuple[list, list[int]]:
    order = sorted(range(len(operands)), key=lambda i: operands[i])
    return [operands[i] for i in order], order


def _lt_hits(compiled, text: str) -> set[int]:  # text < v
    values, order = compiled
    return set(order[bisect.bisect_right(values, text):])


def _le_hits(compiled, text: str) -> set[int]:  # text <= v
    values, order = compiled
    return set(order[bisect.bisect_left(values, text):])


def _gt_hits(compiled, text: str) -> set[int]:  # text > v
    values, order = compiled
    return set(order[:bisect.bisect_left(values, text)])


def _ge_hits(compiled, text: str) -> set[int]:  # text >= v
    values, order = compiled
    return set(order[:bisect.bisect_right(values, text)])


def _between_hits(compiled, text: str) -> set[int]:
    return {i for i, (lo, hi) in enumerate(compiled) if lo <= text <= hi}


def _compile_icase(operands: list) -> dict[str, list[int]]:
    """Folded value -> operands (a folded string, or a tuple of them) holding it."""
    table: dict[str, list[int]] = {}
    for i, op in enumerate(operands):
        for value in op if isinstance(op, tuple) else (op,):
            table.setdefault(value, []).append(i)
    return table


def _icase_hits(compiled, text: str) -> set[int]:
    return set(compiled.get(text.casefold(), ()))


def _compile_cidr(operands: list) -> dict[tuple[int, int], dict[int, list[int]]]:
    """(IP version, prefix length) -> network address shifted to its prefix -> operands."""
    table: dict[tuple[int, int], dict[int, list[int]]] = {}
    for i, op in enumerate(operands):
        net = ipaddress.ip_network(op)
        shift = net.max_prefixlen - net.prefixlen
        table.setdefault((net.version, shift), {}).setdefault(int(net.network_address) >> shift, []).append(i)
    return table


def _cidr_hits(compiled, text: str) -> set[int]:
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return set()
    value = int(address)
    return {i for (version, shift), nets in compiled.items() if version == address.version
            for i in nets.get(value >> shift, ())}


_COMPILERS: dict[str, Callable] = {
    "prefix": _compile_affix,
    "suffix": _compile_affix,
    "prefix_icase": _compile_affix,
    "suffix_icase": _compile_affix,
    "contains": _compile_contains,
    "like": lambda ops: _compile_regex_set([like_to_regex(p) for p in ops], full=True),
    "regex": lambda ops: _compile_regex_set(ops, full=False),
    "lt": _compile_order, "le": _compile_order, "gt": _compile_order, "ge": _compile_order,
    "between": list,
    "icase": _compile_icase,
    "cidr": _compile_cidr,
}
_MATCHERS: dict[str, Callable] = {
    "prefix": _prefix_hits,
    "suffix": _suffix_hits,
    "prefix_icase": lambda c, text: _prefix_hits(c, text.casefold()),
    "suffix_icase": lambda c, text: _suffix_hits(c, text.casefold()),
    "contains": _contains_hits,
    "like": lambda s, text: set(s.Match(text) or ()),
    "regex": lambda s, text: set(s.Match(text) or ()),
    "lt": _lt_hits, "le": _le_hits, "gt": _gt_hits, "ge": _ge_hits,
    "between": _between_hits,
    "icase": _icase_hits,
    "cidr": _cidr_hits,
}
_FAMILY_OF: dict[Op, str] = {
    Op.PREFIX: "prefix", Op.SUFFIX: "suffix", Op.CONTAINS: "contains", Op.LIKE: "like",
    Op.MATCHES: "regex", Op.LT: "lt", Op.LE: "le", Op.GT: "gt", Op.GE: "ge", Op.BETWEEN: "between",
    Op.EQ_ICASE: "icase", Op.IN_ICASE: "icase", Op.CIDR: "cidr",
    Op.PREFIX_ICASE: "prefix_icase", Op.SUFFIX_ICASE: "suffix_icase",
}


def _family_key(p: Pred) -> tuple[str, bool]:
    """(family name, negated) of a side-path predicate."""
    if p.op in NEGATIVE_OPS:
        return _FAMILY_OF[COMPLEMENT[p.op]], True
    return _FAMILY_OF[p.op], False


class StringEvaluator:
    """Phase-1 evaluator for string predicates other than (in)equality and set membership."""

    def __init__(self) -> None:
        self._attrs: dict[int, _AttrStrings] = {}
        self._cache: dict[tuple[int, str], np.ndarray] = {}

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_cache": {}}

    @staticmethod
    def owns(p: Pred) -> bool:
        """Whether this evaluator is the one for ``p``."""
        return p.kind is Kind.STR and p.op in STRING_SIDE_OPS

    def add(self, pid: int, p: Pred, attr_id: int) -> None:
        name, negated = _family_key(p)
        self._attrs.setdefault(attr_id, _AttrStrings()).family(name).add(p.operand, pid, negated)
        self._invalidate(attr_id)

    def remove(self, pid: int, p: Pred, attr_id: int) -> None:
        name, negated = _family_key(p)
        attr = self._attrs[attr_id]
        attr.family(name).remove(p.operand, pid, negated)
        if all(f.empty() for f in attr.families.values()):
            del self._attrs[attr_id]
        self._invalidate(attr_id)

    def renumber(self, new_of_old: np.ndarray) -> None:
        """Move predicate ``i`` to id ``new_of_old[i]``."""
        for attr in self._attrs.values():
            for fam in attr.families.values():
                fam.pos = [{int(new_of_old[p]) for p in pids} for pids in fam.pos]
                fam.neg = [{int(new_of_old[p]) for p in pids} for pids in fam.neg]
        self._cache = {}

    def _invalidate(self, attr_id: int) -> None:
        if self._cache:
            self._cache = {k: v for k, v in self._cache.items() if k[0] != attr_id}

    def pids_for(self, attr_id: int, text: str) -> np.ndarray:
        """Satisfied pids for one string value of one attribute (cached)."""
        key = (attr_id, text)
        hit = self._cache.get(key)
        if hit is None:
            attr = self._attrs.get(attr_id)
            hit = attr.evaluate(text) if attr is not None else _EMPTY
            if len(self._cache) >= _CACHE_LIMIT:
                self._cache.clear()
            self._cache[key] = hit
        return hit

    def _distinct_hits(self, batch: EventBatch) -> tuple[np.ndarray, ...] | None:
        """The string entries of the batch's side-path attributes (ascending), the distinct
        (attribute, string) of each, and the hits of those ``flat[starts[d]:starts[d] + sizes[d]]``
        (each evaluated once); ``None`` without such entries."""
        if not self._attrs:
            return None
        entries = np.flatnonzero(batch.kinds == STR)
        attrs = batch.attrs[entries]
        wanted = np.isin(attrs, np.fromiter(self._attrs, dtype=np.int32, count=len(self._attrs)))
        entries, attrs = entries[wanted], attrs[wanted]
        if len(entries) == 0:
            return None
        strings = batch.strings
        width = max(len(strings), 1)
        pairs, inverse = np.unique(attrs.astype(np.int64) * width + batch.texts[entries], return_inverse=True)
        parts = [self.pids_for(a, strings[t]) for a, t in zip((pairs // width).tolist(), (pairs % width).tolist(),
                                                               strict=True)]  # once per distinct (attribute, string)
        sizes = np.fromiter(map(len, parts), dtype=np.int64, count=len(parts))
        return entries, inverse, np.cumsum(sizes) - sizes, sizes, np.concatenate(parts).astype(np.int32)

    def entry_hits(self, batch: EventBatch) -> tuple[np.ndarray, np.ndarray]:
        """CSR over the batch's entries of the satisfied side-path predicates: entry ``j``
        satisfies ``pids[offsets[j]:offsets[j + 1]]``."""
        offsets = np.zeros(len(batch.attrs) + 1, dtype=np.int64)
        hits = self._distinct_hits(batch)
        if hits is None:
            return offsets, _EMPTY
        entries, inverse, starts, sizes, flat = hits
        lengths = sizes[inverse]
        counts = np.zeros(len(batch.attrs), dtype=np.int64)
        counts[entries] = lengths
        np.cumsum(counts, out=offsets[1:])
        return offsets, flat[np.repeat(starts[inverse] - (np.cumsum(lengths) - lengths), lengths) + np.arange(lengths.sum())]

    def satisfied(self, batch: EventBatch) -> tuple[np.ndarray, np.ndarray]:
        """``(event_idx, pid)`` pairs of satisfied side-path predicates."""
        from matchers.phase1 import kernels  # matchers.phase1 imports this module

        hits = self._distinct_hits(batch)
        if hits is None:
            return _EMPTY, _EMPTY
        entries, inverse, starts, sizes, flat = hits
        total = int(sizes[inverse].sum())
        ev, pid = np.empty(total, dtype=np.int32), np.empty(total, dtype=np.int32)
        kernels.entry_pairs(batch.offsets, entries, inverse, starts, sizes, flat, ev, pid)
        return ev, pid

    def memory_bytes(self) -> int:
        total = 0
        for attr in self._attrs.values():
            for fam in attr.families.values():
                total += sum(64 + len(str(o)) for o in fam.operands)
                total += sum(8 * (len(p) + len(n)) for p, n in zip(fam.pos, fam.neg, strict=True))
        total += sum(64 + v.nbytes for v in self._cache.values())
        return total
