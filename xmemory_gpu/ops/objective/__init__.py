"""objective kernel family."""
