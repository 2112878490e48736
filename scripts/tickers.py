"""Stock-ticker streams of the Cayuga benchmarks and tests (Demers et al., Section 4).

:func:`make_events` and :func:`make_subscriptions` are the workload of
``scripts.bench.cayuga``, ``patterns``, ``flink`` and ``cayuga_trees``: trades over many
symbols and subscriptions "a trade of SYM above P, then the next trade of the same stock
above P2, within W ticks" (:func:`cel`; :func:`expr` is the same built as algebra,
:func:`cel_pairs` its every-pair form). :func:`stock_ticks` is the four-symbol stream of
the Table 1 subscriptions.
"""

from __future__ import annotations

import random

from matchers.cayuga import algebra as A

SYMBOLS = ("IBM", "MSFT", "ORCL", "SUN")
P_GRID = (95, 100, 105)
RISE = (1.02, 1.05)
WINDOWS = (5000, 20000)


def make_events(n: int, symbols: int, seed: int) -> list[A.Event]:
    """``n`` trades, one per tick, uniform over symbols, random-walk prices around 100."""
    rng = random.Random(seed)
    price = [100.0] * symbols
    out = []
    for t in range(n):
        s = rng.randrange(symbols)
        price[s] = round(min(150.0, max(60.0, price[s] * rng.uniform(0.97, 1.03))), 2)
        out.append(A.Event(f"e{t}", "Stock", t, t, {"name": f"S{s}", "price": price[s], "vol": rng.randrange(100, 20000)}))
    return out


def make_subscriptions(n: int, symbols: int, seed: int) -> list[tuple[str, float, float, int]]:
    """``(symbol, P, P2, W)`` of ``n`` subscriptions."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        p = rng.choice(P_GRID)
        out.append((f"S{rng.randrange(symbols)}", float(p), round(p * rng.choice(RISE), 2), rng.choice(WINDOWS)))
    return out


def cel(sym: str, p: float, p2: float, w: int) -> str:
    """The subscription in CEL (what a user sends)."""
    return (f"FILTER{{DUR <= {w}}}(FILTER{{name = '{sym}' AND price > {p}}}(Stock)"
            f" NEXT{{$2.name = $1.name AND $2.price > {p2}}} Stock)")


def cel_pairs(sym: str, p: float, p2: float, w: int) -> str:
    """Every later matching trade in the window (CORE's ``;``), as a FOLD emitting each one."""
    return (f"FILTER{{DUR <= {w}}}(FILTER{{name = '{sym}' AND price > {p}}}(Stock)"
            f" FOLD{{$2.name = $.name AND $2.price > {p2}, TRUE}} Stock)")


def expr(sym: str, p: float, p2: float, w: int) -> A.Expr:
    """The same subscription built directly as algebra (registering 100,000 is faster)."""
    start = A.Filter(A.And((A.Cmp("=", A.Attr(A.BARE, "name"), A.Const(sym)),
                            A.Cmp(">", A.Attr(A.BARE, "price"), A.Const(p)))), A.Stream("Stock"))
    theta = A.And((A.Cmp("=", A.Attr(A.SECOND, "name"), A.Attr(A.LAST, "name")),
                   A.Cmp(">", A.Attr(A.SECOND, "price"), A.Const(p2))))
    return A.Filter(A.Cmp("<=", A.Dur(), A.Const(w)), A.Next(start, theta, A.Stream("Stock")))



def stock_ticks(n: int, seed: int, symbols=SYMBOLS, spacing: int = 1) -> list[A.Event]:
    """``n`` stock ticks (name, price, vol) as point events, random walk prices per symbol."""
    rng = random.Random(seed)
    start = {"IBM": 100.0, "MSFT": 25.0, "ORCL": 50.0, "SUN": 10.0}
    price = {s: start.get(s, rng.choice([20.0, 50.0, 100.0])) for s in symbols}
    out = []
    t = 0
    for i in range(n):
        t += rng.randint(0, spacing)
        s = rng.choice(symbols)
        price[s] = round(max(1.0, price[s] * rng.choice([0.9, 0.97, 1.0, 1.02, 1.06, 1.1])), 2)
        vol = rng.choice([500, 5000, 15000, 20000])
        out.append(A.Event(f"t{i}", "Stock", t, t, {"name": s, "price": price[s], "vol": vol}))
    return out
