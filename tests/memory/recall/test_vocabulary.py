"""memory/recall/vocabulary.py: a question's words the user never said, and the user's own."""

import numpy as np

from memory import MemoryLayer, Settings, Turn
from memory.embedding import WordVector
from memory.recall.vocabulary import Vocabulary, vocabulary_terms

NOW = 1_700_000_000.0


def _layer(tmp_path, embedder, said):
    """A layer over a fresh store where each (user, text) was said in a session of its own."""
    layer = MemoryLayer(Settings(db_path=tmp_path / "moim.db"), lambda _: embedder)
    for number, (user_id, text) in enumerate(said):
        asked = {"role": "user", "content": text}
        layer.remember(Turn(user_id, f"s{number}", "gpt-4o-mini", (asked,), None, NOW))
    return layer


def _expand(layer, user_id, question):
    _, words = layer.embedder.embed_query_words(question)
    return layer.vocabulary.expansions(user_id, words, 0.5, 2)


def test_a_chunk_brings_each_alphabetic_word_of_its_own_text_once():
    vector = np.ones(4, dtype=np.float32) / 2
    words = [
        WordVector("context", 0, vector),  # before the chunk's own text: not its word
        WordVector("Cooking", 10, vector),
        WordVector("the", 18, vector),  # a stopword
        WordVector("cooked", 22, vector),  # the stem of "Cooking" again
        WordVector("42", 29, vector),  # not alphabetic
        WordVector("Años", 32, vector),
    ]
    terms = vocabulary_terms(words, start=10)
    assert [(t.stem, t.word) for t in terms] == [("cook", "cooking"), ("año", "años")]
    assert terms[0].vector == bytes([127] * 4)  # int8, scaled to the largest component


def test_each_terms_bytes_are_its_own_vector_in_int8(embedder):
    # The terms are encoded in one matrix; each row must be what the word's vector alone
    # gives (scaled by its own largest component), as the vocabulary rows always were.
    from memory.embedding import int8_rows

    text = "Ana's kayak, the red one, stays at the marina in Porto until the paddle is fixed"
    _, words = embedder.embed_query_words(text)
    terms = vocabulary_terms(words)
    first = {}
    for word in words:
        first.setdefault(word.word.lower(), word)
    assert len(terms) >= 8
    for term in terms:
        alone = int8_rows(first[term.word].vector[None, :])[0]
        assert term.vector == alone.tobytes()


def test_a_word_the_user_never_said_brings_the_users_nearest_word(tmp_path, embedder):
    layer = _layer(
        tmp_path,
        embedder,
        [
            ("nina", "I ordered a ThinkPad X1 Carbon laptop for work."),
            ("nina", "My mum is coming to stay with us in June."),
        ],
    )
    assert "laptop" in _expand(layer, "nina", "Which notebook did I end up buying?")
    assert "mum" in _expand(layer, "nina", "When is my mother visiting?")


def test_a_question_in_the_users_own_words_is_not_expanded(tmp_path, embedder):
    layer = _layer(tmp_path, embedder, [("nina", "I ordered a ThinkPad laptop for work.")])
    assert _expand(layer, "nina", "Which laptop did I order for work?") == []


def test_only_the_users_own_words_are_neighbours(tmp_path, embedder):
    layer = _layer(
        tmp_path,
        embedder,
        [
            ("bob", "My laptop is a ThinkPad X1 Carbon with 32 GB of RAM."),
            ("nina", "We adopted a greyhound called Biscuit last spring."),
        ],
    )
    expanded = _expand(layer, "nina", "Which notebook did I end up buying?")
    said = {"adopted", "greyhound", "called", "biscuit", "last", "spring"}
    assert set(expanded) <= said
    assert "laptop" in _expand(layer, "bob", "Which notebook did I end up buying?")


def test_forgetting_a_user_forgets_their_vocabulary(tmp_path, embedder):
    layer = _layer(tmp_path, embedder, [("nina", "I ordered a ThinkPad X1 Carbon laptop.")])
    assert "laptop" in _expand(layer, "nina", "Which notebook did I end up buying?")
    layer.forget("nina")
    assert layer.store.vocabulary("nina") == []
    assert _expand(layer, "nina", "Which notebook did I end up buying?") == []


def test_the_cache_follows_new_words(tmp_path, embedder):
    layer = _layer(tmp_path, embedder, [("nina", "We adopted a greyhound last spring.")])
    vocabulary = Vocabulary(layer.store)
    _, words = layer.embedder.embed_query_words("Which notebook did I end up buying?")
    assert "laptop" not in vocabulary.expansions("nina", words, 0.5, 2)
    asked = {"role": "user", "content": "I ordered a ThinkPad X1 Carbon laptop."}
    layer.remember(Turn("nina", "s9", "gpt-4o-mini", (asked,), None, NOW))
    assert "laptop" in vocabulary.expansions("nina", words, 0.5, 2)


def test_the_vocabulary_read_beforehand_expands_as_the_one_read_then(tmp_path, embedder):
    # Recall reads it on another thread while the question is embedded (retrieval.py).
    layer = _layer(tmp_path, embedder, [("nina", "I ordered a ThinkPad X1 Carbon laptop.")])
    known = layer.vocabulary.known("nina")
    _, words = layer.embedder.embed_query_words("Which notebook did I end up buying?")
    given = layer.vocabulary.expansions("nina", words, 0.5, 2, known)
    assert given == layer.vocabulary.expansions("nina", words, 0.5, 2) and "laptop" in given


def test_the_cache_keeps_within_its_bytes_dropping_the_least_recently_used(tmp_path, embedder):
    said = [
        ("ana", "I ordered a ThinkPad X1 Carbon laptop for the new studio."),
        ("bo", "We adopted a greyhound last spring and walk her by the canal."),
        ("cy", "My mum moved upstairs to the first floor flat in March."),
    ]
    layer = _layer(tmp_path, embedder, said)
    one = Vocabulary(layer.store).known("ana").matrix.nbytes
    vocabulary = Vocabulary(layer.store, max_bytes=2 * one + one // 2)  # about two users
    for user_id, _ in said:
        vocabulary.known(user_id)
    assert 0 < vocabulary.cached_bytes <= 2 * one + one // 2  # the latest kept, not all three
    _, words = layer.embedder.embed_query_words("Which notebook did I end up buying?")
    assert "laptop" in vocabulary.expansions("ana", words, 0.5, 2)  # read again: the same
    layer.forget("ana")
    vocabulary.drop("ana")
    vocabulary.drop("bo")
    vocabulary.drop("cy")
    assert vocabulary.cached_bytes == 0


def test_a_user_larger_than_the_whole_cache_is_still_kept_while_in_use(tmp_path, embedder):
    layer = _layer(tmp_path, embedder, [("nina", "I ordered a ThinkPad X1 Carbon laptop.")])
    vocabulary = Vocabulary(layer.store, max_bytes=1)
    known = vocabulary.known("nina")
    assert known.words and vocabulary.cached_bytes == known.matrix.nbytes
