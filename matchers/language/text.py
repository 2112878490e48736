"""The text form of a subscription: a SQL ``WHERE``-like expression.

Examples
--------
>>> parse_text("symbol = 'IBM' AND price < 100")  # doctest: +ELLIPSIS
And(children=(Pred(attr='symbol', op=<Op.EQ: 0>, ...), Pred(attr='price', op=<Op.LT: 2>, ...)))

The grammar is ``grammar.lark`` (LALR, so parsing is linear in the length of the
text).  Predicates are built only by :func:`matchers.expr.pred`, which checks types;
its errors come back with the position of the offending predicate.  Every mistake is a
:class:`~matchers.errors.SubscriptionError` whose ``position`` is ``"line:column"``
(1-based) and whose ``expected`` says what would have been valid there.
"""

from __future__ import annotations

import math
from functools import lru_cache
from importlib import resources
from typing import NamedTuple

import lark
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from matchers.errors import SubscriptionError
from matchers.expr import (
    And,
    Expr,
    Not,
    Op,
    Or,
    Pred,
    Scalar,
    anything_but,
    like_ignore_case,
    pred,
)
from matchers.operands import wildcard_to_like

from .limits import MAX_DEPTH

__all__ = ["parse_text"]

_COMPARISONS: dict[str, Op] = {
    "=": Op.EQ, "==": Op.EQ, "!=": Op.NE, "<>": Op.NE,
    "<": Op.LT, "<=": Op.LE, ">": Op.GT, ">=": Op.GE,
}
_FLIPPED: dict[Op, Op] = {Op.EQ: Op.EQ, Op.NE: Op.NE, Op.LT: Op.GT, Op.GT: Op.LT, Op.LE: Op.GE, Op.GE: Op.LE}
_NEGATED_KEYWORD: dict[str, tuple[Op, Op]] = {
    "IN": (Op.IN, Op.NOT_IN),
    "BETWEEN": (Op.BETWEEN, Op.NOT_BETWEEN),
    "LIKE": (Op.LIKE, Op.NOT_LIKE),
    "MATCHES": (Op.MATCHES, Op.NOT_MATCHES),
    "IN_CIDR": (Op.CIDR, Op.NOT_CIDR),
    "WILDCARD": (Op.LIKE, Op.NOT_LIKE),
}
_ICASE: dict[Op, Op] = {Op.EQ: Op.EQ_ICASE, Op.NE: Op.NE_ICASE, Op.IN: Op.IN_ICASE, Op.NOT_IN: Op.NOT_IN_ICASE}
_SIMPLE_ESCAPES = {"'": "'", "\\": "\\", "n": "\n", "t": "\t", "r": "\r"}
_ESCAPES_TEXT = "one of \\', \\\\, \\n, \\t, \\r, \\uXXXX, \\UXXXXXXXX"

_OPERATORS_TEXT = "an operator (=, !=, <, <=, >, >=, IN, BETWEEN, LIKE, MATCHES, IN CIDR, WILDCARD, IS)"
_KEYWORD_TERMINALS = {"_AND": "AND", "_OR": "OR", "NOT": "NOT", "IN": "IN", "BETWEEN": "BETWEEN",
                      "LIKE": "LIKE", "MATCHES": "MATCHES", "TRUE": "TRUE", "FALSE": "FALSE",
                      "EXISTS": "EXISTS", "IS": "IS", "NULL": "NULL", "WILDCARD": "WILDCARD",
                      "IGNORE_CASE": "IGNORE CASE", "IN_CIDR": "IN CIDR", "ANYTHING_BUT": "ANYTHING BUT"}
_VALUE_TERMINALS = frozenset({"NUMBER", "STRING", "TRUE", "FALSE"})
_NAME_TERMINALS = frozenset({"NAME", "QNAME"})
_STRING_OP_TERMINALS = frozenset({"IN", "BETWEEN", "LIKE", "MATCHES", "IN_CIDR", "WILDCARD"})


# -- positions -------------------------------------------------------------------------------

def _position(text: str, offset: int) -> str:
    """``"line:column"`` (1-based, in characters) of ``offset`` in ``text``."""
    line = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return f"{line}:{column}"


class _Fail(Exception):
    """Raised inside the parser's callbacks: a message, an offset, what was expected."""

    def __init__(self, message: str, offset: int, expected: str | None = None):
        super().__init__(message)
        self.message = message
        self.offset = offset
        self.expected = expected


# -- tree building (runs inside the LALR parser) -------------------------------------------

class _Attr(NamedTuple):
    name: str
    offset: int
    quoted: bool


class _Value(NamedTuple):
    value: Scalar
    offset: int
    text: str


class _Node(NamedTuple):
    expr: Expr
    depth: int
    offset: int


def _unescape(token: str, offset: int) -> str:
    """Body of a single-quoted string token with its escapes resolved.

    ``offset`` is the token's offset in the source text (for error positions).
    """
    body = token[1:-1]
    out: list[str] = []
    i = 0
    n = len(body)
    while i < n:
        c = body[i]
        if c == "'":  # the lexer only lets a quote through doubled
            out.append("'")
            i += 2
            continue
        if c != "\\":
            j = i
            while j < n and body[j] not in "\\'":
                j += 1
            out.append(body[i:j])
            i = j
            continue
        at = offset + 1 + i
        e = body[i + 1]
        if e in _SIMPLE_ESCAPES:
            out.append(_SIMPLE_ESCAPES[e])
            i += 2
            continue
        if e in "uU":
            width = 4 if e == "u" else 8
            digits = body[i + 2:i + 2 + width]
            if len(digits) != width or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise _Fail(f"\\{e} must be followed by {width} hexadecimal digits", at,
                            f"{width} hexadecimal digits after \\{e}")
            code = int(digits, 16)
            i += 2 + width
            if 0xD800 <= code <= 0xDBFF and body[i:i + 2] == "\\u":
                low_digits = body[i + 2:i + 6]
                if len(low_digits) == 4 and all(d in "0123456789abcdefABCDEF" for d in low_digits):
                    low = int(low_digits, 16)
                    if 0xDC00 <= low <= 0xDFFF:
                        code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                        i += 6
            if 0xD800 <= code <= 0xDFFF:
                raise _Fail(f"\\{e}{digits} is half of a UTF-16 surrogate pair, not a character", at,
                            "a high surrogate \\uD800-\\uDBFF followed by a low one \\uDC00-\\uDFFF, "
                            "or the character itself as \\UXXXXXXXX")
            if code > 0x10FFFF:
                raise _Fail(f"\\{e}{digits} is beyond the last Unicode code point (10FFFF)", at,
                            "a code point at most \\U0010FFFF")
            out.append(chr(code))
            continue
        shown = repr(e)[1:-1] if not e.isprintable() else e
        raise _Fail(f"unknown escape \\{shown} in a string; write \\\\ for a backslash "
                    f"(LIKE 'a\\\\%' matches a literal %, MATCHES '\\\\d' a digit)", at, _ESCAPES_TEXT)
    return "".join(out)


class _Builder(lark.Transformer):
    """Turns the parse into a :mod:`matchers.expr` tree (called by the LALR parser as it reduces)."""

    def attr(self, children: list[lark.Token]) -> _Attr:
        (tok,) = children
        if tok.type == "QNAME":
            name = tok.value[1:-1].replace("``", "`")
            if not name:
                raise _Fail("an attribute name cannot be empty", _start(tok), "a name between the back-quotes")
            return _Attr(name, _start(tok), True)
        return _Attr(tok.value, _start(tok), False)

    def value(self, children: list[lark.Token]) -> _Value:
        (tok,) = children
        kind = tok.type
        if kind == "NUMBER":
            number = float(tok.value)
            if not math.isfinite(number):
                raise _Fail(f"the number {tok.value} is too large for a 64-bit float", _start(tok),
                            "a number between -1.7976931348623157e308 and 1.7976931348623157e308")
            return _Value(number, _start(tok), tok.value)
        if kind == "STRING":
            return _Value(_unescape(tok.value, _start(tok)), _start(tok), tok.value)
        return _Value(kind == "TRUE", _start(tok), tok.value)

    def value_list(self, children: list[_Value]) -> list[_Value]:
        return children

    def compare(self, children: list) -> _Node:
        left, op_tok, right = children[:3]
        op = _COMPARISONS[op_tok.value]
        if isinstance(left, _Attr) and isinstance(right, _Attr):
            hint = f"; to compare with the text {right.name}, quote it: '{right.name}'" if not right.quoted else ""
            raise _Fail(f"{op_tok.value} compares two attributes, {_show(left)} and {_show(right)}: "
                        f"the right side must be a value{hint}", right.offset, "a value")
        if isinstance(left, _Value) and isinstance(right, _Value):
            raise _Fail(f"{op_tok.value} compares two values, {left.text} and {right.text}: "
                        "one side must be an attribute", left.offset, "an attribute")
        start = left.offset
        if isinstance(left, _Value):
            left, right, op = right, left, _FLIPPED[op]
        if len(children) == 4:
            if op not in _ICASE:
                raise _Fail(f"IGNORE CASE applies to = and !=, not {op_tok.value}", _start(children[3]),
                            "= or != before IGNORE CASE")
            op = _ICASE[op]
        return _predicate(left.name, op, right.value, start)

    def in_list(self, children: list) -> _Node:
        ignore_case = children[-1].type == "IGNORE_CASE" if isinstance(children[-1], lark.Token) else False
        values = children[-2] if ignore_case else children[-1]
        attr = children[0]
        op = Op.NOT_IN if isinstance(children[1], lark.Token) and children[1].type == "NOT" else Op.IN
        return _predicate(attr.name, _ICASE[op] if ignore_case else op, [v.value for v in values], attr.offset)

    def between(self, children: list) -> _Node:
        attr, low, high = children[0], children[-2], children[-1]
        op = Op.NOT_BETWEEN if len(children) == 5 else Op.BETWEEN
        return _predicate(attr.name, op, (low.value, high.value), attr.offset)

    def string_op(self, children: list) -> _Node:
        attr, keyword, operand = children[0], children[-2], children[-1]
        positive, negative = _NEGATED_KEYWORD[keyword.type]
        value = operand.value
        if keyword.type == "WILDCARD" and isinstance(value, str):
            try:
                value = wildcard_to_like(value)
            except SubscriptionError as exc:
                raise _Fail(exc.reason, operand.offset, "a pattern where \\ escapes only * or \\") from None
        return _predicate(attr.name, negative if len(children) == 4 else positive, value, attr.offset)

    def like_icase(self, children: list) -> _Node:
        attr, operand = children[0], children[-2]
        if not isinstance(operand.value, str):
            raise _Fail(f"LIKE needs a string pattern, not {operand.text}", operand.offset, "a string")
        try:
            made = like_ignore_case(attr.name, operand.value, negated=len(children) == 5)
        except SubscriptionError as exc:
            raise _Fail(exc.reason, operand.offset, exc.expected) from None
        return _Node(made, 1, attr.offset)

    def anything_but(self, children: list) -> _Node:
        tok, inner = children
        try:
            made = anything_but(inner.expr)
        except SubscriptionError as exc:
            raise _Fail(exc.reason, inner.offset, exc.expected) from None
        return _Node(made, 1, _start(tok))

    def exists(self, children: list) -> _Node:
        _, attr = children
        return _predicate(attr.name, Op.EXISTS, None, attr.offset)

    def is_null(self, children: list) -> _Node:
        attr = children[0]
        return _predicate(attr.name, Op.IS_NOT_NULL if len(children) == 4 else Op.IS_NULL, None, attr.offset)

    def negation(self, children: list) -> _Node:
        tok, child = children
        if isinstance(child.expr, Pred) and child.expr.op is Op.EXISTS:  # NOT EXISTS x: one predicate
            return _Node(child.expr.negate(), 1, _start(tok))
        return _combine(Not(child.expr), child.depth + 1, _start(tok))

    def and_expr(self, children: list[_Node]) -> _Node:
        return _combine(And(tuple(c.expr for c in children)), 1 + max(c.depth for c in children),
                        children[0].offset)

    def or_expr(self, children: list[_Node]) -> _Node:
        return _combine(Or(tuple(c.expr for c in children)), 1 + max(c.depth for c in children),
                        children[0].offset)


def _start(tok: lark.Token) -> int:
    return tok.start_pos or 0


def _show(attr: _Attr) -> str:
    return "`" + attr.name.replace("`", "``") + "`" if attr.quoted else attr.name


def _predicate(attr: str, op: Op, operand: object, offset: int) -> _Node:
    try:
        return _Node(pred(attr, op, operand), 1, offset)
    except SubscriptionError as exc:
        raise _Fail(exc.reason, offset, exc.expected) from None


def _combine(expr: Expr, depth: int, offset: int) -> _Node:
    if depth > MAX_DEPTH:
        raise _Fail(f"the expression nests AND, OR and NOT more than {MAX_DEPTH} levels deep", offset,
                    "a flatter expression")
    return _Node(expr, depth, offset)


# -- parsers -----------------------------------------------------------------------------------

def _grammar() -> str:
    return resources.files(__package__).joinpath("grammar.lark").read_text(encoding="utf-8")


@lru_cache(maxsize=1)
def _parser() -> lark.Lark:
    """The parser that builds expressions while it parses."""
    return lark.Lark(_grammar(), parser="lalr", lexer="basic", transformer=_Builder())


@lru_cache(maxsize=1)
def _plain_parser() -> lark.Lark:
    """A tree-building twin, used only after an error to learn what was valid at its place."""
    return lark.Lark(_grammar(), parser="lalr", lexer="basic")


def parse_text(text: str, sub_id: str | None = None) -> Expr:
    """Parse the text form of a subscription into an expression tree.

    Parameters
    ----------
    text : the expression, e.g. ``"symbol = 'IBM' AND price < 100"``.
    sub_id : the subscription's id, named in errors.

    Returns
    -------
    A :class:`~matchers.expr.Pred`, :class:`~matchers.expr.And`, :class:`~matchers.expr.Or`
    or :class:`~matchers.expr.Not` tree; ``a AND b AND c`` is one ``And`` of three children,
    parentheses group without adding a node.

    Raises
    ------
    SubscriptionError
        With ``position`` ``"line:column"`` and ``expected`` describing what was valid there.
    """
    if not isinstance(text, str):
        raise SubscriptionError(f"the expression must be a string, not {type(text).__name__}", sub_id,
                                expected="a text such as \"price < 100\"")
    if not text.strip():
        raise SubscriptionError("the expression is empty", sub_id, "1:1",
                                "a predicate (such as price < 100)")
    try:
        node = _parser().parse(text)
    except _Fail as fail:
        raise SubscriptionError(fail.message, sub_id, _position(text, fail.offset), fail.expected) from None
    except UnexpectedInput as exc:
        raise _syntax_error(text, exc, sub_id) from None
    if isinstance(node, _Node):
        return node.expr
    raise AssertionError(f"parser returned {node!r}")  # a bare value or attribute cannot parse


# -- syntax errors -----------------------------------------------------------------------------

def _syntax_error(text: str, exc: UnexpectedInput, sub_id: str | None) -> SubscriptionError:
    if isinstance(exc, UnexpectedCharacters):
        offset = int(exc.pos_in_stream or 0)
        char = text[offset]
        expected = _describe(_accepts_before(text, offset))
        if char == "'":
            return SubscriptionError("unterminated string: this quote is never closed", sub_id,
                                     _position(text, offset), "a closing quote (') ending the string")
        if char == "`":
            return SubscriptionError("unterminated attribute name: this back-quote is never closed", sub_id,
                                     _position(text, offset), "a closing back-quote (`) ending the name")
        if char == '"':
            return SubscriptionError("strings are single-quoted: write 'text', not \"text\"", sub_id,
                                     _position(text, offset), expected)
        shown = repr(char) if char.isprintable() and not char.isspace() else f"{char!r} (U+{ord(char):04X})"
        return SubscriptionError(f"unexpected character {shown}", sub_id, _position(text, offset), expected)
    if isinstance(exc, UnexpectedToken):
        token = exc.token
        # The parser may have reduced before failing; ask a fresh one what was valid before the token.
        before = len(text) if token.type == "$END" else _start(token)
        accepts = _accepts_before(text, before) or set(exc.accepts or exc.expected)
        if token.type == "$END":
            end = len(text.rstrip())
            return SubscriptionError("the expression ends too early", sub_id, _position(text, end),
                                     _describe(accepts))
        message = f"unexpected {_describe_token(token)}"
        if token.type == "NULL" and "IS" not in accepts:
            message += "; null is not compared with =: test it with IS NULL or IS NOT NULL"
        elif token.type in _KEYWORD_TERMINALS and accepts & _NAME_TERMINALS:
            word = token.value
            message += f"; {word} is a keyword: to use it as an attribute name, back-quote it: `{word}`"
        return SubscriptionError(message, sub_id, _position(text, token.start_pos), _describe(accepts))
    return SubscriptionError(f"cannot parse the expression: {exc}", sub_id)


def _accepts_before(text: str, offset: int) -> set[str]:
    """Terminals the parser would accept after ``text[:offset]`` (which lexes and parses)."""
    try:
        interactive = _plain_parser().parse_interactive(text[:offset])
        interactive.exhaust_lexer()
        return set(interactive.accepts())
    except UnexpectedInput:
        return set()


def _describe_token(token: lark.Token) -> str:
    kind, value = token.type, token.value
    if kind in ("NAME", "QNAME"):
        return f"attribute name {value}"
    if kind == "NUMBER":
        return f"number {value}"
    if kind == "STRING":
        return f"string {value if len(value) <= 40 else value[:37] + '...'}"
    if kind in _KEYWORD_TERMINALS:
        return _KEYWORD_TERMINALS[kind]
    return f"'{value}'"


def _describe(accepts: set[str]) -> str | None:
    """Words for a set of terminal names, e.g. ``"AND, OR or the end of the expression"``."""
    rest = set(accepts) - {"IGNORE_CASE"}  # an optional suffix, never what is missing
    items: list[str] = []
    if rest & _VALUE_TERMINALS:
        # where a predicate may start, or on the right of a comparison (an attribute there is an error)
        starts = rest & {"NOT", "_LPAR"}
        items.append("a predicate (such as price < 100)" if starts else "a value")
        rest -= _NAME_TERMINALS | _VALUE_TERMINALS | {"EXISTS", "ANYTHING_BUT"}
    if "CMP_OP" in rest and rest & _STRING_OP_TERMINALS:
        items.append(_OPERATORS_TEXT)
        rest -= {"CMP_OP", "NOT", "IS"} | _STRING_OP_TERMINALS
    elif "CMP_OP" in rest:
        items.append("a comparison operator (=, !=, <, <=, >, >=)")
        rest.discard("CMP_OP")
    elif rest >= _STRING_OP_TERMINALS:
        items.append("IN, BETWEEN, LIKE, MATCHES, IN CIDR or WILDCARD")
        rest -= _STRING_OP_TERMINALS
    if rest & _NAME_TERMINALS:
        items.append("an attribute")
        rest -= _NAME_TERMINALS
    words = {"NOT": "NOT", "_LPAR": "'('", "_AND": "AND", "_OR": "OR", "_COMMA": "','", "_RPAR": "')'",
             "$END": "the end of the expression"}
    for name, word in words.items():
        if name in rest:
            items.append(word)
            rest.discard(name)
    items.extend(sorted(_KEYWORD_TERMINALS.get(r, r) for r in rest))
    if not items:
        return None
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " or " + items[-1]
