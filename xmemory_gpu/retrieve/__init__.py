"""Retrieval: Stage I coverage selection, Stage II episode priority, the peers' strategies, all
behind the batched ``Retriever.search``."""

from .result import RetrievalResult, RetrievedUnit
from .retriever import STRATEGIES, Retriever

__all__ = ["STRATEGIES", "RetrievalResult", "RetrievedUnit", "Retriever"]
