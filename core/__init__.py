"""Project-wide utilities shared by every app (NetBox's `utilities/`); imports no other app."""
