"""memory/embedding.py with the real bundled model: offline load, normalised rows, input order."""

import numpy as np


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


def test_a_text_embedded_as_a_query_is_not_embedded_again_as_a_document(embedder, monkeypatch):
    asked = "Which trail did we take to the lake last June?"
    query = embedder.embed_query(asked)
    batches = []
    real = embedder._embed_batch
    spy = lambda texts: batches.append(texts) or real(texts)  # noqa: E731
    monkeypatch.setattr(embedder, "_embed_batch", spy)

    rows = embedder.embed_documents(["A reply about the lake trail", asked])

    assert batches == [["A reply about the lake trail"]]
    assert np.array_equal(rows[1], query)
    assert np.allclose(rows[1], real([asked])[0], atol=1e-4)  # the same vector a batch gives


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
    assert np.allclose(rows, embedder.embed_documents([text, "The old sofa"]), atol=1e-6)
    assert [w.word for w in found[1]] == ["The", "old", "sofa"]
