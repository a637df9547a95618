"""The repository's own development tools (not installed with tablectl)."""
