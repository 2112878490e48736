"""Workloads of two application domains, with strings, that between them use every operator
of the language: :func:`stock_ticker` (quotes and alerts) and :func:`ecommerce` (a catalogue
and shoppers' searches). Generators of :data:`scripts.workloads.WORKLOADS`."""

from __future__ import annotations

import bisect
import itertools
import math
import random

from matchers.expr import And, Expr, Not, Or, pred
from scripts.draws import Workload, subscriptions_of, zipf_probabilities

# -- stock ticker -------------------------------------------------------------------------
EXCHANGES = ("NYSE", "NASDAQ", "LSE", "XETRA", "TSE", "HKEX")
SECTORS = ("Technology", "Financials", "Health Care", "Energy", "Utilities", "Industrials",
           "Consumer Staples", "Consumer Discretionary", "Materials", "Real Estate", "Communication")
CURRENCIES = {"NYSE": "USD", "NASDAQ": "USD", "LSE": "GBP", "XETRA": "EUR", "TSE": "JPY", "HKEX": "HKD"}


def _tickers(rnd: random.Random, n: int) -> list[str]:
    letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    out: dict[str, None] = {}
    while len(out) < n:
        size = rnd.choice((1, 2, 3, 3, 3, 4, 4, 4, 4))
        out.setdefault("".join(rnd.choice(letters) for _ in range(size)))
    return list(out)


def stock_ticker(n_subs: int = 10_000, n_events: int = 10_000, n_symbols: int = 500,
                 zipf_alpha: float = 1.0, seed: int = 0) -> Workload:
    """Stock quotes and alert subscriptions.

    ``n_symbols`` tickers with Zipf(``zipf_alpha``) popularity (for events and for the
    symbols subscriptions name), each with a fixed exchange, sector, currency and base
    price.  Events: ``symbol``, ``price``, ``volume``, ``exchange``, ``sector``,
    ``currency``, ``change_pct``, ``halted`` (boolean) and, for 60% of them,
    ``dividend_yield``.  Subscriptions mix ``=``, ``!=``, ``IN``, ``NOT IN``, ``<``,
    ``<=``, ``>``, ``>=``, ``BETWEEN``, ``NOT BETWEEN``, ``LIKE`` prefixes and patterns
    with ``_``, their negations, booleans and ``OR``.
    """
    srnd = random.Random(f"stock-subs-{seed}")
    ernd = random.Random(f"stock-events-{seed}")
    meta = random.Random(f"stock-meta-{seed}")
    symbols = _tickers(meta, n_symbols)
    info = {}
    for s in symbols:
        exchange = meta.choice(EXCHANGES)
        info[s] = (exchange, meta.choice(SECTORS), CURRENCIES[exchange], round(math.exp(meta.uniform(1.5, 6.5)), 2))
    cum = list(itertools.accumulate(zipf_probabilities(n_symbols, zipf_alpha).tolist()))

    def pick(rnd: random.Random) -> str:
        return symbols[min(bisect.bisect_right(cum, rnd.random() * cum[-1]), n_symbols - 1)]

    def price_near(rnd: random.Random, s: str, spread: float = 0.05) -> float:
        return round(info[s][3] * (1.0 + rnd.uniform(-spread, spread)), 2)

    def template(rnd: random.Random) -> Expr:
        s = pick(rnd)
        exchange, sector, currency, base = info[s]
        t = rnd.randrange(15)
        if t == 0:
            return And((pred("symbol", "=", s), pred("price", "<", price_near(rnd, s))))
        if t == 1:
            group = sorted({s, pick(rnd), pick(rnd)})
            return And((pred("symbol", "in", group), pred("volume", ">", int(math.exp(rnd.uniform(6, 10))))))
        if t == 2:
            a, b = sorted((price_near(rnd, s, 0.08), price_near(rnd, s, 0.08)))
            return And((pred("symbol", "=", s), pred("price", "between", (a, b))))
        if t == 3:
            return And((pred("sector", "=", sector), pred("change_pct", "<=", -round(rnd.uniform(0.5, 6), 1))))
        if t == 4:
            return And((pred("symbol", "like", s[: rnd.randint(1, 2)] + "%"), pred("exchange", "=", exchange)))
        if t == 5:
            a, b = sorted((price_near(rnd, s, 0.04), price_near(rnd, s, 0.04)))
            return And((pred("symbol", "=", s), Not(pred("price", "between", (a, b)))))
        if t == 6:
            s2 = pick(rnd)
            return Or((And((pred("symbol", "=", s), pred("price", ">=", price_near(rnd, s)))),
                       And((pred("symbol", "=", s2), pred("price", "<=", price_near(rnd, s2))))))
        if t == 7:
            others = sorted({sector, rnd.choice(SECTORS), rnd.choice(SECTORS)})
            return And((pred("exchange", "=", exchange), Not(pred("sector", "in", others)),
                        pred("volume", ">=", int(math.exp(rnd.uniform(5, 9))))))
        if t == 8:
            return And((pred("symbol", "=", s), pred("halted", "=", True)))
        if t == 9:
            return And((pred("sector", "=", sector), Not(pred("symbol", "like", s[0] + "%")),
                        pred("change_pct", ">", round(rnd.uniform(0.5, 5), 1))))
        if t == 10:
            pattern = "_" + s[1] + "%" if len(s) > 1 else s + "_%"
            return And((pred("symbol", "like", pattern), pred("price", "<", price_near(rnd, s, 0.5))))
        if t == 11:
            return And((pred("symbol", "=", s), pred("exchange", "!=", rnd.choice(EXCHANGES))))
        if t == 12:
            return And((pred("sector", "=", sector), Not(pred("symbol", "like", s[0] + "_%"))))
        if t == 13:
            return And((pred("dividend_yield", ">=", round(rnd.uniform(0.5, 6), 2)),
                        pred("sector", "in", sorted({sector, rnd.choice(SECTORS)}))))
        return And((pred("symbol", "=", s), Not(pred("halted", "=", True)),
                    pred("currency", "=", currency)))

    subs = subscriptions_of(template(srnd) for _ in range(n_subs))
    events = []
    for _ in range(n_events):
        s = pick(ernd)
        exchange, sector, currency, base = info[s]
        price = round(base * math.exp(ernd.gauss(0.0, 0.03)), 2)
        event = {
            "symbol": s, "price": price, "volume": int(math.exp(ernd.uniform(4, 11))),
            "exchange": exchange, "sector": sector, "currency": currency,
            "change_pct": round((price / base - 1.0) * 100.0, 3), "halted": ernd.random() < 0.05,
        }
        if ernd.random() < 0.6:
            event["dividend_yield"] = round(ernd.uniform(0.0, 7.0), 2)
        events.append(event)
    return Workload(subs, events)


# -- e-commerce catalogue ---------------------------------------------------------------
CATEGORIES = (
    "Electronics > Phones > Smartphones", "Electronics > Phones > Cases", "Electronics > Audio > Headphones",
    "Electronics > Audio > Speakers", "Electronics > Computers > Laptops", "Electronics > Computers > Monitors",
    "Home > Kitchen > Coffee Makers", "Home > Kitchen > Blenders", "Home > Furniture > Chairs",
    "Books > Fiction", "Books > Science", "Sports > Cycling > Bikes", "Sports > Running > Shoes",
    "Toys > Building Sets", "Fashion > Women > Dresses", "Fashion > Men > Jackets",
)
NOUNS = {
    "Smartphones": ("Smartphone", "Phone"), "Cases": ("Case", "Case Cover", "Folio Case"),
    "Headphones": ("Headphones", "Earbuds"), "Speakers": ("Speaker", "Soundbar"),
    "Laptops": ("Laptop", "Notebook", "Ultrabook"), "Monitors": ("Monitor", "Display"),
    "Coffee Makers": ("Coffee Maker", "Espresso Machine"), "Blenders": ("Blender",),
    "Chairs": ("Office Chair", "Gaming Chair"), "Fiction": ("Novel", "Paperback"),
    "Science": ("Textbook", "Guide"), "Bikes": ("Road Bike", "Mountain Bike"),
    "Shoes": ("Running Shoes", "Trail Shoes"), "Building Sets": ("Building Set", "Brick Kit"),
    "Dresses": ("Dress", "Maxi Dress"), "Jackets": ("Jacket", "Rain Jacket"),
}
ADJECTIVES = ("Wireless", "Pro", "Ultra", "Compact", "Portable", "Smart", "Classic", "Premium", "Lightweight",
              "Noise-Cancelling", "Waterproof", "Ergonomic", "Max", "Mini", "Deluxe")
COLORS = ("Black", "White", "Silver", "Red", "Blue", "Green", "Gold", "Grey")
SYLLABLES = ("ze", "ka", "lo", "tri", "vo", "nex", "ar", "mi", "qu", "sol", "ra", "tek", "on", "lu", "fy")
REGEXES = (r"(?i)wireless.*(headphones|earbuds)", r"\b[A-Z]-[0-9]{3}\b", r"(?i)\bpro\b.*\bmax\b",
           r"[0-9]{2,}(GB|TB)", r"^(Ultra|Premium) ", r"(?i)refurbished|renewed")


def _brands(rnd: random.Random, n: int) -> list[str]:
    out: dict[str, None] = {}
    while len(out) < n:
        out.setdefault("".join(rnd.choice(SYLLABLES) for _ in range(rnd.randint(2, 3))).capitalize())
    return list(out)


def ecommerce(n_subs: int = 10_000, n_events: int = 10_000, n_brands: int = 200, zipf_alpha: float = 0.8,
              seed: int = 0) -> Workload:
    """Product catalogue events and shopper subscriptions with strings.

    Events are products: ``title`` (brand, adjectives, product noun, model code such as
    ``X-200``, sometimes a storage size, ``(Refurbished)``), ``brand`` (Zipf popularity),
    ``category`` (``"Electronics > Audio > Headphones"``), ``sku`` (``SKU-000123-EL``),
    ``price``, ``rating`` (absent for new products), ``reviews``, ``in_stock`` and
    ``prime`` (booleans), ``color`` (absent for some).  Subscriptions use ``CONTAINS``,
    ``LIKE`` prefixes and suffixes, general ``LIKE``, ``MATCHES`` (RE2), their negations,
    ``IN``, ``NOT IN``, ranges, ``BETWEEN``, ``NOT BETWEEN``, string ordering, ``OR``.
    """
    srnd = random.Random(f"shop-subs-{seed}")
    ernd = random.Random(f"shop-events-{seed}")
    meta = random.Random(f"shop-meta-{seed}")
    brands = _brands(meta, n_brands)
    cum = list(itertools.accumulate(zipf_probabilities(n_brands, zipf_alpha).tolist()))

    def brand(rnd: random.Random) -> str:
        return brands[min(bisect.bisect_right(cum, rnd.random() * cum[-1]), n_brands - 1)]

    def words(rnd: random.Random) -> str:
        return rnd.choice(ADJECTIVES + tuple(n for ns in NOUNS.values() for n in ns) + ("Edition", "Case"))

    def template(rnd: random.Random) -> Expr:
        t = rnd.randrange(16)
        category = rnd.choice(CATEGORIES)
        price = round(math.exp(rnd.uniform(2.5, 7.5)), 2)
        if t == 0:
            return And((pred("title", "contains", rnd.choice(ADJECTIVES)), pred("price", "<=", price)))
        if t == 1:
            return And((pred("category", "like", category.split(" > ")[0] + "%"),
                        pred("rating", ">=", round(rnd.uniform(3.0, 4.8), 1))))
        if t == 2:
            return And((pred("sku", "like", "%-" + category[:2].upper()), pred("in_stock", "=", True)))
        if t == 3:
            return And((pred("title", "matches", rnd.choice(REGEXES)),
                        pred("brand", "in", sorted({brand(rnd) for _ in range(3)} | {brand(rnd)}))))
        if t == 4:
            lo = round(price / 2, 2)
            return And((pred("brand", "not in", sorted({brand(rnd), brand(rnd), brand(rnd)})),
                        pred("category", "=", category), pred("price", "between", (lo, price))))
        if t == 5:
            return And((pred("title", "not like", "%Refurbished%"), pred("brand", "=", brand(rnd)),
                        pred("price", "<", price)))
        if t == 6:
            return And((pred("category", "=", category), Not(pred("title", "matches", rnd.choice(REGEXES)))))
        if t == 7:
            return And((Not(pred("sku", "like", "%-" + rnd.choice(CATEGORIES)[:2].upper())),
                        pred("title", "contains", words(rnd))))
        if t == 8:
            return And((pred("title", "not like", "%Case%Cover%"),
                        pred("category", "like", "Electronics > Phones%")))
        if t == 9:
            return And((pred("color", "!=", rnd.choice(COLORS)), pred("rating", ">", round(rnd.uniform(2, 4.5), 1)),
                        pred("price", "<", price)))
        if t == 10:
            return And((Not(pred("category", "like", "Books%")), pred("price", ">=", price),
                        pred("prime", "=", True)))
        if t == 11:
            return And((pred("title", "like", "%Pro_Max%"), pred("in_stock", "!=", False)))
        if t == 12:
            return And((pred("reviews", ">", int(math.exp(rnd.uniform(1, 8)))),
                        Not(pred("rating", "between", (2.0, round(rnd.uniform(2.5, 4.0), 1))))))
        if t == 13:
            b = brand(rnd)
            return Or((pred("brand", "like", b[:2] + "%"), And((pred("title", "contains", words(rnd)),
                                                                   pred("price", "<", price)))))
        if t == 14:
            return And((pred("color", "in", sorted({rnd.choice(COLORS), rnd.choice(COLORS), "Red"})),
                        pred("title", "like", "%" + rnd.choice(("Edition", "Case", "Max", "Kit")))))
        return And((pred("brand", ">=", rnd.choice("ABCDEFGHKLMNQRSTVZ")), pred("category", "=", category),
                    Not(pred("title", "contains", "Refurbished"))))

    subs = subscriptions_of(template(srnd) for _ in range(n_subs))
    events = []
    for i in range(n_events):
        category = ernd.choice(CATEGORIES)
        leaf = category.split(" > ")[-1]
        b = brand(ernd)
        parts = [b] + ernd.sample(ADJECTIVES, ernd.randint(0, 3)) + [ernd.choice(NOUNS[leaf])]
        parts.append(f"{ernd.choice('ABCDEFGHKLMNPRSTXZ')}-{ernd.randint(1, 999):03d}")
        if category.startswith("Electronics") and ernd.random() < 0.4:
            parts.append(f"{ernd.choice((32, 64, 128, 256, 512, 1))}{ernd.choice(('GB', 'TB'))}")
        if ernd.random() < 0.1:
            parts.append("Edition")
        if ernd.random() < 0.08:
            parts.append("(Refurbished)")
        event = {
            "title": " ".join(parts), "brand": b, "category": category,
            "sku": f"SKU-{i:06d}-{category[:2].upper()}", "price": round(math.exp(ernd.uniform(2.5, 7.5)), 2),
            "reviews": int(math.exp(ernd.uniform(0, 9))), "in_stock": ernd.random() < 0.85,
            "prime": ernd.random() < 0.5,
        }
        if ernd.random() < 0.8:
            event["rating"] = round(ernd.uniform(1.0, 5.0), 1)
        if ernd.random() < 0.7:
            event["color"] = ernd.choice(COLORS)
        events.append(event)
    return Workload(subs, events)
