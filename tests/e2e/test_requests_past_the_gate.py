"""A request for a suggestion, past the gate.

It shares no words with the turn that bears on it ('I don't drink' for a night out), so among
a dozen turns on the same topic nothing stands out and the gate withheld every excerpt
(docs/recall-quality.md, "Twelfth pass"). Through the real proxy, the official SDK and the real
embedder.
"""

import pytest

from tests.e2e.test_recall import block_in, remember_apart, say, sent_messages

pytestmark = pytest.mark.both_backends

DEPOT = (
    "I drive the number 42 bus from the Hulme depot, mostly early shifts starting at 5am.",
    "The new electric buses are quieter but the heaters are useless in January.",
    "My manager Keith changed the rota again so I lose my Sunday off this month.",
    "I don't drink, haven't touched alcohol for years, so I'm always the designated driver.",
    "The route through Moss Side has a lot of roadworks, we're running ten minutes late.",
    "My back aches after a double shift, the seat in the older buses is worn out.",
    "Passengers tap in with their phones now, the cash float is nearly gone.",
    "We had the annual driver assessment last week and I passed with full marks.",
    "The canteen at the depot does a decent fry-up but the tea is stewed.",
    "Our union rep says pay talks start in the spring, we want five percent.",
    "I park my car at the depot and cycle home when the weather is good.",
)
TEAM = "I joined the depot's five-a-side team in 2019, we play on Monday nights."


def test_a_request_reaches_a_preference_said_among_its_topic(proxy, upstream):
    remember_apart(proxy, "nadia", *DEPOT, TEAM)
    asked = "Can you plan a night out for my birthday with the lads from work?"
    say(proxy, [{"role": "user", "content": asked}], "nadia", X_Memory_Mode="read")
    assert "I don't drink, haven't touched" in (block_in(sent_messages(upstream)) or "")


ALLOTMENT = (
    "We finally got an allotment plot behind the railway line, it's about ten metres long.",
    "I refuse to use chemical pesticides on anything I grow, it all has to be organic.",
    "My neighbour on the next plot gave me a load of rhubarb crowns.",
)


def test_a_request_reaches_a_preference_no_word_of_it_shares(proxy, upstream):
    """The request shares no word with the stored turns and no turn comes close in meaning
    (every cosine under 0.35): a question is then dropped whole; a request keeps the turns
    past the excerpt floor, and the one that bears on it is among them."""
    remember_apart(proxy, "ola", *ALLOTMENT)
    asked = "What should I do about slugs on my lettuces?"
    say(proxy, [{"role": "user", "content": asked}], "ola", X_Memory_Mode="read")
    assert "I refuse to use chemical pesticides" in (block_in(sent_messages(upstream)) or "")
