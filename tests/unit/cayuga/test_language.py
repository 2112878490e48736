"""The CEL parser: the issue's example, scopes, and errors with positions."""

from __future__ import annotations

import pytest

from matchers.cayuga import algebra as A
from matchers.cayuga.compiler import chains
from matchers.cayuga.language import parse
from matchers.errors import SubscriptionError

from .streams import TABLE1


def test_issue_example():
    text = (
        "SELECT * FROM FILTER{cnt > 10}((SELECT *, 1 AS cnt FROM FILTER{Volume > 10000}(Stock))"
        " FOLD{$2.Name = $.Name, $2.Price > $.Price, $.cnt + 1 AS cnt} Stock)"
    )
    expr = parse(text)
    assert isinstance(expr, A.Select)
    fold = expr.src.src
    assert isinstance(fold, A.Fold)
    assert fold.pred == A.Cmp("=", A.Attr(A.SECOND, "Name"), A.Attr(A.LAST, "Name"))
    assert fold.cont == A.Cmp(">", A.Attr(A.SECOND, "Price"), A.Attr(A.LAST, "Price"))
    assert fold.aggs == (A.SelectItem(A.Arith("+", A.Attr(A.LAST, "cnt"), A.Const(1)), "cnt"),)
    assert fold.right == A.Stream("Stock")


@pytest.mark.parametrize("name", sorted(TABLE1))
def test_table1_parses_and_is_left_deep(name):
    assert chains(parse(TABLE1[name]))


def test_keywords_are_case_insensitive_and_next_scopes_merge():
    a = parse("s next{$1.x = $2.x and not $.y < 3} t")
    b = parse("s NEXT{$.x = $2.x AND NOT $1.y < 3} t")
    assert a == b


def test_literals():
    expr = parse("FILTER{s = 'it''s' AND n = -2.5 AND b = TRUE AND m <> 3}(S)")
    parts = expr.pred.parts
    assert parts[0].right == A.Const("it's")
    assert parts[1].right == A.Const(-2.5)
    assert parts[2].right == A.Const(True)
    assert parts[3].op == "!="


@pytest.mark.parametrize(
    "text, position, expected",
    [
        ("SELECT * FROM", 14, "FILTER"),
        ("S NEXT{x = 1} S", 8, "$1., $. or $2."),
        ("FILTER{$2.x > 1}(S)", 8, "bare attribute"),
        ("S NEXT{$2.a = } S", 15, "a number"),
        ("S # T", 3, "NEXT"),
        ("S FOLD{TRUE, TRUE, $.c + 1} S", 20, "AS <name>"),
        ("S FOLD{TRUE, TRUE, *} S", 20, "AS a name"),
        ("FILTER{x > 1}(S", 16, "')'"),
    ],
)
def test_errors_name_position_and_expectation(text, position, expected):
    with pytest.raises(SubscriptionError) as info:
        parse(text)
    assert info.value.position == position
    assert expected in (info.value.expected or "")


def test_multiline_error_position():
    with pytest.raises(SubscriptionError) as info:
        parse("S\nNEXT{x = 1} S")
    assert info.value.position == "line 2, column 6"


def test_empty_text():
    with pytest.raises(SubscriptionError):
        parse("   ")


@pytest.mark.parametrize(
    "text",
    ["S NEXT{TRUE} (S NEXT{TRUE} T)", "S NEXT{TRUE} (S UNION T)", "S FOLD{TRUE, TRUE} (S FOLD{TRUE, TRUE} T)"],
)
def test_right_operand_must_be_a_stream(text):
    with pytest.raises(SubscriptionError, match="left-deep"):
        chains(parse(text))


def test_union_distributes_into_chains():
    cs = chains(parse("(FILTER{x = 1}(S) UNION T) NEXT{TRUE} U"))
    assert [c.start.stream for c in cs] == ["S", "T"]
    assert all(len(c.ops) == 1 for c in cs)


@pytest.mark.parametrize(
    "name, attr",
    [("S1", None), ("S2", None), ("S3", "name"), ("S4", "name"), ("S5", None), ("S6", None), ("S7", None), ("AutQ", "name")],
)
def test_partition_attribute_of_table1(name, attr):
    from matchers.cayuga.compiler import partition_attribute

    assert partition_attribute(chains(parse(TABLE1[name]))) == attr


@pytest.mark.parametrize(
    "text, attr",
    [
        ("S NEXT{$2.k = $1.k AND $2.j = $1.j} S", "j"),
        ("S NEXT{$2.k = $1.j} S", None),
        ("(SELECT k AS j FROM S) NEXT{$2.k = $1.j} S", "k"),
        ("(SELECT *, 1 AS k FROM S) NEXT{$2.k = $1.k} S", None),
        ("S FOLD{$2.k = $1.k, TRUE, $2.v AS k} S", "k"),
        ("S FOLD{$2.k = $.k, TRUE, $2.v AS k} S", None),
        ("(S NEXT{$2.k = $1.k} (SELECT v AS k FROM S)) NEXT{$2.k = $1.k} S", None),
        ("(S NEXT{$2.k = $1.k} S) NEXT{$2.k = $1.k} S", "k"),
        ("(S NEXT{$2.k = $1.k} S) NEXT{TRUE} S", None),
        ("(S NEXT{$2.k = $1.k} S) UNION (T NEXT{$2.k = $1.k} T)", "k"),
        ("(S NEXT{$2.k = $1.k} S) UNION T", None),
    ],
)
def test_partition_attribute(text, attr):
    from matchers.cayuga.compiler import partition_attribute

    assert partition_attribute(chains(parse(text))) == attr
