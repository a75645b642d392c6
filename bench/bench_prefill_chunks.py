"""Seconds to answer one long prompt with the prompt prefilled whole vs in chunks, side by side,
and whether both give the same greedy tokens.

Usage: ``python bench/bench_prefill_chunks.py [--preset gemma3-270m] [--lengths 8192,16384]
[--chunk 1024] [--threads 2]``

In chunks, sliding-window layers attend to their window's cache instead of the whole prompt, so
a model that has them (Gemma 3: five of every six layers) prefills in far fewer FLOPs; the hf
backend chunks such models (``PREFILL_CHUNK``) and prefills the others whole. Run it with
``--preset smollm2`` to see what chunking costs a model with only full attention.
"""

from __future__ import annotations

import argparse

import torch
from bench_hf_overhead import Clock, make_prompts

from pytest_lceval.models import hf
from pytest_lceval.models.hf import HFBackend
from pytest_lceval.models.presets import load_preset
from pytest_lceval.models.registry import LoadOptions
from pytest_lceval.results.records import GenerateRequest, Generation

NEW_TOKENS = 16


def answer(backend: HFBackend, prompt: str, chunk: int | None) -> tuple[float, Generation]:
    backend.prefill_chunk = chunk
    with Clock() as clock:
        generation = backend.generate([GenerateRequest(prompt, NEW_TOKENS)])[0]
    return clock.wall, generation


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="gemma3-270m")
    parser.add_argument("--lengths", default="8192,16384", help="comma-separated prompt lengths")
    parser.add_argument("--chunk", type=int, default=hf.PREFILL_CHUNK)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (default: torch's)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    backend = load_preset(args.preset, LoadOptions())
    default = backend.prefill_chunk
    print(f"{args.preset} on {backend.device} ({torch.get_num_threads()} threads); the backend "
          f"prefills it {'in chunks of ' + str(default) if default else 'whole'}")
    answer(backend, make_prompts(backend, 256, 1)[0], None)  # warm-up: kernels, allocator
    for tokens in (int(text) for text in args.lengths.split(",")):
        prompt = make_prompts(backend, tokens, 1)[0]
        whole_s, whole = answer(backend, prompt, None)
        chunked_s, chunked = answer(backend, prompt, args.chunk)
        print(f"{tokens:>6} tokens: whole {whole_s:7.1f} s   chunks of {args.chunk} "
              f"{chunked_s:7.1f} s   whole / chunked {whole_s / chunked_s:4.2f}x   same answer: "
              f"{whole.text == chunked.text}")


if __name__ == "__main__":
    main()
