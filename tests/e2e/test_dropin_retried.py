"""A request retried after its reply broke off: the whole answer is the one recalled.

A client that leaves mid-stream (`with client.chat.completions.create(..., stream=True) as s:
break`, an async task cancelled, a timeout) or a provider that breaks off leaves the part said
so far stored, marked partial. When the app (or the user) asks again and gets the answer
whole, both replies follow the same question. Other conversations recalled both: the cut-off
one as a second answer to the question.
"""

from tests.e2e.test_faults import wait_for
from tests.e2e.test_recall import block_in

USER = {"x-memory-user-id": "rosa"}
ASK = [{"role": "user", "content": "When is the rabies booster for my beagle Biscuit due?"}]
CUT = "Let me look through the vet letters you forwarded last spring before I answer that."
WHOLE = "Biscuit's rabies booster is due on 14 March, at the Riverside vet clinic."
LATER = [{"role": "user", "content": "Which clinic does Biscuit's rabies booster happen at?"}]


def test_a_reply_cut_off_then_answered_whole_is_not_recalled_beside_the_answer(proxy, upstream):
    upstream.script[:] = [{"content": CUT, "delay": 0.05}, {"content": WHOLE}, {"content": "Ok."}]
    with proxy.client(default_headers=USER) as client:
        with client.chat.completions.create(model="gpt-4o-mini", messages=ASK, stream=True) as s:
            for number, _ in enumerate(s):
                if number == 3:
                    break
        assert wait_for(lambda: upstream.disconnects == 1)
        proxy.flush()
        client.chat.completions.create(model="gpt-4o-mini", messages=ASK)
        proxy.flush()
        client.chat.completions.create(model="gpt-4o-mini", messages=LATER)

    stored = [(m.role, m.partial) for m in proxy.layer.store.messages("rosa")]
    assert stored[:3] == [("user", False), ("assistant", True), ("assistant", False)]
    block = block_in(upstream.last_json["messages"]) or ""
    assert WHOLE in block
    assert CUT[:16] not in block
