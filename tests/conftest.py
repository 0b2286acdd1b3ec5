"""Shared fixtures. Tiers that need a real service fail in CI (CI=true) and skip elsewhere."""
