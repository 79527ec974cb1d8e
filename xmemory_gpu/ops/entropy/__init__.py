"""entropy kernel family."""
