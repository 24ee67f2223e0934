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
    assert np.allclose(together[0], alone[0], atol=1e-4)
    assert np.allclose(together[1], alone[1], atol=1e-4)
    assert np.allclose(together[2], alone[0], atol=1e-4)


def test_a_query_about_a_text_is_nearer_to_it_than_to_an_unrelated_one(embedder):
    dog, ski = embedder.embed_documents(["My dog is called Rex", "I like skiing in winter"])
    query = embedder.embed_query("What is my dog's name?")
    assert float(query @ dog) > float(query @ ski)
