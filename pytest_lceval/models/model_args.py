"""Model config overrides (``--lceval-model-args``): evaluate a variant of a model, such as a
RoPE-scaled one, without writing a new model folder.

The text is ``KEY=VALUE`` items separated by commas; a value is JSON when it reads as JSON
(``500000``, ``2.0``, ``true``, ``{"rope_type":"linear","factor":2.0}``), else a plain string.
Commas inside braces, brackets or quotes belong to the value.

The overrides change the model's Hugging Face config before the weights load, as HELMET's
``--rope_theta`` does (its model_utils.py sets ``config.rope_theta`` on the loaded config and
passes the config to ``from_pretrained``). In transformers 5 the RoPE settings live in one
``rope_parameters`` dict, and the older keys are not applied as HELMET applied them:
``from_pretrained(rope_theta=...)`` ignores the value, and ``rope_scaling={...}`` drops the
model's own ``rope_theta`` (the new dict gets none). So ``rope_theta`` and ``rope_scaling`` are
translated here into the model's ``rope_parameters`` (a given scaling keeps the model's
``rope_theta`` unless it names one), and the config is rebuilt by its own class, which checks the
values. ``changes`` is what differs from the model's own config, in that canonical form: it keys
the fingerprint (``rope_theta=500000`` and the same theta inside ``rope_parameters`` are one
model) and it is what a vLLM engine gets as ``hf_overrides``.
"""

from __future__ import annotations

import copy
import difflib
import inspect
import json
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

OPTION = "--lceval-model-args"
ROPE = "rope_parameters"
LEGACY_ROPE = ("rope_theta", "rope_scaling")
"""Keys of transformers 4 that transformers 5 folds into ``rope_parameters``."""
WINDOW_KEY = "max_position_embeddings"
PRETRAINED_LENGTH_TYPES = ("llama3", "yarn", "longrope")
"""RoPE types that read the pretraining window as ``original_max_position_embeddings``, which
transformers fills from ``max_position_embeddings``: from the override's, were it raised too."""


class ModelArgsError(ValueError):
    """An override the model's config does not take; the message is the one line to show."""


def parse_model_args(texts: list[str]) -> dict[str, Any]:
    """``KEY=VALUE`` items (comma lists, repeated options) as a dict, in the order given.
    Raises ValueError for an item without ``=``, an empty key or a key given twice."""
    given: dict[str, Any] = {}
    for text in texts:
        for item in _top_level_items(str(text)):
            key, sep, raw = item.partition("=")
            key = key.strip()
            if not sep or not key:
                raise ValueError(f"{item.strip()!r} is not KEY=VALUE")
            if key in given:
                raise ValueError(f"{key} is given twice")
            given[key] = _value(raw.strip())
    return given


def _top_level_items(text: str) -> list[str]:
    """Split at the commas outside braces, brackets and double quotes."""
    items, depth, quoted, start = [], 0, False, 0
    for index, char in enumerate(text):
        if char == '"' and (index == 0 or text[index - 1] != "\\"):
            quoted = not quoted
        elif not quoted and char in "{[":
            depth += 1
        elif not quoted and char in "}]":
            depth -= 1
        elif not quoted and depth == 0 and char == ",":
            items.append(text[start:index])
            start = index + 1
    items.append(text[start:])
    return [item for item in items if item.strip()]


def _value(raw: str) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        if raw[:1] in "{[\"":
            raise ValueError(f"{raw!r} is not valid JSON") from None
        return raw


def args_text(given: dict[str, Any]) -> str:
    """The overrides as one would type them (compact JSON values), for headers and names."""
    return ",".join(f"{key}={json.dumps(value, separators=(',', ':'))}"
                    for key, value in given.items())


@dataclass(frozen=True)
class Overridden:
    """A config with the overrides applied, and what they changed."""

    config: Any
    changes: dict[str, Any]
    """Each top-level key whose value differs from the model's own config, with its new value
    (``rope_parameters`` whole): the fingerprint's part and vLLM's ``hf_overrides``."""


def override_config(config: Any, given: dict[str, Any]) -> Overridden:
    """``config`` (a transformers PretrainedConfig) with ``given`` applied; ModelArgsError, one
    line naming the config class, for a key it does not know or a value it refuses."""
    if not given:
        return Overridden(config, {})
    cls = type(config)
    own = config.to_dict()
    wanted = _canonical(config, own, given)
    known = _known_keys(cls, own)
    for key in wanted:
        if key not in known:
            close = difflib.get_close_matches(key, sorted(known | set(LEGACY_ROPE)), n=3)
            shown = [name for name in sorted(own) if not name.startswith("_")]
            hint = f"; did you mean {', '.join(close)}?" if close else \
                f" (its keys include {', '.join(shown[:12])}, ...)"
            raise ModelArgsError(f"{OPTION}: {cls.__name__} has no key {key!r}{hint}")
        wanted[key] = _checked(cls.__name__, key, own.get(key), wanted[key])
        _check_sense(cls.__name__, key, own.get(key), wanted[key])
    if isinstance(wanted.get(ROPE), dict):
        _check_rope_types(config, wanted[ROPE])
        own_theta = next(_thetas(own.get(ROPE) or {}), None)
        for theta in _thetas(wanted[ROPE]):
            _check_sense(cls.__name__, "rope_theta", own_theta, theta)
    try:
        with _rope_warnings() as warned:
            rebuilt = cls.from_dict({**own, **wanted})
        if warned:
            raise ValueError(warned[0])
    except Exception as exc:  # whatever the config class refuses the values with
        cause = " ".join(str(exc).split())[:300] or type(exc).__name__
        raise ModelArgsError(f"{OPTION}: {cls.__name__} refuses {args_text(given)}: "
                             f"{cause}") from None
    now = rebuilt.to_dict()
    changes = {key: now[key] for key in sorted(wanted) if now.get(key) != own.get(key)}
    return Overridden(rebuilt, changes)


def _canonical(config: Any, own: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
    """``given`` with ``rope_theta`` / ``rope_scaling`` written into ``rope_parameters`` where
    the config keeps its RoPE there (transformers 5), so they take effect (module docstring)."""
    if ROPE not in own or not any(key in given for key in (*LEGACY_ROPE, ROPE)):
        return dict(given)
    if ROPE in given and any(key in given for key in LEGACY_ROPE):
        raise ModelArgsError(f"{OPTION}: give rope_parameters, or rope_theta and rope_scaling, "
                             f"not both")
    current = copy.deepcopy(own[ROPE]) or {}
    nested = config.nested_rope_parameter_keys(current) if current else []
    if nested and any(key in given for key in LEGACY_ROPE):
        raise ModelArgsError(
            f"{OPTION}: {type(config).__name__} sets RoPE per layer type ({', '.join(nested)}): "
            f"give rope_parameters={{{', '.join(f'{k!r}: {{...}}' for k in nested)}}} instead of "
            f"{', '.join(key for key in LEGACY_ROPE if key in given)}".replace("'", '"'))
    wanted = {key: value for key, value in given.items() if key not in (*LEGACY_ROPE, ROPE)}
    scaling = given.get("rope_scaling", given.get(ROPE))
    if scaling is not None and not isinstance(scaling, dict):
        raise ModelArgsError(f"{OPTION}: {'rope_scaling' if 'rope_scaling' in given else ROPE} "
                             f"must be a JSON object such as "
                             f'{{"rope_type":"linear","factor":2.0}}, not {scaling!r}')
    own_theta = None if nested else current.get("rope_theta")
    theta = _checked(type(config).__name__, "rope_theta", own_theta,
                     given.get("rope_theta", own_theta))
    if scaling is not None:
        current = dict(scaling)
        if not nested and theta is not None:
            current.setdefault("rope_theta", theta)
        if not nested and current.get("rope_type") in PRETRAINED_LENGTH_TYPES:
            current.setdefault("original_max_position_embeddings", own.get(WINDOW_KEY))
    elif theta is not None:
        current["rope_theta"] = theta
    wanted[ROPE] = current
    return wanted


def _known_keys(cls: type, own: dict[str, Any]) -> set[str]:
    """The keys a config of ``cls`` takes: its constructor's parameters and what it stores."""
    parameters = set(inspect.signature(cls).parameters) - {"kwargs"}
    return (parameters | set(own)) - {"transformers_version", "_name_or_path", "architectures",
                                      "model_type"}


def _checked(owner: str, key: str, old: Any, new: Any) -> Any:
    """``new`` if it is of the kind the model's own value is (a number for a number...), an
    int made a float where the model's is one (``rope_theta=500000`` as HELMET's int option);
    ModelArgsError otherwise."""
    if old is None or new is None:
        return new
    number = isinstance(old, (int, float)) and not isinstance(old, bool)
    kinds = (int, float) if number else (type(old),)
    fits = isinstance(new, kinds) and isinstance(new, bool) == isinstance(old, bool)
    if number and isinstance(old, int) and isinstance(new, float):
        fits = new.is_integer()
    if not fits:
        raise ModelArgsError(f"{OPTION}: {owner}.{key} is {type(old).__name__} "
                             f"({json.dumps(old)}), not {json.dumps(new)}")
    return float(new) if isinstance(old, float) else new


WEIGHT_SHAPE = ("num_hidden_layers", "hidden_size", "intermediate_size", "num_attention_heads",
                "num_key_value_heads", "head_dim", "vocab_size")
"""Keys that say what the weights hold: another value loads the weights into a model of
another shape (``num_hidden_layers=0`` drops every layer, more layers are left untrained),
which the config class accepts without a word."""
POSITIVE = ("rope_theta", WINDOW_KEY)
"""Keys whose value must be above 0: ``rope_theta=-5`` loaded, and every answer was empty."""


def _check_sense(owner: str, key: str, old: Any, new: Any) -> None:
    """ModelArgsError for a value the config class takes but that cannot be meant."""
    if key in WEIGHT_SHAPE and old is not None and new != old:
        raise ModelArgsError(f"{OPTION}: {owner}.{key} is {json.dumps(old)} as the weights have "
                             f"it, not {json.dumps(new)}: the weights would load into a model "
                             f"of another shape; leave {key} out (another shape is another "
                             f"model folder)")
    if key in POSITIVE and isinstance(new, (int, float)) and not new > 0:
        raise ModelArgsError(f"{OPTION}: {key}={json.dumps(new)} is not positive: give a value "
                             f"above 0" + (f" (the model's own is {json.dumps(old)})"
                                           if old is not None else ""))


def _thetas(parameters: dict[str, Any]) -> Iterator[Any]:
    """Every ``rope_theta`` of RoPE parameters (one dict per layer type too)."""
    if "rope_theta" in parameters:
        yield parameters["rope_theta"]
    for entry in parameters.values():
        if isinstance(entry, dict):
            yield from _thetas(entry)


@contextmanager
def _rope_warnings() -> Iterator[list[str]]:
    """The warnings transformers logs while checking RoPE values (a factor below 1, a key the
    type does not read): logged, they would pass unseen and the run measure a misconfigured
    model, so they refuse the override."""
    found: list[str] = []

    class _Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            found.append(record.getMessage())

    logger = logging.getLogger("transformers.modeling_rope_utils")
    handler = _Collect(logging.WARNING)
    logger.addHandler(handler)
    try:
        yield found
    finally:
        logger.removeHandler(handler)


def _check_rope_types(config: Any, parameters: dict[str, Any]) -> None:
    """A RoPE type transformers has no implementation of: refused with the types it knows."""
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    nested = config.nested_rope_parameter_keys(parameters)
    for entry in [parameters[key] for key in nested] if nested else [parameters]:
        kind = (entry or {}).get("rope_type", (entry or {}).get("type", "default"))
        if kind != "default" and kind not in ROPE_INIT_FUNCTIONS:
            raise ModelArgsError(f"{OPTION}: unknown rope_type {kind!r}; transformers knows "
                                 f"default, {', '.join(sorted(ROPE_INIT_FUNCTIONS))}")


def scales_rope(values: dict[str, Any]) -> bool:
    """Whether a config's values (or the overrides) scale RoPE: a ``rope_scaling``, or
    ``rope_parameters`` (one dict per layer type too) of a type other than default."""
    return any(_scaled(values.get(key)) for key in ("rope_scaling", ROPE))


def _scaled(parameters: Any) -> bool:
    if not isinstance(parameters, dict):
        return False
    kind = parameters.get("rope_type", parameters.get("type"))
    if kind is not None:
        return kind != "default"
    return any(_scaled(entry) for entry in parameters.values())


def window_from(given: dict[str, Any]) -> int | None:
    """The window the overrides set (their ``max_position_embeddings``), if any."""
    value = given.get(WINDOW_KEY)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def chosen_window(window: int | None, given: dict[str, Any],
                  own: Callable[[], tuple[int, str]]) -> tuple[int, str]:
    """(window, where it came from): ``--lceval-window`` when given, else the model's own
    (``own()``: the window and its source), which a ``max_position_embeddings`` override
    has set."""
    if window is not None:
        return window, "--lceval-window"
    found, source = own()
    return found, f"{WINDOW_KEY} in {OPTION}" if WINDOW_KEY in given else source
