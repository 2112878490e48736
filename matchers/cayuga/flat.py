"""The flat store (the "flat engine"): the subscriptions whose instances live as rows of arrays.

A subscription is *flat* when :func:`.flat_rules.flat_chain` admits it. Such a
subscription never looks at a record's attributes beyond the key values of its equalities,
so the step runs over rows
(:mod:`.flat_kernels`): the event's key values become ids, its values for static atoms a
type, a constant id and a number; one kernel call finds the start edges (indexed by an
equality atom), the affected instances, moves them, creates the new ones and lists the
matches; only the matched records are built as dicts, here. An integer too large for a
float has its static atoms checked here (exactly) instead.

:class:`FlatStore` is an instance store (:class:`~.store.InstanceStore`): its
:class:`~.automaton.Automaton` links subscriptions to start edges, nodes and forward edges
as the Python store's does (the same state merging), and tells it of each edge and node,
which it writes as rows for the kernels. :class:`~.engine.Engine` routes its flat
subscriptions to one. The semantics are the Python store's (the comparisons are
:mod:`.rules`' in both); the tests check both against the reference.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from numba.typed import List

from matchers.arrays import stored

from . import flat_kernels as K
from . import flat_layout as L
from .automaton import Automaton, Match, Node, Out, Start, new
from .compiler import Chain, view_static_atoms
from .flat_rules import FLAT_PREFIX
from .static import holds, tag
from .store import Row

_ZEROS = np.zeros(1024, dtype=np.int64)
_COLUMN = 16  # events from which a column's values are first checked for one common type (then done at once)
_PLAIN_KEYS = {str, int, float, type(None)}  # key values looked up as they are (a bool is tagged, a list unhashable)

def _rows(n: int, cols: int, fill: int = -1) -> np.ndarray:
    return np.full((n, cols), fill, dtype=np.int64)


class FlatStore:
    """Flat subscriptions (:func:`.flat_rules.flat_chain`) over instance rows; driven by an :class:`~.engine.Engine`."""

    def __init__(self, merge: bool):
        self.graph = Automaton(merge, self)
        self.starts, self.nodes, self._subs = self.graph.starts, self.graph.nodes, self.graph.subs
        ints, flts = L.empty_layout()
        self._tints, self._tflts = List(ints), List(flts)  # what the kernels take
        self.ints, self.flts = ints, flts  # the same arrays, read from Python (a typed list's item costs a call)
        self._grown = 0
        self._free_rows: dict[int, list[int]] = {L.NODE: [], L.OUT: [], L.TGT: [], L.ATOM: [], L.START: []}
        self._node_row: dict[str, int] = {}
        self._row_node: dict[int, Node] = {}
        self._out_row: dict[int, int] = {}  # id(Out) -> row
        self._out_of_row: dict[int, Out] = {}
        self._out_tgts: dict[int, dict[int, int]] = {}  # out row -> node row -> target row
        self._accepts: list[tuple[tuple[str, ...], int] | None] = []  # out row -> its subscriptions, their latest epoch
        self._start_row: dict[str, int] = {}
        self._start_key: dict[int, tuple[int, int, int]] = {}  # row -> its index key
        self._stream_starts: dict[str, dict[int, tuple]] = {}  # stream -> start row -> its static atoms (exact events)
        self._sslot: dict[str, int] = {}  # attributes the nodes' static atoms read -> their static slot
        self._const_id: dict[Any, int] = {}  # constants of static atoms (tagged) -> id
        self._static_nodes: dict[int, Node] = {}  # row -> node, of the nodes with static atoms
        self._group_row: dict[tuple[str, tuple[str, ...]], int] = {}
        self._stream_id: dict[str, int] = {}
        self._slot: dict[str, int] = {}
        self._key_id: dict[Any, int] = {}
        self._key_val: list[Any] = []
        self._key_free: list[int] = []
        self._recs: list[Any] = [None] * 16  # record id -> (witness, attributes)
        self._new_keys: list[int] = []
        self._node_atoms: dict[str, list[int]] = {}
        self._node_outs: dict[str, list[Out]] = {}

    # ------------------------------------------------------------ structure
    @property
    def instances(self) -> int:
        """Live instances (rows)."""
        return int(self.ints[L.META][0, L.M_LIVE])

    def add(self, sub_id: str, chs: list[Chain], since: int) -> None:
        self._sync(self.graph.link(sub_id, chs, since))

    def remove(self, sub_id: str) -> bool:
        links = self.graph.unlink(sub_id)
        if links is None:
            return False
        self._sync(links)
        return True

    def _put(self, slot: int, arr: np.ndarray) -> None:
        self.ints[slot] = self._tints[slot] = arr

    def _putf(self, slot: int, arr: np.ndarray) -> None:
        self.flts[slot] = self._tflts[slot] = arr

    def _refresh(self) -> None:
        """Take the arrays a kernel call replaced (and room for as many records)."""
        grown = int(self.ints[L.META][0, L.M_GROWN])
        if grown != self._grown:
            self._grown = grown
            self.ints[:] = list(self._tints)
            self.flts[:] = list(self._tflts)
            self._recs.extend([None] * (self.ints[L.REC].shape[0] - len(self._recs)))

    def _new_row(self, slot: int) -> int:
        free = self._free_rows[slot]
        if free:
            return free.pop()
        arr = self.ints[slot]
        n = arr.shape[0]
        self._put(slot, np.concatenate([arr, _rows(max(n, 16), arr.shape[1])]))
        if slot == L.NODE:
            self._put(L.NOK, np.concatenate([self.ints[L.NOK], _rows(max(n, 16), 1, 0)]))
            self._putf(L.NDEAD, np.concatenate([self.flts[L.NDEAD], np.full((max(n, 16), 1), math.inf)]))
        if slot == L.OUT:
            self._putf(L.OUTK, np.concatenate([self.flts[L.OUTK], np.zeros((max(n, 16), L.MAX_DUR_TESTS))]))
        if slot == L.ATOM:
            self._putf(L.ATOMK, np.concatenate([self.flts[L.ATOMK], np.zeros((max(n, 16), 1))]))
        free.extend(range(n + max(n, 16) - 1, n, -1))  # popped in order
        return n

    def _slot_of(self, name: str) -> int:
        """The slot of attribute ``name`` (new slots widen the records' rows)."""
        s = self._slot.get(name)
        if s is None:
            s = self._slot[name] = len(self._slot)
            rec = self.ints[L.REC]
            col = np.full((rec.shape[0], 1), L.NO_KEY, dtype=np.int64)
            used = int(self.ints[L.META][0, L.M_RUSED])
            for r in np.flatnonzero(rec[:used, 0] > 0).tolist():  # live records: their value of ``name``
                col[r, 0] = max(self._key(self._recs[r][1], name), L.NO_KEY)
                if col[r, 0] >= 0:
                    self.ints[L.KREF][col[r, 0], 0] += 1
            self._put(L.REC, np.ascontiguousarray(np.concatenate([rec, col], axis=1)))
        return s

    def new_node(self, nid: str, spec) -> Node:
        node = Node(nid, spec, True, closures=False)  # the kernels check the node's atoms
        row = self._new_row(L.NODE)
        self._node_row[nid] = row
        self._row_node[row] = node
        gkey = (node.stream, node.eq_attrs)
        g = self._group_row.get(gkey)
        if g is None:
            g = self._group_row[gkey] = self.ints[L.GROUP].shape[0]
            grow = _rows(1, L.G_COLS)
            grow[0, L.G_STREAM] = self._stream(node.stream)
            for a, name in enumerate(node.eq_attrs):
                grow[0, L.G_A0 + a] = self._slot_of(name)
            self._put(L.GROUP, np.concatenate([self.ints[L.GROUP], grow]))
        nrow = self.ints[L.NODE][row]
        nrow[:] = -1
        nrow[L.N_GROUP] = g
        nrow[L.N_FOLD] = node.kind == "fold"
        nrow[L.N_STATIC] = bool(node.static_atoms)
        for a, name in enumerate(node.eq_names or ()):
            self.ints[L.NODE][row, L.N_E0 + a] = self._slot_of(name)
        head, rows = self._atoms(node.static_atoms)
        self.ints[L.NODE][row, L.N_ATOM] = head
        self._node_atoms[nid] = rows
        if rows:
            self._static_nodes[row] = node
        self._node_outs[nid] = []
        return node

    def delete_node(self, node: Node) -> None:
        row = self._node_row.pop(node.id)
        K.drop_node(self._tints, row)
        self._refresh()
        self._collect()
        del self._row_node[row]
        self._free_rows[L.ATOM].extend(self._node_atoms.pop(node.id))
        self._static_nodes.pop(row, None)
        for out in self._node_outs.pop(node.id):
            self._drop_out(out)
        self.ints[L.NODE][row] = -1
        self.flts[L.NDEAD][row, 0] = math.inf
        self._free_rows[L.NODE].append(row)

    def _atoms(self, atoms: Sequence[tuple[str, str, Any]]) -> tuple[int, list[int]]:
        """Rows for static atoms (:func:`.flat_rules.kernel_atom`): the first one's (-1: none) and all."""
        head, rows = -1, []
        for attr, op, c in reversed(atoms):
            a = self._new_row(L.ATOM)
            arow = self.ints[L.ATOM][a]
            arow[L.A_NEXT] = head
            arow[L.A_SLOT] = self._sslot.setdefault(attr, len(self._sslot))
            arow[L.A_OP] = L.OPS.index(op)
            arow[L.A_CONST] = self._const_id.setdefault(tag(c), len(self._const_id))
            if type(c) in (int, float):
                arow[L.A_KIND] = L.NUMBER
                self.flts[L.ATOMK][a, 0] = float(c)
            else:
                arow[L.A_KIND] = L.STRING if type(c) is str else L.BOOLEAN
            head = a
            rows.append(a)
        return head, rows

    def new_start(self, sid: str, c: Chain) -> Start:
        """A start edge indexed by its first equality atom (else listed for its stream); the
        kernel checks its other atoms (an event found through the index passes that one:
        equal constant ids are equal values of the same kind)."""
        start = Start(sid, c.start, closures=False)
        atoms = view_static_atoms(c.start)
        eq = next((a for a in atoms if a[1] == "="), None)
        row = self._start_row[sid] = self._new_row(L.START)
        head, rows = self._atoms([a for a in atoms if a is not eq])
        self.ints[L.START][row, L.S_ATOM] = head
        self.ints[L.START][row, L.S_OUT] = -1
        self._node_atoms[sid] = rows
        stream = self._stream(c.start.stream)
        key = (stream, L.SCAN, L.SCAN)
        if eq is not None:
            key = (stream, self._sslot.setdefault(eq[0], len(self._sslot)),
                   self._const_id.setdefault(tag(eq[2]), len(self._const_id)))
        self._start_key[row] = key
        K.index_start(self._tints, *key, row)
        self._refresh()
        self._stream_starts.setdefault(c.start.stream, {})[row] = tuple(atoms)
        return start

    def delete_start(self, start: Start) -> None:
        row = self._start_row.pop(start.id)
        K.unindex_start(self._tints, *self._start_key.pop(row), row)
        self._refresh()
        del self._stream_starts[start.view.stream][row]
        self._free_rows[L.ATOM].extend(self._node_atoms.pop(start.id))
        self._drop_out(start.out)
        self.ints[L.START][row] = -1
        self._free_rows[L.START].append(row)

    def _stream(self, name: str) -> int:
        return self._stream_id.setdefault(name, len(self._stream_id))

    def _sync(self, links: Iterable[tuple]) -> None:
        """Write the rows of the start edges, nodes and forward edges of ``links`` (chains
        of one subscription, see :meth:`.automaton.Automaton.link`)."""
        for sid, path in links:
            start = self.starts.get(sid)
            if start is not None:
                self.ints[L.START][self._start_row[sid], L.S_OUT] = self._sync_out(start.out)
            for nid, _post in path:
                node = self.nodes.get(nid)
                if node is None:
                    continue
                row = self._node_row[nid]
                d = node.deadline
                self.flts[L.NDEAD][row, 0] = math.inf if d is None else float(d)
                outs = list(node.outs.values())
                for out in self._node_outs[nid]:
                    if all(out is not o for o in outs):
                        self._drop_out(out)
                self._node_outs[nid] = outs
                first = -1
                for out in reversed(outs):
                    o = self._sync_out(out)
                    self.ints[L.OUT][o, L.O_NEXT] = first
                    first = o
                self.ints[L.NODE][row, L.N_OUT] = first

    def _sync_out(self, out: Out) -> int:
        """The row of forward edge ``out``, written from it (its targets as a diff)."""
        row = self._out_row.get(id(out))
        if row is None:
            row = self._out_row[id(out)] = self._new_row(L.OUT)
            self._out_of_row[row] = out
            self._out_tgts[row] = {}
            self.ints[L.OUT][row] = -1
            self.ints[L.OUT][row, L.O_ND] = 0
            for j, (op, k) in enumerate(out.durs or ()):
                self.ints[L.OUT][row, L.O_OP0 + j] = op
                self.flts[L.OUTK][row, j] = float(k)
            self.ints[L.OUT][row, L.O_ND] = len(out.durs or ())
        orow = self.ints[L.OUT][row]
        orow[L.O_ACCEPT] = bool(out.accept)
        if row >= len(self._accepts):
            self._accepts.extend([None] * (row + 1 - len(self._accepts)))
        self._accepts[row] = (tuple(out.accept), max(out.accept.values(), default=0))
        orow[L.O_NT] = len(out.targets)
        tgts = self._out_tgts[row]
        want = {self._node_row[n.id] for n in out.targets}
        for n in set(tgts) - want:
            self._free_rows[L.TGT].append(tgts.pop(n))
        for n in want - set(tgts):
            t = tgts[n] = self._new_row(L.TGT)
            self.ints[L.TGT][t, 0] = n
        tgt = self.ints[L.TGT]
        head = -1
        for t in tgts.values():
            tgt[t, 1] = head
            head = t
        self.ints[L.OUT][row, L.O_TGT] = head
        return row

    def _drop_out(self, out: Out) -> None:
        row = self._out_row.pop(id(out), None)
        if row is None:
            return
        del self._out_of_row[row]
        self._accepts[row] = None
        self._free_rows[L.TGT].extend(self._out_tgts.pop(row).values())
        self.ints[L.OUT][row] = -1
        self._free_rows[L.OUT].append(row)

    # ------------------------------------------------------------ keys and records
    def _key(self, attrs: dict, name: str) -> int:
        """The key id of ``attrs[name]`` (:data:`~.flat_layout.ABSENT`, :data:`~.flat_layout.NO_KEY`);
        an id made for it is listed in ``self._new_keys`` (freed after the kernel call if no
        record holds it)."""
        if name not in attrs:
            return L.ABSENT
        v = attrs[name]
        if v is None or v != v:
            return L.NO_KEY
        t = tag(v)
        try:
            k = self._key_id.get(t)
        except TypeError:  # unhashable (a list): equal to no bound value
            return L.NO_KEY
        if k is None:
            k = stored(self._key_val, self._key_free, t)
            kref = self.ints[L.KREF]
            if k >= kref.shape[0]:
                self._put(L.KREF, np.concatenate([kref, np.zeros((max(16, kref.shape[0]), 2), np.int64)]))
            self.ints[L.KREF][k] = 0
            self._key_id[t] = k
            self._new_keys.append(k)
        return k

    def _collect(self, attrs: Sequence[dict] = (), wits: Sequence[tuple] = ()) -> list[tuple[int, Match]]:
        """Build the records a kernel call made (from the attributes and witnesses of the
        events of :meth:`run`) and its matches, forget the records it freed, free the
        key ids no record holds; the matches as ``(index of the event, match)``."""
        ints, recs = self.ints, self._recs
        meta = ints[L.META][0]
        n = int(meta[L.M_NEWREC])
        if n:
            for r, parent, ei in ints[L.NEWREC][:n].tolist():
                if parent < 0:
                    recs[r] = (wits[ei], attrs[ei])
                else:
                    pw, pa = recs[parent]
                    recs[r] = (pw + wits[ei], {**pa, **attrs[ei]})
        out: list[tuple[int, Match]] = []
        n = int(meta[L.M_MATCH])
        if n:
            accepts, add = self._accepts, out.append
            for ei, o, r, t0, t1, born in ints[L.MATCH][:n].tolist():
                wit, attrs = recs[r]
                subs, last = accepts[o]
                if born >= last:  # every subscription of the edge sees the instance
                    for sub in subs:
                        add((ei, new(Match, (sub, attrs, t0, t1, wit))))
                else:
                    for sub, since in self._out_of_row[o].accept.items():
                        if born >= since:
                            add((ei, new(Match, (sub, attrs, t0, t1, wit))))
        for r in ints[L.FREEREC][: int(meta[L.M_FREEREC]), 0].tolist():
            recs[r] = None
        kref = ints[L.KREF]
        for k in ints[L.FREEKEY][: int(meta[L.M_FREEKEY]), 0].tolist() + self._new_keys:
            if kref[k, 0] == 0 and self._key_val[k] is not None:
                del self._key_id[self._key_val[k]]
                self._key_val[k] = None
                self._key_free.append(k)
        self._new_keys = []
        return out

    # ------------------------------------------------------------ matching
    def run(self, events: Sequence[Row], epoch: int, starting: bool) -> list[tuple[int, Match]]:
        """Events ``(stream, attributes, t0, t1, witness, seq)`` in order (their clock and
        sequence numbers checked and given by the caller); ``(index, match)`` pairs."""
        n = len(events)
        self._new_keys = []
        streams = self._stream_id
        names, attrs, t0s, t1s, wits, seqs = zip(*events, strict=True)
        cols: list[Sequence] = [[streams.get(s, -1) for s in names], t0s, t1s, seqs, [0] * n]
        cols += [self._key_column(attrs, name) for name in self._slot]
        nums: list[list] = []
        exact: set[int] = set()  # events with an integer a float would round: their static atoms checked here
        for name in self._sslot:
            codes, ids, vals = self._static_column([a.get(name) for a in attrs], exact)
            cols += (codes, ids)
            nums.append(vals)
        ev = np.array(cols, dtype=np.int64)
        evn = np.array(nums, dtype=np.float64) if nums else np.empty((0, n))
        if exact:
            sout: list[int] = []
            snode: list[int] = []
            soff, noff = [0], [0]
            start_out = self.ints[L.START][:, L.S_OUT]
            for i, (stream, a, *_) in enumerate(events):
                if i in exact:
                    ev[L.E_EXACT, i] = 1
                    snode += [r for r, node in self._static_nodes.items()
                              if all(holds(atom, a) for atom in node.static_atoms)]
                    sout += [int(start_out[r]) for r, atoms in self._stream_starts.get(stream, {}).items()
                             if all(holds(atom, a) for atom in atoms)]
                soff.append(len(sout))
                noff.append(len(snode))
            lists = [np.array(a, dtype=np.int64) for a in (sout, soff, snode, noff)]
        else:  # no exact event: no lists from here
            lists = [_ZEROS if n < len(_ZEROS) else np.zeros(n + 1, dtype=np.int64)] * 4
        K.step(self._tints, self._tflts, L.Steps(ev, evn, *lists), epoch, starting)
        self._refresh()
        return self._collect(attrs, wits)

    def _key_column(self, attrs: Sequence[dict], name: str) -> list[int]:
        """The key ids of ``name`` in each of ``attrs`` (see :meth:`_key`)."""
        key = self._key
        if len(attrs) >= _COLUMN:
            vals = [a.get(name) for a in attrs]
            if set(map(type, vals)) <= _PLAIN_KEYS:  # hashable and their own tag: known ids looked up at once
                get = self._key_id.get
                ids = [get(v, L.ABSENT) for v in vals]
                if L.ABSENT not in ids:
                    return ids
                return [k if k != L.ABSENT else key(a, name) for k, a in zip(ids, attrs, strict=True)]
        return [key(a, name) for a in attrs]

    def _static_column(self, vals: list, exact: set[int]) -> tuple[list[int], list[int], list[float]]:
        """The kernels' type code, constant id and number of each value of one static slot;
        adds to ``exact`` the indexes of integers a float would round."""
        consts = self._const_id
        if len(vals) >= _COLUMN:
            kinds = set(map(type, vals))
            if kinds == {float}:
                return [L.T_NUMBER] * len(vals), [consts.get(v, -1) for v in vals], vals
            if kinds == {str}:
                return [L.T_STRING] * len(vals), [consts.get(v, -1) for v in vals], [0.0] * len(vals)
        codes, ids, nums = [], [], []
        for i, v in enumerate(vals):
            tv = type(v)
            if tv is int or tv is float:
                codes.append(L.T_NUMBER)
                ids.append(consts.get(v, -1))
                if tv is int and not -(2**53) < v < 2**53:
                    exact.add(i)
                    v = 0.0
                nums.append(v)
                continue
            nums.append(0.0)
            if v is None:
                codes.append(L.T_NONE)
                ids.append(-1)
            elif tv is bool:
                codes.append(L.T_BOOLEAN)
                ids.append(consts.get(tag(v), -1))
            elif isinstance(v, str):
                codes.append(L.T_STRING)
                ids.append(consts.get(v, -1))
            else:
                codes.append(L.T_OTHER)
                ids.append(-1)
        return codes, ids, nums

    def expire(self, now: int) -> None:
        K.expire(self._tints, self._tflts, now)
        self._refresh()
        self._new_keys = []
        self._collect()

    def next_expiry(self) -> int | None:
        t = K.next_expiry(self._tints, self._tflts)
        return None if t != t else (int(t) if t == int(t) else t)  # a fractional DUR bound stays a float

    # ------------------------------------------------------------ state
    def export_instances(self) -> list[tuple]:
        inst = self.ints[L.INST][: int(self.ints[L.META][0, L.M_IUSED])]
        recs, nodes = self._recs, self._row_node
        out = []
        for n, t0, t1, born, seq, first, cur in inst[inst[:, L.I_NODE] >= 0][:, :L.I_CUR + 1].tolist():
            wit, attrs = recs[cur]
            nid = nodes[n].id
            out.append((FLAT_PREFIX + nid[1:], recs[first][1], attrs, t0, t1, wit, born, seq))
        return out

    def load_rows(self, rows: Iterable[tuple]) -> int:
        """Insert exported instance rows ``(node id, first, cur, t0, t1, witness, born, seq)``
        of this engine's nodes (plain node ids); how many were inserted."""
        self._new_keys = []
        keys: list[list[int]] = []
        table: list[list[int]] = []
        datas: list[tuple] = []
        slots = list(self._slot)
        for nid, first, cur, t0, t1, wit, born, seq in rows:
            row = self._node_row.get(nid)
            if row is None:
                continue
            kf = len(keys)
            keys.append([max(self._key(first, s), L.NO_KEY) for s in slots])
            kc = kf
            if cur is not first:
                kc = len(keys)
                keys.append([max(self._key(cur, s), L.NO_KEY) for s in slots])
            table.append([row, kf, kc, t0, t1, born, seq])
            datas.append((first, cur, tuple(wit)))
        if not table:
            return 0
        live = self.instances
        K.reserve(self._tints, self._tflts, len(table), 2 * len(table))
        made = K.load(self._tints, self._tflts, np.asarray(table, dtype=np.int64),
                      np.asarray(keys, dtype=np.int64).reshape(len(keys), len(slots)))
        self._refresh()
        recs = self._recs
        for (fr, cr), (first, cur, wit) in zip(made.tolist(), datas, strict=True):
            recs[fr] = (wit, first)  # a first record's witness is never read
            recs[cr] = (wit, cur)
        self._collect()
        return self.instances - live

    def clear_instances(self) -> None:
        ints = self.ints
        meta = ints[L.META]
        for col in (L.M_IUSED, L.M_IFREE, L.M_RUSED, L.M_RFREE, L.M_BUSED, L.M_BFREE, L.M_HEAP, L.M_LIVE,
                    L.M_HBN, L.M_HAN):
            meta[0, col] = 0
        ints[L.NODE][:, L.N_BKT] = -1
        ints[L.KREF][:] = 0
        ints[L.HB][:] = L.EMPTY
        ints[L.HA][:] = L.EMPTY
        self._key_id.clear()
        self._key_val.clear()
        self._key_free.clear()
        self._new_keys = []
        self._recs = [None] * len(self._recs)
