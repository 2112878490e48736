"""The subscription language: text form, JSON form and subscription records.

>>> from matchers.language import parse_text, parse_json, to_json
>>> e = parse_text("symbol = 'IBM' AND price < 100")
>>> to_json(e)
{'all': [['symbol', '=', 'IBM'], ['price', '<', 100]]}
>>> parse_json(to_json(e)) == e
True
"""

from .jsonform import parse_json, to_json
from .limits import MAX_DEPTH, MAX_ID_LENGTH, RESERVED_WORDS
from .subscription_records import parse_record, parse_subscription, to_record
from .text import parse_text

__all__ = [
    "parse_text", "parse_json", "to_json", "parse_record", "parse_subscription", "to_record",
    "MAX_DEPTH", "MAX_ID_LENGTH", "RESERVED_WORDS",
]
