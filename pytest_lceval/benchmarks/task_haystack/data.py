"""Task Haystack tasks in the Lifelong-ICL format, and the named task sets.

A task folder holds ``config.json`` (options, two instructions, the demonstration and inference
templates), ``train_0..4.jsonl`` (five few-shot resamples, written in rounds of one example per
class so that the first ``n_shot x n_class`` rows are balanced) and ``test.jsonl``.
"""

from __future__ import annotations

import difflib
import json
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from ...foundation.data import DataError, read_jsonl

CONFIG_FILE = "config.json"
TEST_FILE = "test.jsonl"
MAX_RESAMPLES = 5
"""Few-shot resamples the public data provides (train_0..train_4)."""


def train_file(resample: int) -> str:
    return f"train_{resample}.jsonl"


TASK_FILES = (CONFIG_FILE, *(train_file(r) for r in range(MAX_RESAMPLES)), TEST_FILE)
"""Every file of a task folder."""

MAIN16 = (
    "covid_fake_news", "amazon_counterfactual_en", "semeval_absa_restaurant", "emo",
    "dbpedia_14", "yahoo_answers_topics", "clickbait", "wiki_qa", "brag_action", "pun_detection",
    "this_is_not_a_dataset", "logical_fallacy_detection", "boolq", "news_data",
    "insincere_questions", "amazon_massive_scenario",
)
"""The paper's Scale-Shot tasks (Table 1): the reference's ``--n_task 16`` of its default split,
i.e. the first 16 of ALL64 shuffled with seed 42 (``prompts.stream_subset``), in the order it
draws them in, which is the order its permutations are sampled from."""

PERMISSIVE16 = (
    "metaphor_boolean", "fever", "function_of_decision_section", "climate_commitments_actions",
    "amazon_massive_scenario", "silicone_dyda_da", "brag_action", "student_question_categories",
    "acl_arc", "wic", "semeval_absa_laptop", "senteval_cr",
    "dbpedia_14", "wiki_hades", "environmental_claims", "babi_nli_single_supporting_fact",
)
"""The 16 tasks with permissive licenses (paper Table 8), recommended for benchmarking."""

ALL64 = (
    "ag_news", "amazon_counterfactual_en", "amazon_massive_scenario", "app_reviews",
    "beaver_tails", "boolq", "brag_action", "circa", "clickbait", "climate_commitments_actions",
    "climate_fever", "climate_sentiment", "cola", "copa", "covid_fake_news", "dbpedia_14",
    "disaster_response_message", "emo", "emotion", "environmental_claims", "ethos", "fever",
    "financial_phrasebank", "hate_speech18", "health_fact", "i2d2", "imdb",
    "insincere_questions", "is_humor", "jailbreak_classification", "lexical_rc_cogalexv",
    "lexical_rc_root09", "liar", "limit", "logical_fallacy_detection", "metaphor_boolean",
    "mrpc", "news_data", "poem_sentiment", "pragmeval_emergent", "pragmeval_sarcasm",
    "pragmeval_verifiability", "prosocial_dialog", "pun_detection", "qqp", "rotten_tomatoes",
    "semeval_absa_laptop", "semeval_absa_restaurant", "senteval_cr", "senteval_subj",
    "silicone_dyda_da", "sms_spam", "sst2", "sst5", "student_question_categories",
    "tcfd_recommendations", "this_is_not_a_dataset", "toxic_conversations", "trec", "wic",
    "wiki_hades", "wiki_qa", "wsc", "yahoo_answers_topics",
)
"""The Scale-Task pool: the 64 tasks of the reference code's configs/default.json."""

EXTRA16 = (
    "acl_arc", "babi_nli_single_supporting_fact", "cb", "function_of_decision_section",
    "medical_question_pairs", "mnli", "qnli", "rct20k", "rte", "sara_entailment", "scierc",
    "sick", "stance_abortion", "stance_feminist", "vitaminc", "wnli",
)
"""The other 16 task folders of the public data (paper Table 6 lists all 80)."""

TASK_SETS: dict[str, tuple[str, ...]] = {
    "main16": MAIN16, "permissive16": PERMISSIVE16, "all64": ALL64,
    "all80": tuple(sorted(ALL64 + EXTRA16)),
}


class TaskDataError(DataError):
    """A task folder is missing or malformed; the message names the file and the fix."""


@dataclass(frozen=True)
class LliclTask:
    """One classification task: its templates, five few-shot resamples and its test set."""

    name: str
    options: tuple[str, ...]
    instruction: str
    instruction_2: str
    """A paraphrase of ``instruction`` (the Paraphrase setting uses it at test time)."""
    demonstration_prompt: str
    """e.g. 'Article: {text}\\nAnswer: {label}'; fields are the examples' keys."""
    inference_prompt: str
    """e.g. 'Article: {text}\\nAnswer:'."""
    train_sets: tuple[tuple[Mapping[str, str], ...], ...]
    """``train_sets[r]`` is few-shot resample r, balanced in rounds of one example per class."""
    test: tuple[Mapping[str, str], ...]
    folder: Path

    @property
    def n_class(self) -> int:
        return len(self.options)

    def demonstrations(self, resample: int, n_shot: int) -> tuple[Mapping[str, str], ...]:
        """The first ``n_shot`` rounds (``n_shot`` examples per class) of resample ``resample``."""
        rows = self.train_sets[resample]
        wanted = n_shot * self.n_class
        if wanted > len(rows):
            raise TaskDataError(
                f"task {self.name}: {n_shot} shots x {self.n_class} classes = {wanted} "
                f"demonstrations, but {train_file(resample)} has only {len(rows)} rows")
        return rows[:wanted]

    def test_cases(self, size: int) -> tuple[Mapping[str, str], ...]:
        """The first ``size`` test rows: the same rows for every condition, so results pair."""
        return self.test[:size]


def load_task(root: Path, name: str) -> LliclTask:
    """Read and validate ``root/name``; cached, since every test of a run reads the same tasks."""
    return _load_task(root.resolve(), name)


@cache
def _load_task(root: Path, name: str) -> LliclTask:
    folder = root / name
    if not folder.is_dir():
        raise TaskDataError(f"no task folder {folder}")
    config = _read_json(folder / CONFIG_FILE)
    try:
        options = tuple(str(option) for option in config["options"])
        demonstration_prompt = config["demonstration_prompt"]
        # Every row must fill the templates; read_jsonl names a row that cannot, by its line.
        fields = {f for _, f, _, _ in string.Formatter().parse(demonstration_prompt) if f}
        task = LliclTask(
            name=name, options=options, instruction=config["instruction"],
            instruction_2=config.get("instruction_2") or config["instruction"],
            demonstration_prompt=demonstration_prompt,
            inference_prompt=config["inference_prompt"],
            train_sets=tuple(_read_rows(folder / train_file(r), fields)
                             for r in range(MAX_RESAMPLES)),
            test=_read_rows(folder / TEST_FILE, fields), folder=folder,
        )
    except KeyError as exc:
        raise TaskDataError(f"{folder / CONFIG_FILE} lacks the key {exc}") from None
    _validate(task)
    return task


def _validate(task: LliclTask) -> None:
    """Options must be distinct. Labels outside the options are kept as they are (the public
    scierc data spells one 'Hypohym Of'): such test cases can never be predicted, exactly as in
    the reference implementation."""
    if len(set(task.options)) != len(task.options) or len(task.options) < 2:
        raise TaskDataError(f"task {task.name}: options {list(task.options)} must be 2 or more "
                            f"distinct labels")


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise TaskDataError(f"cannot read {path}: {exc}") from None
    if not isinstance(data, dict):
        raise TaskDataError(f"{path} is not a JSON object")
    return data


def _read_rows(path: Path, fields: set[str]) -> tuple[Mapping[str, str], ...]:
    try:
        return read_jsonl(path, fields)
    except DataError as exc:
        raise TaskDataError(str(exc)) from None


def available_tasks(root: Path) -> list[str]:
    """Task folders under ``root`` (those with a config.json)."""
    return sorted(p.parent.name for p in root.glob(f"*/{CONFIG_FILE}"))


def resolve_task_names(spec: str, available: Sequence[str]) -> tuple[str, ...]:
    """'main16' / 'permissive16' / 'all64' / 'all80' / 'all' (every folder) or a comma list.

    Raises ValueError naming unknown tasks with their close matches, and tasks the data
    directory lacks.
    """
    spec = spec.strip()
    if spec == "all":
        names: tuple[str, ...] = tuple(available)
    elif spec in TASK_SETS:
        names = TASK_SETS[spec]
    else:
        names = tuple(dict.fromkeys(part.strip() for part in spec.split(",") if part.strip()))
    if not names:
        raise ValueError("no tasks named")
    missing = [name for name in names if name not in available]
    if missing:
        hints = []
        for name in missing:
            close = difflib.get_close_matches(name, [*available, *TASK_SETS], n=2)
            hints.append(name + (f" (did you mean {' or '.join(close)}?)" if close else ""))
        raise ValueError(f"the data lacks task(s) {', '.join(hints)}; it has "
                         f"{len(available)} tasks, named sets: {', '.join(TASK_SETS)}")
    return names
