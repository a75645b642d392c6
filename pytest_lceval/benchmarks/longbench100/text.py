"""What the 100-LongBench tasks say to the model and how their answers are read, as the reference
code does it (github:uservan/100-LongBench: prompts from ``config/dataset2prompt.json``, questions
and context formats from ``utils/data_utils.py``, scoring from ``utils/metrics.py`` and
``eval_trec.py``; paper appendix A.3).

Every prompt is the reference's whole prompt, cue included ("The final answer is: "), sent as the
user's text; answers are read from their first non-empty line, as ``eval_trec.py`` reads them.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Sequence

from ...tasks.metrics import normalize_answer

_NUMBER = re.compile(r"\d+")
_UUID = re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-"
                   r"[0-9a-fA-F]{12}\b")
_YES_NO = re.compile(r"\b(yes|no)\b")

KV_PROMPT = (
    "There are some passages below sourced from many different fields.\n\n{context}\n\n"
    "Given several key-value pairs in these passages, you need to find the value of the key. "
    "Read the question related with these key-value pairs and give the correct answer. {input} ")
KV_QUESTION = "Answer: the value of {key} is"
KV_PAIR = "The value of {key} is {value}."

STARS_PROMPT = (
    "There are some passages below sourced from many different fields.\n\n{context}\n\n"
    "Only output the results without any explanation. Read the following question and give "
    "the correct answer: {input}\nThe final answer is: ")
STARS_QUESTION = (
    "On this moonlit and misty night, the little penguin is looking up at the sky and "
    "concentrating on counting ★. Please help the little penguin collect the number of ★, for "
    "example: [x, x, x,...]. The summation is not required, and the numbers in [x, x, x,...]. "
    "represent the counted number of ★ by the little penguin.\n"
    "Question: Which of the following is the correct number of ★ the little penguin collect?\n"
    "{options}Please provide your answer as a single number (1, 2, 3, 4 ...) without any "
    "explanation.")
STAR = "The little penguin counted {count} ★"
UNANSWERABLE = "unanswerable"

RETRIEVAL_PROMPT = (
    "Here are some passages from many different fields, along with an summarization. Please "
    "determine which passage the summarization is from.\n\n{context}\n\n"
    "The following is a summarization.\n\n{input}\n\nPlease enter the number of the passage "
    'that the summarization is from. The answer format must be like "Passage 1", '
    '"Passage 2", etc.\n\nThe answer is Passage ')

COUNT_PROMPT = (
    "There are some paragraphs below sourced from many different fields. Some of them may be "
    "duplicates. Please carefully read these paragraphs and determine how many unique "
    "paragraphs there are after removing duplicates. In other words, how many non-repeating "
    "paragraphs are there in total?\n\n{context}\n\nPlease enter the final count of unique "
    "paragraphs after removing duplicates. The output format should only contain the number, "
    "such as 1, 2, 3, and so on.\n\nThe final answer is: ")

QA_PROMPT = (
    "Answer the question based on the given passages. Only give me the answer and do not "
    "output any other words.\n\nThe following are given passages and these passages are from "
    "many different fields.\n\n{context}\n\nAnswer the question based on the given passages "
    "following the instruction: \n{instruction}\n\nQuestion: {input}\nOnly give me the answer "
    "and do not output any other words. Answer:\n")
QA_INSTRUCTION = "Answer the question related with Passage {number}. "
QA_ALONE_INSTRUCTION = "Answer the question related with these passages "
"""The reference's multi-doc QA base (``generate_dataset_multi_doc_qa_base``): the question's
own passages only, in their order, none named."""
QA_PROBE_PROMPT = (
    "Answer the question as concisely as you can, using a single phrase or sentence if "
    'possible. If the question cannot be answered, write "unanswerable". Do not provide any '
    "explanation. Question: {input}\nOnly give me the answer and do not output any other "
    "words. Answer:\n ")
"""The reference's ``qa_old`` prompt: the question with no passages (the prior-knowledge probe)."""
SINGLE_SUM_PROMPT = (
    "You are given several passages as follows, but not all of them need to be summarized."
    "\n\n{context}\n\nPlease follow these instructions:\n1.{input}\n2.Ignore and do not "
    "summarize any passages not listed above.\n3.For the selected passages, the summary should "
    "include: the main arguments or conclusions of each article, the key evidence or supporting "
    "data presented and any unique or innovative points made in the passages.\n4.The summary "
    "should be concise, focusing only on the most important information from the passages. "
    "Now, please generate the summary for the specified passage, following the instructions "
    "carefully.\nSummary:\n")
SINGLE_SUM_INSTRUCTION = "Write a one-page summary of {passages} into a few short sentences"
MULTI_SUM_PROMPT = (
    "You are given several passages as follows, but not all of them need to be summarized."
    "\n\n{context}\n\nPlease follow these instructions:\n1.{input}\n2.Ignore and do not "
    "summarize any passages not listed above.\n3.All the selected passages should be summarized "
    "into a few short sentences and do not summarize each selected passages separately. The "
    "summary should include: the main arguments or conclusions of each article, the key "
    "evidence or supporting data presented and any unique or innovative points made in the "
    "passages.\n4.The summary should be concise, focusing only on the most important "
    "information from the passages. Now, please combine and summarize the main ideas from the "
    "selected relevant passages into one cohesive summary, following the instructions "
    "carefully.\n\nSummary:\n")
MULTI_SUM_INSTRUCTION = ("Combine and summarize the main ideas from the selected relevant "
                         "passages into one cohesive summary: {passages}")
YES_NO_INPUT = "{question}? Answer yes or no."
"""The judge-free variant's question: a boolq question with the answer format made explicit."""


def first_line(output: str) -> str:
    """The line the reference scores: the answer's first line after leading newlines."""
    return output.lstrip("\n").split("\n")[0]


def summary_input(instruction: str, numbers: Sequence[int], query: str) -> str:
    """A summary task's input as the reference writes it: the instruction naming the passages
    ("Passage 2" or "Passage 2,Passage 5"), then the data's query after a colon, else a full
    stop."""
    named = instruction.format(passages=",".join(f"Passage {n}" for n in numbers))
    return f"{named}: {query}" if query else f"{named}."


def qa_f1(output: str, golds: Sequence[str]) -> float:
    """The reference's ``qa_f1_score`` of the answer's first line, best over the golds: token
    F1 after SQuAD normalisation (its original metric for the QA tasks)."""
    said = normalize_answer(first_line(output)).split()
    best = 0.0
    for gold in golds:
        expected = normalize_answer(gold).split()
        same = sum((Counter(said) & Counter(expected)).values())
        if same:
            precision, recall = same / len(said), same / len(expected)
            best = max(best, 2 * precision * recall / (precision + recall))
    return best


def rouge_l_f1(output: str, golds: Sequence[str]) -> float:
    """ROUGE-L F1 of the answer's first line, best over the reference summaries: the
    reference's original summary metric (``rouge_score`` of ``utils/metrics.py``), by the same
    ``rouge`` package: summary-level LCS over sentences split at full stops, case and
    punctuation kept; 0 for an empty line, or where that package refuses the pair (a line of
    full stops only)."""
    said = first_line(output)
    if not said:
        return 0.0
    return max(_rouge_l(said, gold) for gold in golds)


def _rouge_l(said: str, gold: str) -> float:
    from rouge import Rouge  # imported at the first summary scored, as rouge-score is

    try:
        return float(Rouge().get_scores([said], [gold], avg=True)["rouge-l"]["f"])
    except (ValueError, RecursionError):  # "Hypothesis is empty."; the reference scores 0
        return 0.0


def first_number(output: str) -> str | None:
    """The first run of digits of the answer's first line, as written: the reference's
    ``acc_score`` compares it with the gold as a string, so "07" is not 7, nor "٣" 3."""
    match = _NUMBER.search(first_line(output))
    return match.group() if match else None


def last_uuid(output: str) -> str | None:
    """The last UUID of the answer's first line (the reference's ``kv_retrieval_score``)."""
    found = _UUID.findall(first_line(output))
    return found[-1] if found else None


def yes_or_no(output: str) -> str | None:
    """The first 'yes' or 'no' of the answer's first line."""
    answer = _YES_NO.search(first_line(output).lower())
    return answer.group(1) if answer else None


def star_options(rng: random.Random, counts: list[int]) -> list[list[int]]:
    """The reference's four sequences, shuffled: the counts with a pair exchanged, with one
    count redrawn, the counts themselves, and with another pair exchanged. As there, a draw can
    leave a sequence equal to the counts (an exchange of two equal counts, a redraw of the same
    value); the gold is then the first of the equal options, as ``question_key.index``
    gives it."""
    options = [_exchanged(rng, counts), _modified(rng, counts), list(counts),
               _exchanged(rng, counts)]
    rng.shuffle(options)
    return options


def _exchanged(rng: random.Random, counts: list[int]) -> list[int]:
    i, j = rng.sample(range(len(counts)), 2)
    swapped = list(counts)
    swapped[i], swapped[j] = swapped[j], swapped[i]
    return swapped


def _modified(rng: random.Random, counts: list[int]) -> list[int]:
    modified = list(counts)
    modified[rng.randrange(len(counts))] = rng.randint(1, 100)
    return modified


def numbered_options(options: Sequence[object]) -> str:
    """'1. unanswerable\\n2. [38, 10, 90, 42]\\n...' as the reference writes its options."""
    return "".join(f"{i + 1}. {option}\n" for i, option in enumerate(options))
