"""Batch sizing: how a global batch is split across workers (pure numpy)."""
