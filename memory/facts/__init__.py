"""The semantic tier: typed facts about the user, kept without an LLM by default.

`rules` validates and upserts facts (supersession, pins, policies); `capture` finds facts in
what the user says, using the phrases in `lexicon` and the patterns in `statements`;
`consolidation` applies an optional LLM job's operations through a deterministic gate.
"""
