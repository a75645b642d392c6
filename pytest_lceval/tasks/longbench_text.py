"""What the 100-LongBench tasks say to the model (the prompts of the paper's appendix A.3, with
the answer formats made explicit) and how their answers are read."""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence

_NUMBER = re.compile(r"\d+")
_YES_NO = re.compile(r"\b(yes|no)\b")
_LIST = re.compile(r"\[([\d,\s]+)\]")
_LETTER = re.compile(r"\b([A-D])\b")
LETTERS = "ABCD"

KV_PROMPT = (
    "There are some passages below sourced from many different fields.\n\n{context}\n\n"
    "Given several key-value pairs in these passages, you need to find the value of the key. "
    "Read the question related with these key-value pairs and give the correct answer. "
    'What is the value of the key "{key}"?')
STARS_PROMPT = (
    "There are some passages below sourced from many different fields.\n\n{context}\n\n"
    "Only output the results without any explanation. Read the following question and give "
    "the correct answer: The little penguin counted stars in four of the passages above. "
    "Which option lists the counts in the order they appear?\n{options}")
RETRIEVAL_PROMPT = (
    "Here are some passages from many different fields, along with a summarization. Please "
    "determine which passage the summarization is from.\n\n{context}\n\n"
    "The following is a summarization.\n\n{summary}\n\nPlease enter the number of the passage "
    'that the summarization is from. The answer format must be like "Passage 1", '
    '"Passage 2", etc.')
COUNT_PROMPT = (
    "There are some paragraphs below sourced from many different fields. Some of them may be "
    "duplicates. Please carefully read these paragraphs and determine how many unique "
    "paragraphs there are after removing duplicates. In other words, how many non-repeating "
    "paragraphs are there in total?\n\n{context}\n\nPlease enter the final count of unique "
    "paragraphs after removing duplicates. The output format should only contain the number, "
    "such as 1, 2, 3, and so on.")
QA_PROMPT = (
    "Answer the question based on the given passages. Only give me the answer and do not "
    "output any other words.\n\nThe following are given passages and these passages are from "
    "many different fields.\n\n{context}\n\nAnswer the question based on the given passages "
    "following the instruction:\nAnswer the question related to Passage {number}.\n\n"
    "Question: {question}?\nOnly answer yes or no and do not output any other words.")
QA_PROBE_PROMPT = (
    "Answer the question with yes or no. Only give me the answer and do not output any other "
    "words.\n\nQuestion: {question}?")


def first_number(output: str) -> int | None:
    """The first whole number of an answer (a passage number, a count)."""
    match = _NUMBER.search(output)
    return int(match.group()) if match else None


def yes_or_no(output: str) -> str | None:
    """The first 'yes' or 'no' of an answer."""
    answer = _YES_NO.search(output.lower())
    return answer.group(1) if answer else None


def star_options(rng: random.Random, counts: list[int]) -> list[list[int]]:
    """The correct sequence and three distractors (two numbers swapped, one value altered, the
    order reversed or rotated), all distinct, in a random order."""
    options = [counts]
    makers: list[Callable[[], list[int]]] = [
        lambda: _swapped(rng, counts), lambda: _altered(rng, counts),
        lambda: counts[::-1], lambda: counts[1:] + counts[:1], lambda: _swapped(rng, counts),
        lambda: _altered(rng, counts)]
    for make in makers * 4:
        candidate = make()
        if candidate not in options:
            options.append(candidate)
        if len(options) == 4:
            break
    rng.shuffle(options)
    return options


def _swapped(rng: random.Random, counts: list[int]) -> list[int]:
    i, j = rng.sample(range(len(counts)), 2)
    swapped = list(counts)
    swapped[i], swapped[j] = swapped[j], swapped[i]
    return swapped


def _altered(rng: random.Random, counts: list[int]) -> list[int]:
    altered = list(counts)
    altered[rng.randrange(len(counts))] = rng.choice([n for n in range(1, 100) if n not in counts])
    return altered


def listing(counts: Sequence[int]) -> str:
    """[38, 10, 90, 42]"""
    return "[" + ", ".join(map(str, counts)) + "]"


def chosen_option(output: str, options: Sequence[str]) -> str | None:
    """The option an answer picks: a bracketed sequence if it writes one, else its first
    standalone letter A-D."""
    written = _LIST.search(output)
    if written:
        numbers = [int(n) for n in _NUMBER.findall(written.group(1))]
        written_listing = listing(numbers)
        return LETTERS[options.index(written_listing)] if written_listing in options else "?"
    letter = _LETTER.search(output)
    return letter.group(1) if letter else None
