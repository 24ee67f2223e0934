"""Step 7, remember: turn a finished exchange into stored messages, chunks and index rows.

`turns` stores a turn's new messages once each (content hash within a session) and indexes
what is not yet indexed; `chunking` cuts a message into chunks that never span two messages.
"""
