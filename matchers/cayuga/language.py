"""The text language of stateful subscriptions: parse CEL into the algebra.

Examples
--------
>>> parse("SELECT * FROM FILTER{Name = 'IBM' AND Price > 100}(Stock)")  # doctest: +ELLIPSIS
Select(...)

Scopes of attribute references: a ``FILTER`` predicate and a ``SELECT`` list see bare
attributes of their input (and ``DUR``); a ``NEXT`` predicate sees ``$1.x`` (or ``$.x``)
for the left record and ``$2.x`` for the right one; a ``FOLD`` predicate or aggregate
sees ``$1.x`` (the record that started the iteration), ``$.x`` (the latest one) and
``$2.x``; ``DUR`` in a ``NEXT``/``FOLD`` predicate is the duration of the record they
would produce. ``S WITHIN n`` keeps the records of ``S`` spanning at most ``n`` ticks
(``t1 - t0 <= n``; :func:`.algebra.within`). The duration of ``WITHIN`` or of an ``UNLESS``
window is ticks, or a number with a unit (``10 s``; ``ms``, ``s``, ``min``, ``h``) in ticks of
``tick_ms`` milliseconds, rounded down (the times of events are whole ticks: "within 1.5 s"
at 1 s ticks is within 1 tick). A mistake is a ``SubscriptionError`` naming its position and what was
expected there.
"""

from __future__ import annotations

import re
from fractions import Fraction
from functools import lru_cache
from importlib import resources

import lark

from matchers.errors import SubscriptionError

from . import algebra as A

TICK_MS = 1000
"""Milliseconds per tick where the caller does not say (the service's default
``patterns.time_unit_ms``)."""
UNIT_MS = {"ms": 1, "s": 1000, "min": 60_000, "h": 3_600_000}
"""Milliseconds per time unit of a duration."""

_SCOPE_OF_PREFIX = {"$1": A.FIRST, "$": A.LAST, "$2": A.SECOND}

# Which scopes a context allows, and the name of the context for messages.
_FILTER = ("FILTER or SELECT", frozenset({A.BARE}))
_NEXT = ("NEXT", frozenset({A.FIRST, A.LAST, A.SECOND}))
_UNLESS = ("UNLESS", frozenset({A.FIRST, A.LAST, A.SECOND}))
_FOLD = ("FOLD", frozenset({A.FIRST, A.LAST, A.SECOND}))

_TOKEN_NAMES = {
    "NAME": "a name",
    "NUMBER": "a number",
    "STRING": "a quoted string",
    "SCOPED": "an attribute such as $1.x",
    "LBRACE": "'{'",
    "RBRACE": "'}'",
    "LPAR": "'('",
    "RPAR": "')'",
    "COMMA": "','",
    "STAR": "'*'",
    "TIME_UNIT": "a time unit (ms, s, min, h)",
    "CMP_OP": "a comparison",
    "ADD_OP": "'+' or '-'",
    "MUL_OP": "'*', '/' or '%'",
    "MINUS": "'-'",
    "$END": "the end of the text",
}


@lru_cache(maxsize=1)
def _parser() -> lark.Lark:
    text = resources.files(__package__).joinpath("cel.lark").read_text()
    return lark.Lark(text, parser="lalr", maybe_placeholders=False)


def _expected(names: set[str] | frozenset[str] | None) -> str | None:
    if not names:
        return None
    shown = sorted({_TOKEN_NAMES.get(n, n) for n in names})
    return ", ".join(shown)


def _where(text: str, line: int, column: int) -> str | int:
    return column if "\n" not in text else f"line {line}, column {column}"


def _end(text: str) -> str | int:
    lines = text.split("\n")
    return _where(text, len(lines), len(lines[-1]) + 1)


def parse(text: str, tick_ms: int = TICK_MS) -> A.Expr:
    """Parse one stateful subscription written in CEL.

    Parameters
    ----------
    text : the subscription.
    tick_ms : milliseconds per tick, for durations with a unit (``WITHIN 10 s``).

    Returns
    -------
    The algebra expression.

    Raises
    ------
    SubscriptionError
        With the position of the mistake and what was expected there.
    """
    if not isinstance(text, str) or not text.strip():
        raise SubscriptionError("empty stateful subscription", position=1, expected="SELECT or a stream expression")
    try:
        tree = _parser().parse(text)
    except lark.UnexpectedToken as exc:
        tok = exc.token
        select = _select_before(text, tok)
        if select is not None:
            raise SubscriptionError(
                "a SELECT used as an operand needs parentheses of its own" + _parenthesised(text, select),
                position=_where(text, *_line_col(text, select)),
                expected="(SELECT ... FROM ...)",
            ) from None
        if tok.type == "NAME" and str(tok).lower() == "where":
            raise SubscriptionError(
                "CEL has no WHERE: a condition on a stream's events is FILTER{condition}(stream), "
                "e.g. SELECT * FROM FILTER{price > 100}(Stock)",
                position=_where(text, exc.line, exc.column), expected="FILTER{...}(...) after FROM") from None
        if tok.type == "$END":
            shown, pos = "end of the text", _end(text)
        else:
            shown, pos = repr(str(tok)), _where(text, exc.line, exc.column)
        raise SubscriptionError(f"unexpected {shown}", position=pos, expected=_expected(exc.expected)) from None
    except lark.UnexpectedCharacters as exc:
        raise SubscriptionError(
            f"unexpected character {text[exc.pos_in_stream or 0]!r}",
            position=_where(text, int(exc.line), int(exc.column)),
            expected=_expected(exc.allowed),
        ) from None
    except lark.UnexpectedEOF as exc:
        raise SubscriptionError("unexpected end of the text", position=_end(text), expected=_expected(set(exc.expected))) from None
    return _Converter(text, tick_ms).top(tree)


class _Converter:
    """Walks the parse tree with the scope context each part is in."""

    def __init__(self, text: str, tick_ms: int = TICK_MS):
        self.text = text
        self.tick_ms = tick_ms

    def _fail(self, message: str, node, expected: str | None = None) -> SubscriptionError:
        tok = node if isinstance(node, lark.Token) else _first_token(node)
        pos = _where(self.text, int(tok.line or 1), int(tok.column or 1)) if tok is not None else None
        return SubscriptionError(message, position=pos, expected=expected)

    # ---------------------------------------------------------- stream expressions
    def top(self, node) -> A.Expr:
        """A whole subscription: the expression, its after-match skip, what it publishes."""
        ch = node.children
        if node.data == "top":
            expr = self.stream(ch[0])
            rest = ch[1:]
        else:
            expr = A.Select(self.sel_list(ch[1], _FILTER), self.stream(ch[3]))
            rest = ch[4:]
        if rest and isinstance(rest[0], lark.Tree):
            expr = A.Skip("past_last" if rest[0].data == "skip_past_last" else "to_next", expr)
            rest = rest[1:]
        if rest:
            expr = A.Publish(str(rest[1]), expr)
        return expr

    def stream(self, node) -> A.Expr:
        if isinstance(node, lark.Token):  # a bare stream name reduced by '?'
            return A.Stream(str(node))
        kind = node.data
        ch = node.children
        if kind == "stream":
            return A.Stream(str(ch[0]))
        if kind == "query":
            items = self.sel_list(ch[1], _FILTER)
            return A.Select(items, self.stream(ch[3]))
        if kind == "filter":
            return A.Filter(self.pred(ch[1], _FILTER), self.stream(ch[2]))
        if kind == "union":
            return A.Union(self.stream(ch[0]), self.stream(ch[2]))
        if kind == "within":
            return A.within(self.stream(ch[0]), self.duration(ch[2]))
        if kind == "next":
            return A.Next(self.stream(ch[0]), self.pred(ch[2], _NEXT), self.right(ch[1], ch[3]))
        if kind == "unless":
            if _number(ch[3].children[0]) <= 0:  # with none, nothing could kill a record: it would only be delayed
                raise self._fail("the window of UNLESS must be more than 0", ch[3], "a number > 0")
            return A.Unless(self.stream(ch[0]), self.pred(ch[2], _UNLESS), self.duration(ch[3]), self.right(ch[1], ch[4]))
        if kind == "fold":
            left = self.stream(ch[0])
            pred = self.pred(ch[2], _FOLD)
            cont = self.pred(ch[3], _FOLD)
            if len(ch) == 6:
                aggs = self.sel_list(ch[4], _FOLD, need_names=True)
                right = self.right(ch[1], ch[5])
            else:
                aggs = ()
                right = self.right(ch[1], ch[4])
            return A.Fold(left, pred, cont, aggs, right)
        raise self._fail("expected a stream expression", node, "a stream name, FILTER, SELECT or '('")

    def duration(self, node) -> int | float:
        """Ticks of a ``duration``: its number, or with a unit that many whole ticks of
        ``tick_ms`` (a positive duration shorter than a tick is 0 ticks: no later event fits)."""
        number, *unit = node.children
        if not unit:
            return _number(number)
        return int(Fraction(str(number)) * UNIT_MS[str(unit[0]).lower()] // self.tick_ms)

    def right(self, op, node) -> A.Expr:
        """The right operand of ``NEXT``/``FOLD``/``UNLESS``: one stream inside ``FILTER``/``SELECT``."""
        expr = self.stream(node)
        if not A.is_view(expr):
            raise self._fail(f"the right operand of {str(op).upper()} must be one stream, possibly inside FILTER or "
                             f"SELECT (automata are left-deep); {right_operand_hint(str(op).upper(), expr)}",
                             node, "a stream name on the right")
        return expr

    def sel_list(self, node, ctx, need_names: bool = False) -> tuple[A.SelectItem, ...]:
        items = []
        for item in node.children:
            if item.data == "sel_star":
                if need_names:
                    raise self._fail("'*' is not an aggregate", item, "an expression AS a name")
                items.append(A.SelectItem(None, None))
                continue
            expr_node = item.children[0]
            value = self.value(expr_node, ctx)
            if len(item.children) == 3:
                name = str(item.children[2])
            elif isinstance(value, A.Attr):
                name = value.name
            else:
                raise self._fail("a computed item needs a name", expr_node, "AS <name>")
            items.append(A.SelectItem(value, name))
        return tuple(items)

    # ---------------------------------------------------------- predicates and values
    def pred(self, node, ctx) -> A.Pred:
        if isinstance(node, lark.Tree):
            kind = node.data
            ch = node.children
            if kind == "or_expr":
                return A.Or(tuple(self.pred(c, ctx) for c in ch if not _is_kw(c)))
            if kind == "and_expr":
                return A.And(tuple(self.pred(c, ctx) for c in ch if not _is_kw(c)))
            if kind == "not_":
                return A.Not(self.pred(ch[1], ctx))
            if kind == "cmp_expr":
                op = str(ch[1])
                op = "!=" if op == "<>" else op
                return A.Cmp(op, self.value(ch[0], ctx), self.value(ch[2], ctx))
            if kind == "contains":
                return A.Contains(self.value(ch[1], ctx), self.value(ch[2], ctx))
            if kind == "true":
                return A.Truth(True)
            if kind == "false":
                return A.Truth(False)
        raise self._fail("expected a condition", node, "a comparison, contains(...), TRUE or FALSE")

    def value(self, node, ctx) -> A.Value:
        name, scopes = ctx
        if isinstance(node, lark.Tree):
            kind = node.data
            ch = node.children
            if kind == "number":
                return A.Const(_number(ch[0]))
            if kind == "string":
                return A.Const(str(ch[0])[1:-1].replace("''", "'"))
            if kind == "dur":
                return A.Dur()
            if kind == "neg":
                inner = self.value(ch[0], ctx)
                if isinstance(inner, A.Const) and not isinstance(inner.value, (str, bool)):
                    return A.Const(-inner.value)
                return A.Neg(inner)
            if kind == "bare":
                tok = ch[0]
                if A.BARE not in scopes:
                    raise self._fail(f"attribute {str(tok)!r} needs a scope in {name}", tok, "$1., $. or $2. before it")
                return A.Attr(A.BARE, str(tok))
            if kind == "scoped":
                tok = ch[0]
                prefix, attr = str(tok).split(".", 1)
                scope = _SCOPE_OF_PREFIX[prefix]
                if scope not in scopes:
                    raise self._fail(f"{prefix}.{attr} is not available in {name}", tok, "a bare attribute name")
                if name in ("NEXT", "UNLESS") and scope == A.FIRST:
                    scope = A.LAST  # one left record: $1 and $ are the same
                return A.Attr(scope, attr)
            if kind in ("sum_expr", "prod_expr"):
                out = self.value(ch[0], ctx)
                for i in range(1, len(ch), 2):
                    out = A.Arith(str(ch[i]), out, self.value(ch[i + 1], ctx))
                return out
            if kind in ("true", "false"):
                return A.Const(kind == "true")
            if kind == "call":
                fn = str(ch[0]).lower()
                if fn not in A.FUNCTIONS:
                    raise self._fail(f"unknown function {str(ch[0])!r}", ch[0], "min or max")
                return A.Func(fn, tuple(self.value(c, ctx) for c in ch[1:]))
        raise self._fail("expected a value", node, "a number, a string or an attribute")


def _number(tok) -> int | float:
    s = str(tok)
    return float(s) if any(c in s for c in ".eE") else int(s)


def right_operand_hint(op: str, operand: A.Expr) -> str:
    """What to write instead of ``operand``, a right operand of ``op`` that is not one stream."""
    inner = operand
    while isinstance(inner, (A.Filter, A.Select)):
        inner = inner.src
    if isinstance(inner, A.Union):
        return (f"for events of one stream, one FILTER{{p OR q}}(S) on the right; for two streams, the UNION "
                f"of two whole patterns: (L {op}{{...}} A) UNION (L {op}{{...}} B)")
    if op == "UNLESS":
        return ("UNLESS waits for the absence of one stream's events: put what they must satisfy in its "
                "predicate ($1. the record waiting, $2. the event), or in FILTER{...}(S) on the right")
    if isinstance(inner, (A.Next, A.Fold, A.Unless)):
        inner_op = type(inner).__name__.upper()
        return (f"write the sequence left to right: L {op}{{...}} A {inner_op}{{...}} B "
                "(each operator's $1. or $. then names the record so far, $2. the new event)")
    return "a stream name, FILTER{...}(S) or (SELECT ... FROM S) on the right"


def _parenthesised(text: str, select: int) -> str:
    """``": write ..."`` with ``text`` corrected by the shortest parenthesised ``SELECT`` at
    offset ``select`` that makes it parse, or ``""`` when none does (another mistake follows) or
    the text is too long to try (:data:`_MAX_TRIED_TEXT`: each try parses it whole)."""
    if len(text) > _MAX_TRIED_TEXT:
        return ""
    lexer = _parser()
    try:
        tokens = list(lexer.lex(text[select:]))
    except lark.exceptions.LarkError:
        return ""
    froms = [i for i, t in enumerate(tokens) if t.type == "FROM"]
    if not froms:
        return ""
    for tok in tokens[froms[0] + 1:][:_MAX_TRIES]:
        end = select + int(tok.end_pos or 0)
        fixed = f"{text[:select]}({text[select:end]}){text[end:]}"
        try:
            lexer.parse(fixed)
        except lark.exceptions.LarkError:
            continue
        return f": write {fixed.strip()!r}" if len(fixed) <= _MAX_SHOWN else \
            f": write '({text[select:end].strip()})' at {_where(text, *_line_col(text, select))}"
    return ""


_MAX_TRIED_TEXT = 4096
"""Longest text whose ``SELECT`` operand error suggests a correction."""
_MAX_TRIES = 64
"""Ends tried for the parentheses of a ``SELECT`` operand (the message's suggestion)."""
_MAX_SHOWN = 160
"""Longest corrected text a message shows whole (else only the parenthesised operand)."""


def _select_before(text: str, tok) -> int | None:
    """Offset of a ``SELECT`` read as a name just before ``tok`` (a ``SELECT`` where only
    a stream fits: an operand that needs its own parentheses), else ``None``."""
    end = len(text) if tok.type == "$END" else tok.start_pos
    m = _SELECT_AT_END.search(text, 0, end)
    return None if m is None else m.start(1)


_SELECT_AT_END = re.compile(r"(?i)\b(select)\s*\Z")


def _line_col(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def _is_kw(node) -> bool:
    return isinstance(node, lark.Token) and node.type in ("AND", "OR", "NOT")


def _first_token(node):
    if isinstance(node, lark.Token):
        return node
    for c in node.children:
        t = _first_token(c)
        if t is not None:
            return t
    return None
