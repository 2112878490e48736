"""Hypothesis strategies for the language tests: predicates of every operator, trees, events.

Two flavours: ``wide_*`` for round trips (any attribute name, any string, any finite
float, every operator), ``small_*`` for differential checks (few attributes and values,
so that predicates often hold, fail, hit missing attributes and meet other types).
"""

from __future__ import annotations

from hypothesis import strategies as st

from matchers.errors import SubscriptionError
from matchers.expr import BUT_OPS, Op, Pred, anything_but, pred
from matchers.language import RESERVED_WORDS
from tests.strategies import trees

NUMERIC_OPS = (Op.EQ, Op.NE, Op.LT, Op.LE, Op.GT, Op.GE, Op.IN, Op.NOT_IN, Op.BETWEEN, Op.NOT_BETWEEN)
BOOL_OPS = (Op.EQ, Op.NE, Op.IN, Op.NOT_IN)
STRING_OPS = NUMERIC_OPS + (
    Op.PREFIX, Op.NOT_PREFIX, Op.SUFFIX, Op.NOT_SUFFIX, Op.CONTAINS, Op.NOT_CONTAINS,
    Op.LIKE, Op.NOT_LIKE, Op.MATCHES, Op.NOT_MATCHES,
    Op.EQ_ICASE, Op.NE_ICASE, Op.IN_ICASE, Op.NOT_IN_ICASE,
    Op.PREFIX_ICASE, Op.NOT_PREFIX_ICASE, Op.SUFFIX_ICASE, Op.NOT_SUFFIX_ICASE,
)
BUT_STRING_OPS = tuple(sorted(BUT_OPS))
"""The operators an ``ANYTHING BUT`` of a string predicate negates (of numbers: ``=``, ``IN``)."""
REGEXES = ("^a", "b$", "[xy]", "^$", "a.?b", "(?i)AB", "\\d+", "it's", "^\\\\$", "a|b", "\\.", "é+", "\n")


def _build(attr: str, op: Op, values, pattern) -> Pred | None:
    """A predicate, or ``None`` when the drawn operand is invalid for ``op`` (e.g. inverted BETWEEN)."""
    try:
        if op in (Op.IN, Op.NOT_IN, Op.IN_ICASE, Op.NOT_IN_ICASE):
            return pred(attr, op, values)
        if op in (Op.BETWEEN, Op.NOT_BETWEEN):
            return pred(attr, op, sorted(values[:2]))
        if op in (Op.LIKE, Op.NOT_LIKE, Op.MATCHES, Op.NOT_MATCHES):
            return pred(attr, op, pattern)
        if op in (Op.PREFIX, Op.NOT_PREFIX, Op.SUFFIX, Op.NOT_SUFFIX) and values[0] == "":
            return None  # pred() keeps PREFIX '' apart from CONTAINS '' (see test_text.py)
        return pred(attr, op, values[0])
    except SubscriptionError:
        return None


@st.composite
def _preds(draw, names, numbers, strings, likes) -> Pred:
    attr = draw(names)
    kind = draw(st.sampled_from(("num", "str", "bool")))
    negated = kind != "bool" and draw(st.integers(0, 5)) == 0  # an ANYTHING BUT
    if kind == "num" and negated:
        op = draw(st.sampled_from((Op.EQ, Op.IN)))
        values = draw(st.lists(numbers, min_size=2, max_size=4))
        pattern = ""
    elif negated:
        op = draw(st.sampled_from(BUT_STRING_OPS))
        values = draw(st.lists(strings, min_size=2, max_size=4))
        pattern = draw(likes)
    elif kind == "num":
        op = draw(st.sampled_from(NUMERIC_OPS))
        values = draw(st.lists(numbers, min_size=2, max_size=4))
        pattern = ""
    elif kind == "bool":
        op = draw(st.sampled_from(BOOL_OPS))
        values = draw(st.lists(st.booleans(), min_size=2, max_size=3))
        pattern = ""
    else:
        op = draw(st.sampled_from(STRING_OPS))
        values = draw(st.lists(strings, min_size=2, max_size=4))
        pattern = draw(st.sampled_from(REGEXES) if op in (Op.MATCHES, Op.NOT_MATCHES) else likes)
    made = _build(attr, op, values, pattern)
    if made is None:
        made = pred(attr, Op.EQ, values[0])
    return anything_but(made) if negated else made


# -- wide: for round trips --------------------------------------------------------------------
PLAIN_NAMES = ("price", "symbol", "user.country", "a_1", "_x", "A.b.C", "not.x", "x.in", "orders", "andy")
wide_names = st.one_of(
    st.sampled_from(PLAIN_NAMES),
    st.text(st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=8).filter(
        lambda s: s.lower() not in RESERVED_WORDS),
)
"""Attribute names (not a bare reserved word: ``to_text`` does not back-quote those, see test_text;
no NUL: see test_attribute_names_hold_no_nul)."""
wide_numbers = st.one_of(
    st.integers(-10**6, 10**6),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from((0.5, -1.5e-3, 1e15, 1e16, 123456789012345678, 5e-324, 1.7976931348623157e308)),
)
wide_strings = st.text(max_size=8) | st.text(alphabet="ab'\\%_\n\t`\"", max_size=6)
wide_likes = st.text(alphabet="ab%_\\'", min_size=1, max_size=6)
wide_preds = _preds(wide_names, wide_numbers, wide_strings, wide_likes)
wide_exprs = trees(wide_preds, 8)

# -- small: for differential checks --------------------------------------------------------------
SMALL_ATTRS = ("a", "b", "s", "t.u", "f")
small_numbers = st.sampled_from((0, 1, 2, 2.5, 3, -1))
small_strings = st.sampled_from(("", "a", "ab", "abc", "b", "ba", "%", "a_c", "a%c", "AB", "ß", "SS"))
small_likes = st.sampled_from(("ab%", "%b", "%b%", "a_c", "a%c", "%", "_", "abc", "a\\%%", "%\\_", "a%b%c"))
small_preds = _preds(st.sampled_from(SMALL_ATTRS), small_numbers, small_strings, small_likes)
small_exprs = trees(small_preds, 10)
small_events = st.fixed_dictionaries({}, optional={
    attr: st.one_of(small_numbers.map(float), small_strings, st.booleans(),
                    st.sampled_from(("abcab", "xab", "a\nb", "ac", "aXc", "a%bc", "Abc", "ss", "aSS")), st.none())
    for attr in SMALL_ATTRS
})
"""Flat events; each attribute may be missing or of any type."""
