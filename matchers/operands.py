"""The text forms of operands: literals, LIKE patterns, EventBridge wildcards, CIDR networks
and regular expressions (checked, canonical, parsed), for :mod:`matchers.expr` and the
languages."""

from __future__ import annotations

from matchers.errors import SubscriptionError


def literal(value: str | float | bool) -> str:
    """Text-form literal of a scalar."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value)
    return "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"


def like_escape(text: str) -> str:
    """Escape ``%``, ``_`` and ``\\`` so that ``text`` is matched literally by LIKE."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def like_parse(pattern: str) -> list[tuple[str, str]]:
    """Split a LIKE pattern into tokens ``('lit', text)``, ``('any', '%')``, ``('one', '_')``.

    A backslash makes the next character literal; a trailing backslash is literal.
    """
    tokens: list[tuple[str, str]] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            tokens.append(("lit", pattern[i + 1]))
            i += 2
            continue
        if c == "%":
            if not tokens or tokens[-1] != ("any", "%"):
                tokens.append(("any", "%"))
        elif c == "_":
            tokens.append(("one", "_"))
        else:
            tokens.append(("lit", c))
        i += 1
    merged: list[tuple[str, str]] = []
    for kind, text in tokens:
        if kind == "lit" and merged and merged[-1][0] == "lit":
            merged[-1] = ("lit", merged[-1][1] + text)
        else:
            merged.append((kind, text))
    return merged


def cidr_network(text: str) -> str:
    """The canonical form of an IPv4 or IPv6 network (``'10.1.2.3/8'`` is ``'10.0.0.0/8'``;
    an address alone is a network of one address)."""
    import ipaddress

    try:
        return str(ipaddress.ip_network(text, strict=False))
    except ValueError:
        raise SubscriptionError(f"CIDR needs an IPv4 or IPv6 network such as '10.0.0.0/8' or '2001:db8::/32', "
                                f"not {literal(text)}") from None


def wildcard_to_like(pattern: str) -> str:
    """The LIKE pattern of an EventBridge wildcard pattern: ``*`` any run of characters,
    ``\\*`` a literal star, ``\\\\`` a literal backslash; any other character is itself."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            nxt = pattern[i + 1:i + 2]
            if nxt not in ("*", "\\"):
                raise SubscriptionError(f"in a wildcard pattern a backslash escapes * or a backslash, not "
                                        f"{literal(nxt) if nxt else 'the end'}")
            out.append(like_escape(nxt))
            i += 2
            continue
        out.append("%" if c == "*" else like_escape(c))
        i += 1
    return "".join(out)


def check_regex(pattern: str) -> None:
    """Raise :class:`SubscriptionError` unless ``pattern`` compiles with RE2."""
    import re2

    options = re2.Options()
    options.log_errors = False
    try:
        re2.compile(pattern, options)
    except Exception as exc:  # re2 raises its own error type
        detail = exc.args[0] if exc.args else exc
        if isinstance(detail, bytes):
            detail = detail.decode("utf-8", "replace")
        raise SubscriptionError(f"invalid regular expression {pattern!r}: {detail}") from None
