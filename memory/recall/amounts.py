"""Questions that ask what something cost or paid, and best turns that give no sum at all.

"How much did the electric car cost?", asked of a user who talked about the car but never its
price, finds the car's turns: their cosines stand out enough that the abstention gate lets
them through, and the model is shown a topic with no answer in it. A question after money
(how much … cost, pay, earn, rent; what's the price, the salary, the budget) is answered by a
sum, and a sum shows plainly: a currency sign, pounds or quid, "2.5k", "£1,250", "40
thousand", "70 a week", "12 percent". When none of the best kept turns says one, the sum was
never said: the gate closes (`memory/recall/abstention.py`); facts are not affected.

It reads the five best kept turns, not three: an answer said in other words ("my grocery
budget is about 70 a week" for "How much do I spend on food shopping?") is often the fourth
or the fifth, and on the tuning splits reading four lost seven answerable questions
(docs/recall-quality.md, "Twenty-sixth pass"). Only a sum counts, not any number: a topic's
turns hold numbers anyway ("32 GB", "three hives"): a rule on any number, or on a count for
"how many", or on a sum beside the question's words, lost more answerable questions than it
silenced never-discussed ones.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from memory.records import Hit

# The best kept hits read (the gate's others read three: see the docstring).
AMOUNT_HITS = 5

# Words of a question about money: what something cost, what one pays, earns or charges.
_MONEY_WORDS = (
    r"(?:cost|costs|price|prices|salary|rent|turnover|fees?|mortgage|budget|wages?|earn|earns"
    r"|earned|paid|pay|charge|spend|spent|money|income|worth)"
)
# "How much … cost?" (a money word on either side of "how much"); "What's the price / my
# salary / the shop's yearly turnover?" (the money word what is asked, within three words);
# "What's the kitchen going to cost?"; "What do I charge for …?", "What are we paid per …?".
# Not "What's the bank account I pay rent to?" (an account asked) nor "What do I use to
# charge the car?" (no sum asked).
_ASKS_MONEY = re.compile(
    r"\bwhat(?:'s|\s+is|\s+was|\s+are|\s+were)\s+(?:[\w'-]+\s+){0,3}?(?:cost|costs|price"
    r"|prices|salary|rent|turnover|fees?|mortgage|budget|wages?)\b",
    re.IGNORECASE,
)
# The rest are a word, then another anywhere after it: read from the first word only (a
# search from each of many "how much" to the end costs the square of a 16 kB question).
_HOW_MUCH = re.compile(r"\bhow\s+much\b", re.IGNORECASE)
_MONEY = re.compile(rf"\b{_MONEY_WORDS}\b", re.IGNORECASE)
_WHAT = re.compile(r"\bwhat(?:'s|\s+is|\s+was|\s+are|\s+were|\s+do|\s+does|\s+did)\b", re.I)
_WHAT_MONEY = re.compile(
    r"\b(?:cost|(?:charge|pay|paid|earn)(?:\s+(?:me|us|you|him|her|them))?\s+(?:for|per|a|an"
    r"|each)\b|(?:spend|spent)\s+on\b)",
    re.IGNORECASE,
)
# A sum (read in the lower-cased text: `re.IGNORECASE` over word lists costs ten times as
# much, and a money question reads five turns of up to 1,000 characters): a currency sign
# before a digit; a digit before a share, a currency word or a magnitude ("40k", "12
# percent"), before "a week", "per night", "each", with thousands separators or pence
# ("3,200", "4.50"); a digit a few words after a money word ("put the rent up to 845"); a
# number word before a currency word or a magnitude ("two grand"). A run of digits, commas and
# dots is read 40 characters at most: read to its end from each of its digits, 16 kB of
# "1.1.1…" took 8.8 s.
_CURRENCY = re.compile(r"[£$€¥]\s?\d")
_DIGIT_SUM = re.compile(
    r"\d(?<!\w\d)[\d,.]{0,40}(?:\s?(?:%|percent\b|per\s+cent\b)"
    r"|\s?(?:k|m|bn|grand|thousand|million|billion|hundred|quid|pounds?|euros?|dollars?|p"
    r"|pence|bucks)\b|\s+(?:a|an|per|each)\s+\w|(?:,\d{3})+\b|\.\d\d\b)"
)
_MONEY_SAID = (
    "rent",
    "price",
    "cost",
    "paid",
    "pay",
    "salary",
    "budget",
    "fee",
    "charge",
    "sold",
    "bought",
    "quoted",
    "spen",
    "worth",
    "earn",
    "wage",
)
_MONEY_BEFORE = re.compile(
    r"\b(?:rent|price|cost|costs|paid|pay|salary|budget|fees?|charged?|sold|bought|quoted"
    r"|spent|spend|worth|earn|earned|earns|wage)\b\W+(?:[a-z]+\W+){0,3}?$"
)
_DIGITS = re.compile(r"\d+")
_MAGNITUDES = ("grand", "quid", "pounds", "euros", "dollars", "hundred", "thousand", "million")
_WORD_SUM = re.compile(
    r"\b(?:a|one|two|three|four|five|six|seven|eight|nine|ten|twenty|fifty|hundred)\s+"
    r"(?:grand|quid|pounds|euros|dollars|hundred|thousand|million)\b"
)
# How far before a digit a money word may be: "rent up to" (three words between, at most).
_MONEY_REACH = 48


def asks_for_money(query: str) -> bool:
    """Whether the question asks what something cost, paid or earned ("How much is my rent?")."""
    if _ASKS_MONEY.search(query) is not None:
        return True
    return any(
        (first := word.search(query)) is not None and after.search(query, first.end()) is not None
        for word, after in ((_HOW_MUCH, _MONEY), (_MONEY, _HOW_MUCH), (_WHAT, _WHAT_MONEY))
    )


def says_a_sum(text: str) -> bool:
    """Whether `text` says a sum of money, a share or a rate ("£329 a month", "40k")."""
    if _CURRENCY.search(text) is not None:
        return True
    low = text.lower()
    if _DIGITS.search(low) is not None:
        if _DIGIT_SUM.search(low) is not None:
            return True
        if any(w in low for w in _MONEY_SAID) and any(
            _MONEY_BEFORE.search(low, max(0, d.start() - _MONEY_REACH), d.start())
            for d in _DIGITS.finditer(low)
        ):
            return True
    return any(w in low for w in _MAGNITUDES) and _WORD_SUM.search(low) is not None


def no_sum_given(query: str, kept: Sequence[Hit]) -> bool:
    """True when the question asks after money and none of the best kept hits says a sum."""
    if not asks_for_money(query):
        return False
    return not any(says_a_sum(hit.chunk.text) for hit in kept[:AMOUNT_HITS])
