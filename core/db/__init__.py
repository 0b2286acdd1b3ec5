"""Database backends (the embedded default's SQLite, wired in config/settings.py)."""
