"""memory/embedding.py with the real bundled model: offline load, normalised rows, input order."""

import numpy as np

from memory.embedding import FastEmbedder, WordEmbedder, gives_words
from memory.question_vectors import QuestionVectors


def test_bundled_model_embeds_normalised_384_dimension_rows(embedder):
    rows = embedder.embed_documents(["My dog is called Rex", "I like skiing"])
    assert rows.shape == (2, 384)
    assert np.allclose(np.linalg.norm(rows, axis=1), 1.0, atol=1e-5)


def test_rows_come_back_in_input_order_although_batches_run_by_length(embedder):
    long = "We spent the whole summer hiking in the Alps with friends and a very patient dog"
    short = "Tea, please"
    together = embedder.embed_documents([long, short, long])
    alone = np.vstack([embedder.embed_documents([long]), embedder.embed_documents([short])])
    assert np.allclose(together[0], alone[0], atol=1e-6)
    assert np.allclose(together[1], alone[1], atol=1e-6)
    assert np.allclose(together[2], alone[0], atol=1e-6)


def test_a_query_about_a_text_is_nearer_to_it_than_to_an_unrelated_one(embedder):
    dog, ski = embedder.embed_documents(["My dog is called Rex", "I like skiing in winter"])
    query = embedder.embed_query("What is my dog's name?")
    assert float(query @ dog) > float(query @ ski)


def test_a_question_vector_equals_the_same_text_embedded_fresh_as_a_document(embedder):
    # The writer stores recall's question vector for the user's message instead of embedding
    # it again: that is only the same index if the two are the same vector, bit for bit.
    asked = "Which trail did we take to the lake last June?"
    query = embedder.embed_query(asked)
    fresh = embedder.embed_documents(["A reply about the lake trail", asked])  # no cache
    assert np.array_equal(fresh[1], query)


def test_question_vectors_are_taken_once_per_user_and_text():
    held = QuestionVectors()
    held.put("ana", "kayak?", np.ones(3, dtype=np.float32))
    assert held.take("bob", "kayak?") is None  # another user's text is not theirs
    assert held.take("ana", "kayak?").tolist() == [1.0, 1.0, 1.0]
    assert held.take("ana", "kayak?") is None  # let go once taken


def test_question_vectors_keep_the_newest_within_their_size():
    held = QuestionVectors(size=2)
    for n, text in enumerate(["one", "two", "three"]):
        held.put("ana", text, np.full(3, n, dtype=np.float32))
    assert len(held) == 2
    assert held.take("ana", "one") is None
    assert held.take("ana", "three").tolist() == [2.0, 2.0, 2.0]


def test_dropping_a_user_lets_go_of_their_question_vectors_only():
    held = QuestionVectors()
    held.put("ana", "kayak?", np.ones(3, dtype=np.float32))
    held.put("bob", "kayak?", np.ones(3, dtype=np.float32))
    held.drop("ana")
    assert held.take("ana", "kayak?") is None
    assert held.take("bob", "kayak?") is not None


def test_a_noting_embedder_holds_each_question_it_embeds_for_its_user(embedder):
    held = QuestionVectors()
    noting = held.noting(embedder, "ana")
    vector = noting.embed_query("Where is the kayak?")
    assert (noting.name, noting.dim) == (embedder.name, embedder.dim)
    assert np.array_equal(held.take("ana", "Where is the kayak?"), vector)
    assert len(noting.embed_documents(["a document"])) == 1 and len(held) == 0


def test_a_noting_embedder_given_a_text_holds_only_that_texts_vector(embedder):
    held = QuestionVectors()
    noting = held.noting(embedder, "ana", only="Where is the kayak?")
    noting.embed_query("What about the paddle?")
    noting.embed_query_words("And the berth?")
    assert len(held) == 0
    vector, words = noting.embed_query_words("Where is the kayak?")
    assert [w.word for w in held.take_words("ana", "Where is the kayak?")] == [
        w.word for w in words
    ]
    assert np.array_equal(held.take("ana", "Where is the kayak?"), vector)


def test_a_query_is_embedded_exactly_as_fastembeds_query_embed_does(embedder):
    # moim runs the bundled model's query steps itself (memory/embedding.py, `_run_one`);
    # this pins them to fastembed's: same tokens, same pooling, the same vector to the bit.
    texts = [
        "What did we decide last month about the kayak and the berth?",
        "",
        "Ünïcödé, 中文 and 😀 with\ttabs\nand lines",
        "word " * 400,  # past the tokenizer's 256 tokens: truncated the same way
    ]
    for text in texts:
        ours = embedder.embed_query(text)
        theirs = np.asarray(next(iter(embedder._model.query_embed([text]))), dtype=np.float32)
        theirs = theirs / np.linalg.norm(theirs)
        assert np.array_equal(ours, theirs), text[:40]


def test_a_texts_word_vectors_come_from_the_run_that_embeds_it(embedder):
    text = "Who is taking our old settee, Dr. Ana?"
    vector, words = embedder.embed_query_words(text)
    assert np.array_equal(vector, embedder._embed_query(text))  # the same vector, one run
    assert [(w.word, w.start) for w in words] == [
        ("Who", 0),
        ("is", 4),
        ("taking", 7),
        ("our", 14),
        ("old", 18),
        ("settee", 22),
        (",", 28),
        ("Dr", 30),
        (".", 32),
        ("Ana", 34),
        ("?", 37),
    ]
    assert all(np.isclose(np.linalg.norm(w.vector), 1.0, atol=1e-5) for w in words)
    rows, found = embedder.embed_documents_words([text, "The old sofa"])
    assert np.allclose(rows, embedder.embed_documents([text, "The old sofa"]), atol=1e-4)
    assert [w.word for w in found[1]] == ["The", "old", "sofa"]


def test_held_question_words_give_the_writer_the_same_vocabulary_rows(embedder):
    # QuestionVectors keeps a question's words as int8 rows (a quarter of the RAM); the
    # writer makes vocabulary rows of them, which must be the bytes the model's own give.
    from memory.recall.vocabulary import vocabulary_terms

    text = "Which trails around the glacier lake did Ana and Bruno hike last summer, and why?"
    vector, words = embedder.embed_query_words(text)
    held = QuestionVectors()
    held.put("ana", text, vector, words)
    back = held.take_words("ana", text)
    assert [(w.word, w.start) for w in back] == [(w.word, w.start) for w in words]
    assert all(float(a.vector @ b.vector) > 0.9999 for a, b in zip(back, words, strict=True))
    assert vocabulary_terms(back) == vocabulary_terms(words)
    assert vocabulary_terms(back, 40) == vocabulary_terms(words, 40)


def test_question_words_held_only_as_the_vocabularys_give_the_same_vocabulary_rows(embedder):
    # The layer's QuestionVectors holds only words `vocabulary_terms` can keep, by where they
    # are in the text: the writer's rows are the same at every start of the chunk's own text.
    from memory.recall.vocabulary import vocabulary_terms, vocabulary_word

    text = "Ana: Which trails, Ana's or Bruno's, did the 3 of us hike in the glacier's valley?"
    vector, words = embedder.embed_query_words(text)
    held = QuestionVectors(keep=vocabulary_word)
    held.put("ana", text, vector, words)
    back = held.take_words("ana", text)
    assert 0 < len(back) < len(words) and all(vocabulary_word(w.word) for w in back)
    for start in range(len(text) + 1):
        assert vocabulary_terms(back, start) == vocabulary_terms(words, start), start


def test_words_that_are_not_the_texts_own_characters_are_not_held(embedder):
    vector, words = embedder.embed_query_words("the old sofa")
    held = QuestionVectors()
    held.put("ana", "the old settee", vector, words)  # words of another text
    assert held.take_words("ana", "the old settee") is None
    assert np.array_equal(held.take("ana", "the old settee"), vector)


class PlainEmbedder:
    name, dim = "plain", 2

    def embed_documents(self, texts):
        return np.ones((len(texts), 2), dtype=np.float32)

    def embed_query(self, text, owner=""):
        return np.ones(2, dtype=np.float32)


class WordsEmbedder(PlainEmbedder):
    def embed_query_words(self, text, owner=""):
        return self.embed_query(text), ()

    def embed_documents_words(self, texts):
        return self.embed_documents(texts), [() for _ in texts]


def test_gives_words_answers_as_the_protocol_check_does(embedder):
    noted = QuestionVectors().noting(embedder, "alice")  # the class recall embeds with
    for candidate in (embedder, noted, PlainEmbedder(), WordsEmbedder(), None, "text"):
        for _ in range(2):  # the first answer, then the remembered one
            assert gives_words(candidate) == isinstance(candidate, WordEmbedder)
    assert gives_words(noted) and not gives_words(PlainEmbedder())


def test_vectors_are_the_same_with_onnxruntimes_memory_arena_as_without(embedder):
    # One text a run (the default): the session keeps its activations in onnxruntime's
    # arena, shared by the runs of several threads at once (memory/embedding.py). Batches of
    # texts: no arena. Each text's vector and word vectors are the same to the bit either way.
    from concurrent.futures import ThreadPoolExecutor

    batches = FastEmbedder(batch_size=2)
    session = embedder._model.model.model.get_session_options()
    assert session.enable_cpu_mem_arena
    assert not batches._model.model.model.get_session_options().enable_cpu_mem_arena
    texts = [f"the kayak {'and the red paddle ' * n}at the marina" for n in range(0, 120, 7)]
    with ThreadPoolExecutor(6) as pool:  # queries run at once; documents take turns
        asked = list(pool.map(embedder.embed_query_words, texts * 2))
        stored = list(pool.map(lambda text: embedder.embed_documents_words([text]), texts))
    for text, (vector, words) in zip(texts * 2, asked, strict=True):
        fresh, fresh_words = batches.embed_query_words(text)
        assert np.array_equal(vector, fresh), text[:40]
        assert [(w.word, w.start) for w in words] == [(w.word, w.start) for w in fresh_words]
        pairs = zip(words, fresh_words, strict=True)
        assert all(np.array_equal(a.vector, b.vector) for a, b in pairs)
    for text, (rows, _) in zip(texts, stored, strict=True):
        assert np.array_equal(rows, batches.embed_documents_words([text])[0]), text[:40]


def test_a_long_query_is_embedded_again_rather_than_held_as_a_cache_key(embedder):
    """The query cache (512 texts) is keyed by the text: a pasted document of megabytes as the
    question was held whole until 512 others pushed it out. A short one is still held."""
    pasted, short = "the kayak log line " * 1_000, "where is my kayak?"
    for embed in (embedder.embed_query, embedder.embed_query_words):
        before = embedder.texts["query"]
        embed(pasted)
        embed(pasted)
        embed(short)
        embed(short)
        assert embedder.texts["query"] - before == 3
        embedder.forget_queries()


def test_a_cached_question_answers_only_the_user_who_asked_it(embedder):
    """One cache for all users told a user, by how long a request took (and its
    `x-memory-overhead-ms`), that someone else had just asked the same words."""
    text = "what did the oncologist say about my scan?"
    before = embedder.texts["query"]
    ana = QuestionVectors().noting(embedder, "ana")
    bob = QuestionVectors().noting(embedder, "bob")
    for embed in (ana.embed_query, ana.embed_query_words):
        embed(text)
    assert embedder.texts["query"] - before <= 2  # ana's second asking is cached
    asked = embedder.texts["query"]
    first = bob.embed_query_words(text)[0]
    assert embedder.texts["query"] - asked == 1  # bob's is embedded: not ana's cache
    bob.embed_query(text)
    assert embedder.texts["query"] - asked == 1  # bob's own asking is cached for bob
    assert np.array_equal(first, ana.embed_query(text))  # the same vector either way
    embedder.forget_queries()
