"""Embedding: the models (offline default, OpenAI) and the work of embedding
what a batch writes (truncation, retries, the cache)."""
