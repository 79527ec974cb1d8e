"""Datasets: the LoCoMo loader and a seeded synthetic conversation generator."""

from .locomo import DatasetError, load_locomo
from .synthetic import generate_conversations, write_json

__all__ = ["DatasetError", "generate_conversations", "load_locomo", "write_json"]
