"""The self-made offline Task Haystack pack: procedurally generated classification tasks.

Ten tasks, each with a distinct rule a model can learn from demonstrations (parity, magnitude,
word sentiment, topic, punctuation, first letter, length, arithmetic, colour, language), written
in the Lifelong-ICL format so the same code reads them and the public data. Nothing is copied
from a public data set. Regenerate (byte-identical; by default into the package's own
``fixtures/llicl_offline``, the pack the suite reads) with

    python -m pytest_lceval.benchmarks.task_haystack.offline_pack [DEST]
"""

from __future__ import annotations

import json
import random
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ...foundation.grid import case_seed
from .config import OFFLINE_PACK
from .data import CONFIG_FILE, MAX_RESAMPLES, TEST_FILE, train_file

ROUNDS = 16
"""Rounds of one example per class in each train file (the public data has at least 16)."""
TEST_ROWS = 100
SEED = 20240722

Make = Callable[[random.Random, str], str]
"""Builds one input text of the given label."""

_POSITIVE = ["wonderful", "delightful", "excellent", "charming", "superb", "lovely", "brilliant",
             "pleasant", "gorgeous", "cheerful"]
_NEGATIVE = ["dreadful", "awful", "terrible", "boring", "horrible", "dismal", "clumsy",
             "tedious", "miserable", "shabby"]
_NOUNS = ["movie", "meal", "hotel", "concert", "book", "trip", "class", "game", "show", "party"]
_TOPICS = {
    "sports": ["goal", "referee", "stadium", "coach", "match", "league", "striker", "tennis"],
    "food": ["soup", "bread", "recipe", "oven", "cheese", "spices", "noodles", "dessert"],
    "weather": ["rain", "storm", "forecast", "sunshine", "fog", "thunder", "snowfall", "breeze"],
}
_SUBJECTS = ["the teacher", "my neighbour", "a farmer", "the pilot", "our cat", "the baker",
             "a student", "the mayor"]
_VERBS = ["visited", "painted", "found", "cleaned", "opened", "watched", "carried", "fixed"]
_OBJECTS = ["the garden", "a window", "the old bridge", "a red box", "the library", "a boat",
            "the market", "a letter"]
_VOWEL_WORDS = ["apple", "engine", "island", "orange", "umbrella", "eagle", "igloo", "otter",
                "acorn", "elbow", "ink", "ocean"]
_CONSONANT_WORDS = ["table", "garden", "pencil", "river", "candle", "mountain", "basket",
                    "window", "dragon", "forest", "lemon", "tiger"]
_COLOURS = {
    "yellow": ["banana", "lemon", "sunflower", "canary", "butter", "corn"],
    "green": ["grass", "lime", "frog", "spinach", "cucumber", "clover"],
    "blue": ["sky", "sapphire", "blueberry", "ocean", "denim", "cornflower"],
    "red": ["tomato", "strawberry", "cherry", "ruby", "firetruck", "ladybird"],
}
_ENGLISH = ["house", "water", "friend", "morning", "bread", "window", "little", "green", "happy",
            "street", "dog", "book"]
_SPANISH = ["casa", "agua", "amigo", "mañana", "pan", "ventana", "pequeño", "verde", "feliz",
            "calle", "perro", "libro"]


def _parity(rng: random.Random, label: str) -> str:
    number = rng.randrange(10, 1000)
    return str(number if (number % 2 == 0) == (label == "even") else number + 1)


def _magnitude(rng: random.Random, label: str) -> str:
    return str(rng.randrange(1, 400) if label == "small" else rng.randrange(600, 1000))


def _sentiment(rng: random.Random, label: str) -> str:
    words = _POSITIVE if label == "positive" else _NEGATIVE
    first, second = rng.sample(words, 2)
    return f"The {rng.choice(_NOUNS)} was {first} and rather {second}."


def _topic(rng: random.Random, label: str) -> str:
    first, second = rng.sample(_TOPICS[label], 2)
    return f"Yesterday everyone talked about the {first} and the {second}."


def _sentence(rng: random.Random) -> str:
    return f"{rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} {rng.choice(_OBJECTS)}"


def _punctuation(rng: random.Random, label: str) -> str:
    text = _sentence(rng)
    return f"Why has {text}?" if label == "question" else _capital(text) + "."


def _capital(text: str) -> str:
    return text[0].upper() + text[1:]


def _first_letter(rng: random.Random, label: str) -> str:
    return rng.choice(_VOWEL_WORDS if label == "vowel" else _CONSONANT_WORDS)


def _length(rng: random.Random, label: str) -> str:
    if label == "short":
        return _capital(_sentence(rng)) + "."
    return _capital(f"{_sentence(rng)}, then {_sentence(rng)} and finally {_sentence(rng)}.")


def _arithmetic(rng: random.Random, label: str) -> str:
    a, b = rng.randrange(1, 50), rng.randrange(1, 50)
    shown = a + b if label == "true" else a + b + rng.choice([-3, -2, -1, 1, 2, 3])
    return f"{a} + {b} = {shown}"


def _colour(rng: random.Random, label: str) -> str:
    return f"a ripe {rng.choice(_COLOURS[label])}" if rng.random() < 0.5 \
        else f"the {rng.choice(_COLOURS[label])}"


def _language(rng: random.Random, label: str) -> str:
    return " ".join(rng.sample(_ENGLISH if label == "english" else _SPANISH, 3))


@dataclass(frozen=True)
class Spec:
    name: str
    options: tuple[str, ...]
    instruction: str
    instruction_2: str
    input_name: str
    answer_name: str
    make: Make

    def config(self) -> dict[str, object]:
        return {
            "name": self.name, "task_type": "classification", "options": list(self.options),
            "instruction": self.instruction, "instruction_2": self.instruction_2,
            "demonstration_prompt": f"{self.input_name}: {{text}}\n{self.answer_name}: {{label}}",
            "inference_prompt": f"{self.input_name}: {{text}}\n{self.answer_name}:",
        }


SPECS = (
    Spec("number_parity", ("even", "odd"), "Decide whether the number is even or odd.",
         "Is this number odd or even?", "Number", "Parity", _parity),
    Spec("number_magnitude", ("small", "large"),
         "Classify the number as small (below 500) or large (above 500).",
         "Tell whether the number is large or small.", "Number", "Size", _magnitude),
    Spec("review_sentiment", ("positive", "negative"),
         "Classify the sentiment of the review as positive or negative.",
         "Is the opinion in this review negative or positive?", "Review", "Sentiment",
         _sentiment),
    Spec("chat_topic", ("sports", "food", "weather"),
         "Classify the topic of the remark into sports, food or weather.",
         "Which subject is the remark about: weather, food, or sports?", "Remark", "Topic",
         _topic),
    Spec("sentence_type", ("question", "statement"),
         "Decide whether the sentence is a question or a statement.",
         "Is this sentence a statement or a question?", "Sentence", "Type", _punctuation),
    Spec("first_letter", ("vowel", "consonant"),
         "Classify the word by whether it starts with a vowel or a consonant.",
         "Does the word begin with a consonant or a vowel?", "Word", "Starts with",
         _first_letter),
    Spec("text_length", ("short", "long"),
         "Classify the text as short (one clause) or long (three clauses).",
         "Is this text long or short?", "Text", "Length", _length),
    Spec("sum_check", ("true", "false"), "Decide whether the sum is true or false.",
         "Is the addition correct (true) or wrong (false)?", "Sum", "Answer", _arithmetic),
    Spec("object_colour", ("yellow", "green", "blue", "red"),
         "Name the usual colour of the object: yellow, green, blue or red.",
         "Which colour, red, blue, green or yellow, does the object usually have?", "Object",
         "Colour", _colour),
    Spec("word_language", ("english", "spanish"),
         "Identify the language of the words: english or spanish.",
         "Are these words spanish or english?", "Words", "Language", _language),
)


def _rows(spec: Spec, rng: random.Random, labels: Sequence[str], prefix: str) -> list[dict]:
    return [{"text": spec.make(rng, label), "label": label, "id": f"{prefix}_{i}"}
            for i, label in enumerate(labels)]


def generate(spec: Spec) -> dict[str, list[dict] | dict[str, object]]:
    """Every file of one task: train files in balanced rounds, a label-balanced test file."""
    files: dict[str, list[dict] | dict[str, object]] = {CONFIG_FILE: spec.config()}
    for resample in range(MAX_RESAMPLES):
        rng = random.Random(case_seed(SEED, spec.name, "train", resample))
        labels = [label for _ in range(ROUNDS)
                  for label in rng.sample(spec.options, len(spec.options))]
        files[train_file(resample)] = _rows(spec, rng, labels, f"train_{resample}")
    rng = random.Random(case_seed(SEED, spec.name, "test"))
    labels = [spec.options[i % len(spec.options)] for i in range(TEST_ROWS)]
    rng.shuffle(labels)
    files[TEST_FILE] = _rows(spec, rng, labels, "test")
    return files


def render(content: list[dict] | dict[str, object]) -> str:
    if isinstance(content, dict):
        return json.dumps(content, indent=4, ensure_ascii=False) + "\n"
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in content)


def write_pack(dest: Path) -> list[Path]:
    """Write every task folder under ``dest``; returns the files written."""
    written = []
    for spec in SPECS:
        for file_name, content in generate(spec).items():
            path = dest / spec.name / file_name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(render(content), encoding="utf-8")
            written.append(path)
    return written


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else OFFLINE_PACK
    print(f"wrote {len(write_pack(target))} files under {target}")
