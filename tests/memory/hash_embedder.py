"""A deterministic embedder behind the real `Embedder` interface, for unit tests of ranking.

STYLE.md point 17 allows one (cf. llm's EmbedDemo); every end-to-end test runs the real model.
"""

import hashlib
import re

import numpy as np


class HashEmbedder:
    """Bag of words hashed into 8 dimensions, L2-normalised: same text, same vector."""

    name = "test/hash-8"
    dim = 8

    def embed_documents(self, texts):
        return np.array([self.embed_query(t) for t in texts], dtype=np.float32).reshape(-1, 8)

    def embed_query(self, text, owner=""):
        vector = np.full(8, 0.01, dtype=np.float32)
        for word in re.findall(r"\w+", text.lower()):
            vector[hashlib.blake2b(word.encode(), digest_size=1).digest()[0] % 8] += 1.0
        return vector / np.linalg.norm(vector)
