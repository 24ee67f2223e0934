"""A question after a sum never said, on a topic the user talked about at length ("How much did
the electric car cost?" of a user who told everything about the car but its price): the car's
turns stand out of the user's history and the learned gate let them through, so the model was
shown a topic with no answer. The question asks for money and no best kept turn says a sum:
no excerpt (the facts stay); a price said keeps its excerpt (memory/recall/amounts.py).
Through the real proxy, the official SDK and the real embedder."""

from tests.e2e.test_recall import block_in, remember_apart, say, sent_messages

TURNS = (
    "My name is Priya and I live in Leeds with my partner Tom and our two kids.",
    "We finally picked up the electric car on Saturday, a white Kia Niro, the kids love it.",
    "Charging the electric car at home overnight is easy now the wallbox is in.",
    "The electric car's range is about 250 miles in summer, less when it's cold.",
    "Tom drives the electric car to the station most days and loves how quiet it is.",
    "We sold the old diesel Astra to a neighbour before the electric car arrived.",
    "I'm training for a half marathon in October, three runs a week.",
    "Our cat Mango has started sleeping in the laundry basket.",
    "Work is busy, I'm a pharmacist at a hospital and we're short staffed.",
    "My mum is visiting in June and I need to sort the spare room.",
    "The garden is finally looking good, the roses are out.",
    "We're thinking about a camping trip to the Lakes in August.",
)
PAST = "[Relevant past context]"


def asked(proxy, upstream, user, question):
    say(proxy, [{"role": "user", "content": question}], user, X_Memory_Mode="read")
    return block_in(sent_messages(upstream)) or ""


def test_a_sum_never_said_gets_no_excerpt_and_one_said_keeps_it(proxy, upstream):
    remember_apart(proxy, "priya", *TURNS)
    block = asked(proxy, upstream, "priya", "How much did the electric car cost?")
    assert PAST not in block
    assert "Leeds" in block  # the facts stay

    remember_apart(proxy, "priya", "In the end we paid £31,000 for the electric car.")
    block = asked(proxy, upstream, "priya", "How much did the electric car cost?")
    assert PAST in block
    assert "£31,000" in block
