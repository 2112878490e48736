"""Errors of the text form: each kind, with its position ("line:column") and what was expected."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from matchers.errors import SubscriptionError
from matchers.expr import And, Not, Or, Pred
from matchers.language import MAX_DEPTH, parse_text
from tests.unit.language.errors import check_error

OPERATORS = "an operator (=, !=, <, <=, >, >=, IN, BETWEEN, LIKE, MATCHES, IN CIDR, WILDCARD, IS)"
AFTER_PREDICATE = "AND, OR or the end of the expression"
PREDICATE = "a predicate (such as price < 100), NOT or '('"


def error_of(text: str, sub_id: str | None = None) -> SubscriptionError:
    with pytest.raises(SubscriptionError) as info:
        parse_text(text, sub_id)
    return info.value


@pytest.mark.parametrize("text,position,message,expected", [
    # empty input, early end, trailing garbage
    ("", "1:1", "the expression is empty", "a predicate (such as price < 100)"),
    ("  \n\t ", "1:1", "the expression is empty", "a predicate (such as price < 100)"),
    ("price", "1:6", "ends too early", OPERATORS),
    ("price <", "1:8", "ends too early", "a value"),
    ("price < 100 AND", "1:16", "ends too early", PREDICATE),
    ("price < 100 AND  \n ", "1:16", "ends too early", PREDICATE),
    ("NOT", "1:4", "ends too early", PREDICATE),
    ("(price < 100", "1:13", "ends too early", "AND, OR or ')'"),
    ("x BETWEEN 1", "1:12", "ends too early", "AND"),
    ("x BETWEEN 1 AND", "1:16", "ends too early", "a value"),
    ("x IN (1,", "1:9", "ends too early", "a value"),
    ("price < 100 volume", "1:13", "unexpected attribute name volume", AFTER_PREDICATE),
    ("price < 100 200", "1:13", "unexpected number 200", AFTER_PREDICATE),
    ("price < 100)", "1:12", "unexpected ')'", AFTER_PREDICATE),
    ("price < 100 'x'", "1:13", "unexpected string 'x'", AFTER_PREDICATE),
    ("(a = 1) (b = 2)", "1:9", "unexpected '('", AFTER_PREDICATE),
    # missing pieces in the middle
    ("price 100", "1:7", "unexpected number 100", OPERATORS),
    ("x NOT 5", "1:7", "unexpected number 5", "IN, BETWEEN, LIKE, MATCHES, IN CIDR or WILDCARD"),
    ("x IN 1", "1:6", "unexpected number 1", "'('"),
    ("x IN (1 2)", "1:9", "unexpected number 2", "',' or ')'"),
    ("x IN (1, y)", "1:10", "unexpected attribute name y", "a value"),
    ("x BETWEEN 1 OR 2", "1:13", "unexpected OR", "AND"),
    ("x BETWEEN y AND 2", "1:11", "unexpected attribute name y", "a value"),
    ("x LIKE y", "1:8", "unexpected attribute name y", "a value"),
    ("1 IN (1)", "1:3", "unexpected IN", "a comparison operator (=, !=, <, <=, >, >=)"),
    ("AND x = 1", "1:1", "unexpected AND", PREDICATE),
    ("and = 1", "1:1", "back-quote it: `and`", PREDICATE),
    ("x = 1 AND in = 2", "1:11", "back-quote it: `in`", PREDICATE),
    ("()", "1:2", "unexpected ')'", PREDICATE),
    ("x = = 1", "1:5", "unexpected '='", "a value"),
    # characters the lexer cannot read
    ("symbol = 'IBM", "1:10", "unterminated string", "a closing quote (') ending the string"),
    ("symbol = 'IBM\\'", "1:10", "unterminated string", "a closing quote (') ending the string"),
    ("`weird = 1", "1:1", "unterminated attribute name", "a closing back-quote (`) ending the name"),
    ("price < 100 # comment", "1:13", "unexpected character '#'", AFTER_PREDICATE),
    ("price ~ 1", "1:7", "unexpected character '~'", OPERATORS),
    ("price ! 1", "1:7", "unexpected character '!'", OPERATORS),
    ("price = ;", "1:9", "unexpected character ';'", "a value"),
    ("price\u00a0= 1", "1:6", "U+00A0", OPERATORS),
    ('symbol = "IBM"', "1:10", "strings are single-quoted", "a value"),
    # escapes inside strings: the position is the backslash
    ("x = 'a\\qb'", "1:7", "unknown escape \\q", "one of \\', \\\\, \\n"),
    ("x = 'a\\%'", "1:7", "unknown escape \\%", "one of \\', \\\\, \\n"),
    ("x = '\\u12'", "1:6", "\\u must be followed by 4 hexadecimal digits", "4 hexadecimal digits after \\u"),
    ("x = '\\U1234'", "1:6", "\\U must be followed by 8", "8 hexadecimal digits after \\U"),
    ("x = '\\ud800'", "1:6", "half of a UTF-16 surrogate pair", "a high surrogate"),
    ("x = 'ok\\udc00'", "1:8", "half of a UTF-16 surrogate pair", "a high surrogate"),
    ("x = '\\U00110000'", "1:6", "beyond the last Unicode code point", "a code point at most \\U0010FFFF"),
    # names and literals
    ("`` = 1", "1:1", "attribute name cannot be empty", "a name between the back-quotes"),
    ("x = 1e400", "1:5", "too large for a 64-bit float", "a number between"),
    ("x = -1e400", "1:5", "too large for a 64-bit float", "a number between"),
    ("a = b", "1:5", "compares two attributes, a and b", "a value"),
    ("a < `b c`", "1:5", "compares two attributes, a and `b c`", "a value"),
    ("1 = 2", "1:1", "compares two values, 1 and 2", "an attribute"),
    ("'a' < 'b'", "1:1", "compares two values", "an attribute"),
    # type errors from pred(): the position is the start of the predicate
    ("x IN ()", "1:1", "the list is empty", None),
    ("ok = 1 AND x NOT IN ()", "1:12", "the list is empty", None),
    ("x BETWEEN 5 AND 1", "1:1", "inverted", None),
    ("x BETWEEN 1 AND 'z'", "1:1", "different types", None),
    ("x BETWEEN false AND true", "1:1", "cannot order booleans", None),
    ("x IN (1, 'a')", "1:1", "mixes types", None),
    ("x < 'a' AND y < true", "1:13", "cannot order booleans", None),
    ("true >= y", "1:1", "cannot order booleans", None),
    ("s LIKE 5", "1:1", "LIKE needs a string operand", None),
    ("s NOT MATCHES true", "1:1", "NOT MATCHES needs a string operand", None),
    ("a = 1 OR\n  s MATCHES '(unclosed'", "2:3", "invalid regular expression", None),
    ("s MATCHES '(a)\\\\1'", "1:1", "invalid regular expression", None),
    ("s MATCHES 'a++'", "1:1", "invalid regular expression", None),
    # positions on later lines
    ("a = 1 AND\n  b ~ 2", "2:5", "unexpected character '~'", OPERATORS),
    ("a = 1\nAND\n\n  b = 'x\\z'", "4:9", "unknown escape", "one of"),
])
def test_error(text, position, message, expected):
    check_error(error_of(text, "sub-7"), "sub-7", position, message, expected)


def test_nesting_is_bounded():
    assert isinstance(parse_text("NOT " * (MAX_DEPTH - 1) + "a = 1"), Not)
    err = error_of("NOT " * 5000 + "a = 1")
    assert "more than 100 levels" in err.reason and err.expected == "a flatter expression"
    deep = "a = 1"
    for i in range(MAX_DEPTH + 5):
        deep = f"(b = {i} {'AND' if i % 2 else 'OR'} {deep})"
    assert "levels deep" in error_of(deep).reason


def test_the_expression_must_be_text() -> None:
    err = error_of(b"price < 100", "s")  # type: ignore[arg-type]  # the wrong type on purpose
    assert "must be a string" in err.reason and err.sub_id == "s"


def test_error_without_id_names_no_subscription():
    assert str(error_of("price <")) == "at 1:8: the expression ends too early (expected a value)"


TOKENS = ["a", "b.c", "`x y`", "=", "!=", "<", ">=", "<>", "IN", "NOT", "BETWEEN", "LIKE", "MATCHES", "AND", "OR",
          "(", ")", ",", "1", "-2.5e3", "'s'", "'%a_'", "'('", "true", "false", "'\\u00e9'", "'", "`", "#", "1e999",
          "'\\q'", "\n", "''"]


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(TOKENS), max_size=12).map(" ".join))
def test_token_soup_parses_or_fails_cleanly(text):
    """Whatever the input, the parser returns a tree or raises SubscriptionError with a position."""
    try:
        tree = parse_text(text)
    except SubscriptionError as err:
        assert err.position is not None and err.reason
        line, column = map(int, str(err.position).split(":"))
        assert 1 <= line <= text.count("\n") + 1 and column >= 1
    else:
        assert isinstance(tree, (Pred, And, Or, Not))


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=30))
def test_any_text_parses_or_fails_cleanly(text):
    try:
        parse_text(text)
    except SubscriptionError as err:
        assert err.position is not None
