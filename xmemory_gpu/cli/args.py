"""Argument types shared by the subcommands: counts and sizes with their lower bound checked by
argparse, so a bad value is a one-line usage error naming the option."""

from __future__ import annotations

import argparse
from collections.abc import Callable


def integer(minimum: int) -> Callable[[str], int]:
    """An argparse type: an integer >= ``minimum``."""

    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {text!r}") from None
        if v < minimum:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {v}")
        return v

    parse.__name__ = f"integer>={minimum}"
    return parse


def resident_bytes(text: str) -> int | str | None:
    """An argparse type for ``--max-resident-bytes``: bytes (an integer >= 0), ``auto`` (half of the
    RAM) or ``all`` (every memory resident, loaded at start: None)."""
    if text in ("auto", "all"):
        return None if text == "all" else text
    try:
        return integer(0)(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, 'auto' or 'all', got {text!r}") from None


def text(what: str) -> Callable[[str], str]:
    """An argparse type: non-empty text that is valid Unicode (a command line with invalid UTF-8
    bytes arrives as lone surrogates, which no tokenizer accepts)."""

    def parse(value: str) -> str:
        if not value.strip():
            raise argparse.ArgumentTypeError(f"expected a non-empty {what}")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise argparse.ArgumentTypeError(f"the {what} is not valid UTF-8 text") from None
        return value

    parse.__name__ = what
    return parse
