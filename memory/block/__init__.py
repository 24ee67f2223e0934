"""Steps 2, 4 and 5: measure the request, size the MOIM block, render and inject it.

`tokens` counts (tiktoken) and knows context windows; `budget` picks the tier from the fill
ratio; `excerpts` cuts recalled chunks to the tier's size; `render` writes the block, escapes
stored text so it cannot close or forge it, and places it in the request.
"""
