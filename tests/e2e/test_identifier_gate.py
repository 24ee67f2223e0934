"""Identifiers said in passing, asked for weeks later: the gate reads what was said.

Each code is said mid-paragraph in small talk, a conversation each, and the provider answers
"Noted.". A question about a code never said must get no excerpt: the replies' "Noted.", whose
cosine to a short question is the best of all, had the learned gate read it as answered. A
code asked for in other words ("the bank account I pay rent to") is a lone weak turn that
the gate withheld once that prop was gone; a code asked for by its kind amid the same small
talk scored under the cosine floor. Through the real proxy, the official SDK and the real
embedder (memory/recall/identifiers.py).
"""

from tests.e2e.test_recall import block_in, say, sent_messages

SMALL_TALK = [
    "The kids had swimming on Tuesday and the neighbours are redoing their kitchen.",
    "I finally finished that crime novel, the ending was a total let-down honestly.",
    "Work has been hectic, three launches in a row and my manager is on holiday.",
    "We tried the new ramen place on the corner, the broth was amazing but so salty.",
    "My knee has been acting up again since the hike, so I'm taking it easy.",
    "The cat knocked a plant off the windowsill at 3am and woke the whole house.",
    "It has rained every single day this week, the garden is basically a pond.",
    "My brother is visiting next month and I still haven't sorted the spare room.",
]
SAID = [
    "the landlord's IBAN for the rent is DE89 3704 0044 0532 0130 00, I keep losing it",
    "I set up a billing address dana.k+billing@fastmail.com just for subscriptions",
    "the broken config lives in /etc/nginx/sites-available/shop_v2.conf on the box",
    "we pinned the library to v2.14.3-rc1 because rc2 broke the build",
    "the wifi guest code at the cabin is wx7-k3p!q, lowercase with the bang",
    "my order number for the standing desk is #A-20931-77 and it still hasn't shipped",
]
CHATTER = (
    "Anyway, the week has been a blur, the kids had swimming on Tuesday and the neighbours "
    "are redoing their kitchen so there is drilling from eight every morning. "
)
SAME_TALK = [
    "the serial on the back of the dishwasher is SN-4471-XQ9",
    "the support ticket id is 3f2b8c1e-9a4d-4e7b",
    "my locker at the pool is number 118",
    "the gate at the allotment opens with 5521",
]
PAST = "[Relevant past context]"


def converse(proxy, upstream, user, n, turn):
    """One conversation: the turn, "Noted.", then a goodbye (the whole history each time)."""
    session = {"X-Memory-Session-Id": f"{user}-{n}"}
    history = [{"role": "user", "content": turn}]
    for said in ("Thanks, talk soon.", None):
        upstream.script.append({"content": "Noted."})
        say(proxy, history, user, **session)
        if said:
            history += [
                {"role": "assistant", "content": "Noted."},
                {"role": "user", "content": said},
            ]


def asked(proxy, upstream, user, question):
    say(proxy, [{"role": "user", "content": question}], user, X_Memory_Mode="read")
    return block_in(sent_messages(upstream)) or ""


def test_codes_said_in_passing_are_recalled_and_one_never_said_is_not(proxy, upstream):
    for n, code in enumerate(SAID):
        before, after = SMALL_TALK[n], SMALL_TALK[(n + 3) % len(SMALL_TALK)]
        converse(proxy, upstream, "dana", n, f"{before} Oh and before I forget, {code}. {after}")
    proxy.flush()

    for question, code in [
        ("What's the bank account I pay rent to?", "DE89 3704 0044 0532 0130 00"),
        ("Which e-mail did I make for subscriptions?", "dana.k+billing@fastmail.com"),
        ("Which nginx file was the broken one?", "/etc/nginx/sites-available/shop_v2.conf"),
        ("What version did we pin the library to?", "v2.14.3-rc1"),
    ]:
        assert code in asked(proxy, upstream, "dana", question), question
    for question in ["What's my passport number?", "What was the garage door code again?"]:
        assert PAST not in asked(proxy, upstream, "dana", question), question


def test_a_code_asked_for_by_its_kind_amid_the_same_small_talk_is_recalled(proxy, upstream):
    for n, code in enumerate(SAME_TALK):
        converse(proxy, upstream, "sam", n, f"{CHATTER}Oh and before I forget, {code}. {CHATTER}")
    proxy.flush()

    block = asked(proxy, upstream, "sam", "What was the support ticket id?")
    assert "3f2b8c1e-9a4d-4e7b" in block
    assert "SN-4471-XQ9" not in block  # the other codes' turns stay under the floor
    assert PAST not in asked(proxy, upstream, "sam", "What's my passport number?")
