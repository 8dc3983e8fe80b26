"""Emit stage: objects -> bytes (JSON lines or a YAML stream) and files written atomically."""
