"""Prompts and JSON schemas of the LLM builder, written for the intent the paper describes:
boundary detection over a window of messages, an episodic memory per episode (title,
third-person content with absolute dates, timestamp), persistent self-contained semantic facts
with their source messages, and a one-sentence theme summary."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class Boundaries(BaseModel):
    model_config = ConfigDict(json_schema_extra={"example": {"starts": [1, 6]}})
    starts: list[int]


class EpisodeNote(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "example": {
                "title": "Alice adopts a dog",
                "content": "On 2023-05-07 Alice told Bob ...",
                "timestamp": "2023-05-07",
            }
        }
    )
    title: str = Field(min_length=1, max_length=200)
    content: str = Field(min_length=1)
    timestamp: str = Field(pattern=r"^\d{4}-\d{2}-\d{2}$")


class Fact(BaseModel):
    text: str = Field(min_length=3)
    sources: list[int] = Field(min_length=1)


class Facts(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "example": {"facts": [{"text": "Alice adopted a dog named Rex in May 2023.", "sources": [2]}]}
        }
    )
    facts: list[Fact]


class ThemeSummary(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={"example": {"summary": "Alice's dog Rex and caring for him."}}
    )
    summary: str = Field(min_length=1, max_length=400)


BOUNDARY = """You split a conversation into episodes: runs of consecutive messages about one topic or event.
Messages from {date}:
{messages}

Which message numbers start a new episode? Message 1 always does. An episode usually has 4 to 12 messages.
Answer with JSON only, like {{"starts": [1, 6]}}."""

EPISODE = """Write an episodic memory of these messages between {speakers}, sent on {date}.
Messages:
{messages}

Give a short title, and a third-person account of what happened and what was said. Write dates as absolute
dates: resolve "yesterday", "last week", "next month" and the like against {date}.
Answer with JSON only: {{"title": "...", "content": "...", "timestamp": "{date}"}}"""

FACTS = """Extract the lasting facts from these messages between {speakers}, sent on {date}.
Messages:
{messages}

A fact names people instead of using pronouns, uses absolute dates (resolve relative times against {date}),
states one thing, and stays true after this conversation: who people are, what they like, own, did, or plan.
Skip greetings, reactions and small talk. Give the numbers of the messages each fact comes from.
Answer with JSON only: {{"facts": [{{"text": "...", "sources": [1]}}]}}"""

THEME = """These statements form one theme of a memory about {speakers}:
{statements}

Write one sentence that names the theme and what it covers.
Answer with JSON only: {{"summary": "..."}}"""
