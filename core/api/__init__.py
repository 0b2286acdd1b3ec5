"""API plumbing wired project-wide in settings: pagination, errors, parsers, schema."""
