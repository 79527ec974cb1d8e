"""Datasets: the LoCoMo loader, role chats (an app's chats, OpenAI's and mem0's shapes) and a seeded
synthetic conversation generator."""

from .locomo import DatasetError, load_locomo
from .role_chats import read_chats
from .synthetic import generate_conversations, write_json

__all__ = ["DatasetError", "generate_conversations", "load_locomo", "read_chats", "write_json"]
