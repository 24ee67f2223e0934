"""Step 3, recall: find the stored chunks that answer the last user turn.

`retrieval` runs the dense (`vectors`, a RAM matrix over sqlite-vec) and lexical (FTS5)
searches; `ranking` fuses their scores, applies bonuses and the low-confidence floor;
`when` reads the dates a question names.
"""
