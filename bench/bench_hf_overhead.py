"""How much the hf backend adds on top of a bare ``model.generate`` (target: at most 5 %).

Usage: ``python bench/bench_hf_overhead.py [--lengths 1024,4096] [--batch 8] [--threads 1]``

The speed lines split a run into prefill (the time of a one-token generation) and decoding.

Both sides get the same left-padded token ids and the same greedy settings; the backend also
tokenises, groups, decodes and cuts. Runs are interleaved, the side that goes first alternating,
so drift in machine load hits both alike. Each side reports its median wall time and median
process CPU time: on a machine whose cores are shared, CPU time is the steadier basis.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

import torch
from transformers import GenerationConfig

from pytest_lceval.models.hf import HFBackend
from pytest_lceval.models.presets import load_preset
from pytest_lceval.models.registry import LoadOptions
from pytest_lceval.results.records import GenerateRequest

WORDS = ("river", "stone", "lantern", "market", "winter", "orchard", "copper", "signal", "harbor",
         "meadow", "violin", "canyon", "ledger", "thistle", "beacon", "quarry", "saddle", "ember")


def make_prompts(backend: HFBackend, tokens: int, count: int, seed: int = 0) -> list[str]:
    """``count`` distinct prompts of exactly ``tokens`` ids, filler prose ending in a question."""
    rng = random.Random(seed)
    prompts = []
    for index in range(count):
        sentences = [" ".join(rng.choice(WORDS) for _ in range(12)).capitalize() + "."
                     for _ in range(tokens // 4)]
        question = f"\nQuestion {index}: which word comes up most often above? Answer:"
        room = tokens - backend.renderer.count(question)
        body = backend.tokenizer.decode(backend.tokenizer.encode(" ".join(sentences))[:room])
        prompt = body + question
        while backend.renderer.count(prompt) > tokens:  # decode/encode may not round-trip exactly
            body = body[:-1]
            prompt = body + question
        prompts.append(prompt)
    return prompts


class Clock:
    """Wall and process CPU seconds of a block."""

    def __enter__(self) -> Clock:
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall, self.cpu = time.perf_counter() - self.wall, time.process_time() - self.cpu


def time_backend(backend: HFBackend, prompts: list[str], new_tokens: int) -> tuple[Clock, int]:
    with Clock() as clock:
        answers = backend.generate([GenerateRequest(prompt, new_tokens) for prompt in prompts])
    return clock, sum(answer.output_tokens for answer in answers)


def time_raw(backend: HFBackend, prompts: list[str], new_tokens: int) -> Clock:
    """The same ids and settings straight into model.generate, with nothing around it."""
    ids = [backend.prompt_ids(prompt) for prompt in prompts]
    inputs = backend.hf_tokenizer.pad({"input_ids": ids}, padding_side="left",
                                      return_tensors="pt").to(backend.device)
    config = GenerationConfig(max_new_tokens=new_tokens, do_sample=False, num_beams=1,
                              repetition_penalty=1.0,
                              eos_token_id=backend.model.generation_config.eos_token_id,
                              pad_token_id=backend.hf_tokenizer.pad_token_id)
    with Clock() as clock, torch.inference_mode():
        backend.model.generate(**inputs, generation_config=config)
    return clock


def bench_length(backend: HFBackend, tokens: int, batch: int, new_tokens: int,
                 repeats: int) -> None:
    prompts = make_prompts(backend, tokens, batch)
    time_backend(backend, prompts[:1], 2)  # warm-up: first calls allocate and pick kernels
    ours, raw, produced = [], [], 0
    for repeat in range(repeats):
        if repeat % 2:  # alternate which side goes first, so neither always runs warmer
            raw.append(time_raw(backend, prompts, new_tokens))
        clock, produced = time_backend(backend, prompts, new_tokens)
        ours.append(clock)
        if not repeat % 2:
            raw.append(time_raw(backend, prompts, new_tokens))
    prompt_tokens = sum(backend.renderer.count(prompt) for prompt in prompts)
    for label, side in (("wall", "wall"), ("cpu ", "cpu")):
        ours_s = statistics.median(getattr(clock, side) for clock in ours)
        raw_s = statistics.median(getattr(clock, side) for clock in raw)
        print(f"{tokens:>6} tokens x {batch} {label}: backend {ours_s:7.2f} s   raw generate "
              f"{raw_s:7.2f} s   overhead {100 * (ours_s / raw_s - 1):+5.1f} %")
    prefill = time_backend(backend, prompts, 1)[0]
    for label, side in (("wall", "wall"), ("cpu ", "cpu")):
        start = getattr(prefill, side)
        decode = statistics.median(getattr(clock, side) for clock in ours) - start
        print(f"{'':>6} speed by {label}: prefill {prompt_tokens / start:6.0f} tok/s "
              f"({start:.2f} s), then {produced - batch} more tokens at "
              f"{(produced - batch) / decode:5.1f} tok/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="smollm2")
    parser.add_argument("--lengths", default="1024", help="comma-separated prompt lengths")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--threads", type=int, default=0,
                        help="torch threads (default: torch's choice); 1 gives steadier numbers "
                             "on a machine whose cores other processes share")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    backend = load_preset(args.preset, LoadOptions())
    assert isinstance(backend, HFBackend)
    backend.greedy_on_cpu = False  # the wrapper around model.generate; bench_main_job.py times
    # the CPU's own greedy decoding against model.generate
    print(f"{args.preset} on {backend.device} ({torch.get_num_threads()} threads), "
          f"{args.new_tokens} new tokens, median of {args.repeats} interleaved runs")
    for tokens in (int(text) for text in args.lengths.split(",")):
        bench_length(backend, tokens, args.batch, args.new_tokens, args.repeats)


if __name__ == "__main__":
    main()
