"""Turns that say nothing: "thanks!", "ok great", "sounds good", "haha", "👍".

An acknowledgement is stored like any turn (it is part of the conversation, and exported), but
as a recalled excerpt it tells the model nothing and costs block tokens: on LoCoMo 113 such
turns were shown as recalled hits in 87 of 1,982 blocks ("Bye!", ";)", "Thanks!"). Recall keeps
them out of its hits (`memory/recall/retrieval.py`); the turns around a hit are untouched.
"""

from __future__ import annotations

import re

# Words of acknowledgement, thanks, laughter and goodbye; a turn of only these says nothing.
# Not 'no' or 'nope': a refusal can be an answer ('No, I'm not allergic' is not one of these,
# but a bare 'no' after a question may be).
# Not a bare 'yes', 'sure', 'agreed' or 'exactly' either: a reply is found by the turn it
# answers (its context), and 'Yes!' to "Did you book the Porto flights?" is the answer.
_NOTHING = frozenset(
    """thanks thank you ty thx tysm ok okay k kk great sounds sound good cool nice awesome perfect
    haha hahaha hah lol lmao alright got it will do bye goodbye see later take care too same here
    wow amazing lovely brilliant cheers np welcome so much very a lot ttyl for now then hi hey
    hello oh ah aha hmm mm that's thats you're it's sweet fab fantastic love makes sense noted
    gotcha fine glad appreciate appreciated really anytime happy help hear to""".split()
)
_DIGIT = re.compile(r"\d")
_WORD = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)?")
_MOST_WORDS = 8
_MOST_CHARS = 120  # an acknowledgement is short; a longer turn is content
_NO_MATTER = re.compile(r"\bno\s+(?:problem|problemo|worries)\b")  # 'no' alone may answer


def says_nothing(text: str) -> bool:
    """True when `text` is only acknowledgement words (at most eight), emoji or punctuation:
    'thanks!', 'ok great', 'haha', '👍', ';)'. A digit or any other word is content."""
    if len(text) > _MOST_CHARS or len(text.split()) > _MOST_WORDS + 2 or _DIGIT.search(text):
        return False  # read no further: recall asks this of every hit it keeps
    said = _NO_MATTER.sub(" ", text.casefold().replace("’", "'"))
    words = _WORD.findall(said)
    return len(words) <= _MOST_WORDS and all(word in _NOTHING for word in words)
