"""The store: everything that reads or writes SQLite, and nothing else does.

`store.Store` (messages, chunks, the search indexes), `fact_rows` (facts and their history),
`marks` (what consolidation has seen), `transfer` (export/import lines), `fts` and
`vector_table` (the FTS5 and sqlite-vec tables), `fts_upkeep`, `migrations`, `database`
(connections, WAL, pragmas) and `journal` (turns received but not yet stored). Every query
takes a `user_id` and filters on it in the SQL. This package is the seam a second backend
implements.
"""
