"""Generated event streams and the Table 1 subscriptions written in CEL."""

from __future__ import annotations

import random

from matchers.cayuga.algebra import Event
from scripts.tickers import SYMBOLS, stock_ticks

__all__ = ["BLOGS", "SITES", "SYMBOLS", "TABLE1", "rss_posts", "stock_ticks"]

SITES = ("military.com", "site1", "site2", "site3")


def rss_posts(n: int, seed: int) -> list[Event]:
    """``n`` blog posts (website, category, link, description) that reference each other."""
    rng = random.Random(seed)
    out = []
    links: list[str] = []
    for i in range(n):
        site = rng.choice(SITES)
        link = f"http://{site}/p{i}"
        refs = rng.sample(links[-6:], k=min(len(links[-6:]), rng.randint(0, 2)))
        words = " ".join(rng.sample(["XYZ", "news", "troops", "morale", "blog"], 2))
        desc = " ".join([words] + refs)
        category = rng.choice(["US troop morale", "sports", "tech"])
        out.append(Event(f"p{i}", "Posts", i, i, {"website": site, "category": category, "link": link, "description": desc}))
        links.append(link)
    return out


BLOGS = "(website = 'site1' OR website = 'site2')"

TABLE1 = {
    "S1": "SELECT * FROM FILTER{name = 'IBM' AND price > 100}(Stock)",
    "S2": "FILTER{price < 25}(FILTER{name = 'IBM' AND price > 100}(Stock) NEXT{$2.name = 'MSFT'} Stock)",
    "S3": "FILTER{price > 1.05 * p1}((SELECT name, price AS p1 FROM Stock) NEXT{$2.name = $1.name} Stock)",
    "S4": "FILTER{DUR >= 6}(Stock FOLD{$2.name = $.name, $2.price >= $.price} Stock)",
    "S5": (
        "FILTER{price > avg}(FILTER{DUR = 12}((SELECT *, price AS avg, 1 AS cnt FROM FILTER{name = 'IBM'}(Stock))"
        " FOLD{TRUE, TRUE, ($.cnt * $.avg + $2.price) / ($.cnt + 1) AS avg, $.cnt + 1 AS cnt}"
        " FILTER{name = 'IBM'}(Stock)) NEXT{$2.name = 'IBM'} Stock)"
    ),
    "S6": (
        "FILTER{website = 'military.com' AND category = 'US troop morale'}(Posts)"
        f" NEXT{{contains($2.description, $1.link)}} FILTER{{{BLOGS}}}(Posts)"
    ),
    "S7": (
        f"FILTER{{contains(description, 'XYZ') AND {BLOGS}}}(Posts)"
        f" FOLD{{contains($2.description, $.link), TRUE}} FILTER{{{BLOGS}}}(Posts)"
    ),
    "AutQ": (
        "SELECT * FROM FILTER{finalP > 1.05 * minP}(FILTER{DUR >= 4}("
        "(SELECT name AS company, price AS maxP, price AS minP FROM FILTER{vol > 10000}(Stock))"
        " FOLD{$2.company = $.company, $2.minP < $.minP}"
        " (SELECT name AS company, price AS minP FROM Stock))"
        " NEXT{$2.company = $1.company} (SELECT name AS company, price AS finalP FROM Stock))"
    ),
}
