"""memory/ingest/turns.py and identity.py: message identity, storing a turn, indexing it."""

import hashlib
import json
from dataclasses import replace

import numpy as np
import pytest

from memory.block.render import BLOCK_END, BLOCK_START
from memory.errors import EmbeddingFailed
from memory.ingest.chunking import chunk_text
from memory.ingest.embedding_inputs import question_text
from memory.ingest.identity import content_hash, message_keys
from memory.ingest.turns import Turn, index_pending, store_turn
from memory.recall.vectors import VectorIndex
from memory.settings import Settings
from memory.store.backend import ChunkSlice
from memory.store.store import Store
from tests.memory.hash_embedder import HashEmbedder

BLOCK = f"{BLOCK_START}\nRecalled data.\n\n[Relevant past context]\n- something\n{BLOCK_END}"


@pytest.fixture
def settings(tmp_path):
    return Settings(db_path=tmp_path / "moim.db", chunk_size=100, chunk_overlap=20)


@pytest.fixture
def store(settings):
    store = Store(settings.db_path)
    store.ensure_vectors(HashEmbedder.name, HashEmbedder.dim)
    return store


def turn(messages, reply=None, partial=False):
    return Turn(
        user_id="alice",
        session_id="s-1",
        model="gpt-4o-mini",
        messages=tuple(messages),
        reply=reply,
        created_at=1_700_000_000.0,
        partial=partial,
    )


def index(store, settings):
    return index_pending(store, HashEmbedder(), VectorIndex(store.user_vectors), settings)


def chunks_by_message(store):
    found = store.chunks("alice", range(1, 1000)).values()
    by_message = {}
    for chunk in sorted(found, key=lambda c: c.id):
        by_message.setdefault(chunk.message_id, []).append(chunk.text)
    return by_message


def test_content_hash_ignores_an_injected_block_in_a_system_message():
    plain = {"role": "system", "content": "You are terse."}
    injected = {"role": "system", "content": f"{BLOCK}\n\nYou are terse."}
    assert content_hash(injected) == content_hash(plain)


def test_content_hash_ignores_an_injected_block_in_a_text_part():
    plain = {"role": "developer", "content": [{"type": "text", "text": "Be brief."}]}
    injected = {"role": "developer", "content": [{"type": "text", "text": f"{BLOCK}\n\nBe brief."}]}
    assert content_hash(injected) == content_hash(plain)


def test_content_hash_is_blake2b_of_the_canonical_form_whether_remembered_or_not():
    # The form is a contract (stored messages are found by it); a plain message's hash is
    # remembered, so the first and the second computation must both be this.
    def canonical(role, name, text, calls, call_id):
        form = json.dumps(
            [role, name, text, calls, call_id], ensure_ascii=False, separators=(",", ":")
        )
        return hashlib.blake2b(form.encode(), digest_size=16).hexdigest()

    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    cases = [
        (
            {"role": "user", "content": "Ünïcode 🙂 text"},
            ["user", None, "Ünïcode 🙂 text", [], None],
        ),
        ({"role": "user", "name": "ana", "content": "hi"}, ["user", "ana", "hi", [], None]),
        ({"role": "tool", "tool_call_id": "c1", "content": "42"}, ["tool", None, "42", [], "c1"]),
        (
            {"role": "assistant", "content": None, "tool_calls": [call]},
            ["assistant", None, "", [["c1", "f", "{}"]], None],
        ),
        ({"role": "user", "name": 7, "content": "odd name"}, ["user", 7, "odd name", [], None]),
        ({"role": "user", "content": "long " * 2000}, ["user", None, "long " * 2000, [], None]),
        (
            {"role": "system", "content": f"{BLOCK}\n\nBe terse."},
            ["system", None, "Be terse.", [], None],
        ),
    ]
    for message, form in cases:
        assert content_hash(message) == canonical(*form)
        assert content_hash(dict(message)) == canonical(*form)  # again, remembered


def test_content_hash_tells_role_text_and_name_apart():
    base = {"role": "user", "content": "hi"}
    hashes = {
        content_hash(base),
        content_hash({**base, "role": "assistant"}),
        content_hash({**base, "content": "hi!"}),
        content_hash({**base, "name": "ana"}),
    }
    assert len(hashes) == 4


def test_content_hash_is_the_same_for_string_and_single_text_part():
    as_string = {"role": "user", "content": "hello"}
    as_parts = {"role": "user", "content": [{"type": "text", "text": "hello"}]}
    assert content_hash(as_parts) == content_hash(as_string)


def test_a_spoken_reply_is_identified_by_its_audio_id_with_or_without_its_transcript():
    stored = {"role": "assistant", "content": "Biscuit.", "audio": {"id": "audio_1"}}
    resent = {"role": "assistant", "audio": {"id": "audio_1"}}
    assert content_hash(stored) == content_hash(resent)
    assert content_hash(resent) != content_hash({**resent, "audio": {"id": "audio_2"}})
    assert content_hash(resent) != content_hash({"role": "assistant", "content": ""})
    # not a spoken reply: a user's message keeps its text's hash
    said = {"role": "user", "content": "Biscuit."}
    assert content_hash({**said, "audio": {"id": "audio_1"}}) == content_hash(said)


def test_message_keys_number_repeats():
    yes, ok = {"role": "user", "content": "yes"}, {"role": "assistant", "content": "ok"}
    keys = message_keys([yes, ok, yes, ok, yes])
    h_yes, h_ok = content_hash(yes), content_hash(ok)
    assert keys == [f"{h_yes}#1", f"{h_ok}#1", f"{h_yes}#2", f"{h_ok}#2", f"{h_yes}#3"]


def test_store_turn_stores_the_reply_last_and_marks_only_it_partial(store):
    messages = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Tell me a long story"},
    ]
    reply = {"role": "assistant", "content": "Once upon a"}
    assert store_turn(store, turn(messages, reply, partial=True)) == 3
    stored = store.messages("alice")
    assert [(m.role, m.content, m.partial) for m in stored] == [
        ("system", "You are terse.", False),
        ("user", "Tell me a long story", False),
        ("assistant", "Once upon a", True),
    ]


def test_store_turn_stores_resent_history_once(store):
    first = [{"role": "user", "content": "hi"}]
    reply = {"role": "assistant", "content": "hello"}
    second = [*first, reply, {"role": "user", "content": "how are you?"}]
    assert store_turn(store, turn(first, reply)) == 2
    assert store_turn(store, turn(second, {"role": "assistant", "content": "fine"})) == 2
    assert [m.content for m in store.messages("alice")] == ["hi", "hello", "how are you?", "fine"]


def test_store_turn_strips_the_injected_block_from_system_messages(store):
    messages = [
        {"role": "system", "content": f"{BLOCK}\n\nYou are terse."},
        {"role": "user", "content": "hi"},
    ]
    store_turn(store, turn(messages))
    assert [m.content for m in store.messages("alice")] == ["You are terse.", "hi"]


def test_system_and_tool_messages_are_stored_but_not_chunked(store, settings):
    messages = [
        {"role": "system", "content": "You are a weather bot."},
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "Sunny, 24 degrees in Paris"},
    ]
    store_turn(store, turn(messages, {"role": "assistant", "content": "Sunny in Paris."}))
    assert index(store, settings) == 5
    stored = {m.id: m for m in store.messages("alice")}
    chunked = {stored[i].role: texts for i, texts in chunks_by_message(store).items()}
    assert chunked == {"user": ["Weather in Paris?"], "assistant": ["Sunny in Paris."]}
    assert store.count_unindexed() == 0


def test_chunks_never_span_two_messages(store, settings):
    first = " ".join(f"alpha{i}" for i in range(60))  # ~470 characters: several chunks
    second = " ".join(f"omega{i}" for i in range(60))
    messages = [{"role": "user", "content": first}, {"role": "assistant", "content": second}]
    store_turn(store, turn(messages))
    index(store, settings)
    stored = {m.id: m.content for m in store.messages("alice")}
    by_message = chunks_by_message(store)
    assert len(by_message) == 2
    for message_id, texts in by_message.items():
        assert len(texts) > 1
        assert all(text in stored[message_id] for text in texts)
        assert all(len(text) <= settings.chunk_size for text in texts)
    words = {w for texts in by_message.values() for text in texts for w in text.split()}
    assert words == set(first.split()) | set(second.split())


def test_index_pending_with_nothing_pending_does_nothing(store, settings):
    assert index(store, settings) == 0


class RecordingEmbedder(HashEmbedder):
    """Remembers every document text it was asked to embed."""

    def __init__(self):
        self.texts = []

    def embed_documents(self, texts):
        self.texts.extend(texts)
        return super().embed_documents(texts)


def test_a_turn_is_embedded_after_the_tail_of_the_turn_before_it(store, settings):
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "name": "Ana", "content": "Did you go camping in the mountains?"},
    ]
    reply = {"role": "assistant", "name": "Bo", "content": "Yes, last May!"}
    store_turn(store, turn(messages, reply))
    embedder = RecordingEmbedder()
    settings = replace(settings, embedding_context_chars=20)
    index_pending(store, embedder, VectorIndex(store.user_vectors), settings)
    assert embedder.texts == [
        "Ana: Did you go camping in the mountains?",  # the system prompt is not context
        "Ana: ng in the mountains?\nBo: Yes, last May!",
    ]
    # the chunk itself stays verbatim: only its vector carries the context
    assert [texts for texts in chunks_by_message(store).values()][-1] == ["Yes, last May!"]


LONG_QUESTION = "Which of the trails up there did you take, and was the climb to the lake as steep as the ranger told us it would be?"  # noqa: E501


def test_a_users_message_that_says_enough_is_embedded_without_the_turn_before(store, settings):
    messages = [
        {"role": "user", "content": "Did you go camping?"},
        {"role": "assistant", "content": "Yes, in the mountains near Porto."},
        {"role": "user", "content": LONG_QUESTION},
    ]
    reply = {"role": "assistant", "content": "The north one."}
    store_turn(store, turn(messages, reply))
    store_turn(store, turn([*messages, reply, {"role": "user", "content": "And in May?"}]))
    embedder = RecordingEmbedder()
    settings = replace(settings, embedding_context_chars=20, chunk_size=1000)
    index_pending(store, embedder, VectorIndex(store.user_vectors), settings)
    assert embedder.texts == [
        "Did you go camping?",
        "user: Did you go camping?\nYes, in the mountains near Porto.",
        LONG_QUESTION,  # twenty words or more: alone
        "user: told us it would be?\nThe north one.",
        "assistant: The north one.\nAnd in May?",  # short: after the reply it answers
    ]


@pytest.mark.parametrize(
    "messages",
    [
        [{"role": "user", "content": LONG_QUESTION}],
        [
            {"role": "user", "name": "Ana", "content": "Did you go camping?"},
            {"role": "assistant", "name": "Bo", "content": "Yes, last May!"},
            {"role": "tool", "tool_call_id": "t1", "content": "{}"},
            {"role": "user", "name": "Ana", "content": LONG_QUESTION},
        ],
        [
            {"role": "user", "content": "Ana: Did you go camping?"},
            {"role": "assistant", "content": "Bo: Yes, last May!"},
            {"role": "user", "content": f"  Ana: {LONG_QUESTION}  "},
        ],
    ],
)
def test_the_question_recall_embeds_is_the_text_the_writer_embeds(store, settings, messages):
    settings = replace(settings, chunk_size=1000)
    store_turn(store, turn(messages))
    embedder = RecordingEmbedder()
    index_pending(store, embedder, VectorIndex(store.user_vectors), settings)
    assert question_text(messages, settings) == embedder.texts[-1]


def test_no_question_text_when_the_writer_embeds_the_message_otherwise(settings):
    after = [{"role": "assistant", "content": "Yes, last May!"}]
    assert question_text([*after, {"role": "user", "content": "Where?"}], settings) is None
    assert question_text(after, settings) is None  # no user message
    long = {"role": "user", "content": LONG_QUESTION * 3}  # past chunk_size (100 here)
    assert question_text([long], settings) is None


def test_vectors_already_known_are_stored_not_embedded_again(store, settings):
    settings = replace(settings, chunk_size=1000)
    asked = {"role": "user", "content": LONG_QUESTION}
    store_turn(store, turn([asked], {"role": "assistant", "content": "The north one."}))
    question = question_text([asked], settings)
    known_vector = HashEmbedder().embed_query("something else entirely")
    taken = []

    def known(user_id, text):
        taken.append((user_id, text))
        return known_vector if text == question else None

    embedder = RecordingEmbedder()
    index_pending(store, embedder, VectorIndex(store.user_vectors), settings, known=known)

    assert embedder.texts == [f"user: {LONG_QUESTION}\nThe north one."]
    assert taken == [("alice", question), ("alice", embedder.texts[0])]
    ids, rows = store.user_vectors("alice")
    assert rows[0].tolist() == known_vector.tolist()  # the question's chunk, first stored


def test_a_pass_embeds_each_message_after_the_turn_before_it_in_its_own_session(tmp_path):
    """The contexts of a pass's messages are read together (one read a user): each message
    still gets its own session's turn before it, never another user's or session's, and
    what is embedded is what indexing one message a pass embeds."""
    conversations = [  # (user, session, question, reply), stored in this order
        ("alice", "s-1", "Did you go camping?", "Yes, last May!"),
        ("bob", "s-1", "Any news on the flat?", "We signed it."),
        ("alice", "s-2", "And the dog?", "He is fine."),
        ("alice", "s-1", "Where to?", "The lakes."),
    ]
    embedded = []
    for limit in (64, 1):  # one pass for all, then one message a pass
        settings = Settings(db_path=tmp_path / f"{limit}.db", embedding_context_chars=14)
        store = Store(settings.db_path)
        store.ensure_vectors(HashEmbedder.name, HashEmbedder.dim)
        history: dict[tuple[str, str], list[dict[str, str]]] = {}
        for user, session, question, answer in conversations:
            said = history.setdefault((user, session), [])
            said.append({"role": "user", "content": question})
            reply = {"role": "assistant", "content": answer}
            store_turn(store, Turn(user, session, "gpt-4o-mini", tuple(said), reply, 1.7e9))
            said.append(reply)
        embedder = RecordingEmbedder()
        while index_pending(store, embedder, VectorIndex(store.user_vectors), settings, limit):
            pass
        embedded.append(embedder.texts)
    assert embedded[0] == [
        "Did you go camping?",
        "user: ou go camping?\nYes, last May!",
        "Any news on the flat?",
        "user: s on the flat?\nWe signed it.",
        "And the dog?",
        "user: And the dog?\nHe is fine.",
        "assistant: Yes, last May!\nWhere to?",  # alice's s-1, not s-2's "He is fine."
        "user: Where to?\nThe lakes.",
    ]
    assert embedded[1] == embedded[0]


def test_only_a_messages_first_chunk_gets_the_context(store, settings):
    long = " ".join(f"omega{i}" for i in range(60))  # several chunks
    store_turn(
        store,
        turn([{"role": "user", "content": "Hi there"}], {"role": "assistant", "content": long}),
    )
    embedder = RecordingEmbedder()
    index_pending(store, embedder, VectorIndex(store.user_vectors), settings)
    reply_texts = embedder.texts[1:]
    assert len(reply_texts) > 1
    assert reply_texts[0].startswith("user: Hi there\nomega0")
    assert all(not text.startswith("user:") for text in reply_texts[1:])


def test_no_context_is_embedded_when_it_is_turned_off(store, settings):
    store_turn(
        store,
        turn([{"role": "user", "content": "Camping?"}], {"role": "assistant", "content": "Yes."}),
    )
    embedder = RecordingEmbedder()
    settings = replace(settings, embedding_context_chars=0)
    index_pending(store, embedder, VectorIndex(store.user_vectors), settings)
    assert embedder.texts == ["Camping?", "Yes."]


# -- fairness: a large message is indexed a slice per pass ---------------------------------------


def long_text(words=400):
    return " ".join(f"word{i}" for i in range(words))  # ~3,500 characters: ~45 chunks of 100


def message_chunks(store, message_id):
    rows = store.read(
        "SELECT c.position, c.text, "
        "(SELECT count(*) FROM chunk_vectors v WHERE v.chunk_id = c.id) "
        "FROM chunks c WHERE c.message_id = ? ORDER BY c.id",
        (message_id,),
    )
    return [tuple(row) for row in rows]


def indexed(store, message_id):
    return store.read("SELECT indexed FROM messages WHERE id = ?", (message_id,))[0][0] == 1


def test_a_large_message_is_indexed_a_slice_per_pass_and_newer_turns_go_before_its_rest(
    store, settings
):
    settings = replace(settings, index_slice_chunks=4)
    store_turn(store, turn([{"role": "user", "content": "Before it."}]))
    index(store, settings)
    store_turn(store, turn([{"role": "user", "content": long_text()}]))  # the same session
    big_id = store.messages("alice")[-1].id
    expected = chunk_text(long_text(), settings.chunk_size, settings.chunk_overlap)
    assert len(expected) > 20

    assert index(store, settings) == 1  # one slice of the big message
    assert len(message_chunks(store, big_id)) == 4 and not indexed(store, big_id)

    small = Turn(
        "bob", "s-bob", "gpt-4o-mini", ({"role": "user", "content": "Quick one"},), None, 2.0
    )
    store_turn(store, small)
    bob_id = store.messages("bob")[0].id
    assert index(store, settings) == 2  # bob's message first, then the big one's next slice
    assert indexed(store, bob_id) and not indexed(store, big_id)
    assert [text for _, text, _ in message_chunks(store, bob_id)] == ["Quick one"]
    assert len(message_chunks(store, big_id)) == 4 + 3

    while index(store, settings):
        pass
    chunks = message_chunks(store, big_id)
    assert indexed(store, big_id)
    assert chunks == [(position, text, 1) for position, text in enumerate(expected)]


def test_indexing_resumes_a_half_indexed_message_at_its_next_slice(store, settings):
    settings = replace(settings, index_slice_chunks=5)
    store_turn(store, turn([{"role": "user", "content": "Before it."}]))
    store_turn(store, turn([{"role": "assistant", "content": long_text(100)}]))
    embedder = RecordingEmbedder()
    index_pending(store, embedder, VectorIndex(store.user_vectors), settings)
    # one slice, then the process "crashes"; a new one goes on where it stopped
    reopened = Store(settings.db_path)
    reopened.ensure_vectors(HashEmbedder.name, HashEmbedder.dim)
    while index_pending(reopened, embedder, VectorIndex(reopened.user_vectors), settings):
        pass
    message_id = reopened.messages("alice")[-1].id
    positions = [position for position, _, _ in message_chunks(reopened, message_id)]
    expected = chunk_text(long_text(100), settings.chunk_size, settings.chunk_overlap)
    assert positions == list(range(len(expected))) and indexed(reopened, message_id)
    # each chunk embedded once; the turn before it only ahead of the first chunk
    assert embedder.texts == ["Before it.", f"user: Before it.\n{expected[0]}", *expected[1:]]


def test_a_slice_that_is_not_the_next_one_is_not_stored(store, settings):
    store_turn(store, turn([{"role": "user", "content": long_text(30)}]))
    message = store.unindexed_messages()[0]
    vectors = HashEmbedder().embed_documents(["a", "b"])
    assert store.add_chunks(message, ["a", "b"], vectors, start=0, last=False) != []
    assert store.add_chunks(message, ["c"], vectors[:1], start=1, last=True) == []  # 2 there
    assert len(message_chunks(store, message.id)) == 2 and not indexed(store, message.id)


class FailingEmbedder(HashEmbedder):
    """Fails on any text holding `word`, as a model that cannot run would."""

    def __init__(self, word):
        self.word = word

    def embed_documents(self, texts):
        if any(self.word in text for text in texts):
            raise EmbeddingFailed("the model could not run")
        return super().embed_documents(texts)


def test_a_pass_is_stored_whole_or_not_at_all(store, settings):
    """A pass's messages are stored in one transaction once all are embedded: a failure
    part-way leaves every one of them for the next pass, none half-done before it."""
    for n, word in enumerate(["apples", "pears", "plums"]):
        said = {"role": "user", "content": f"I like {word}"}
        store_turn(store, Turn("alice", f"s-{n}", "gpt-4o-mini", (said,), None, 1.7e9 + n))
    vectors = VectorIndex(store.user_vectors)
    assert vectors.count("alice") == 0  # loaded: indexed chunks are appended to it
    with pytest.raises(EmbeddingFailed):
        index_pending(store, FailingEmbedder("plums"), vectors, settings)
    assert chunks_by_message(store) == {} and vectors.count("alice") == 0
    assert store.count_unindexed() == 3
    assert index_pending(store, HashEmbedder(), vectors, settings) == 3
    assert list(chunks_by_message(store).values()) == [
        ["I like apples"],
        ["I like pears"],
        ["I like plums"],
    ]
    assert vectors.count("alice") == 3 and store.count_unindexed() == 0
    found = store.lexical_search("alice", ["pears"], 5, settings.lexical_context_weight)
    assert [store.chunks("alice", [i])[i].text for i, _ in found] == ["I like pears"]


def test_a_slice_that_cannot_be_stored_leaves_the_others_of_its_pass_stored(store, settings):
    store_turn(
        store, turn([{"role": "user", "content": "First"}, {"role": "user", "content": "Second"}])
    )
    first, second = store.messages("alice")
    vectors = np.ones((1, HashEmbedder.dim), dtype=np.float32)
    stored = store.add_slices(
        [
            ChunkSlice(first, ["First"], vectors),
            ChunkSlice(second, ["Second, later part"], vectors, start=1),  # not the next one
            ChunkSlice(second, ["Second"], vectors),
        ]
    )
    assert [len(ids) for ids in stored] == [1, 0, 1]
    assert list(chunks_by_message(store).values()) == [["First"], ["Second"]]
    assert store.count_unindexed() == 0
