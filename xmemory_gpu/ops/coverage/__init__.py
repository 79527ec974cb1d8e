"""coverage kernel family."""
