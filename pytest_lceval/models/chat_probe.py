"""A chat template that refuses every prompt, found before any cell runs.

A template may end in ``{{ raise_exception('...') }}`` (a model that allows no system turn, a
tokenizer_config.json edited by hand): transformers then raises ``TemplateError`` on every
prompt, and every cell after the model loaded failed with it. Two checks say it once, in the
template's own words: at start-up, the template text of a local model folder is rendered on a
probe message in a sandbox where only the template's own ``raise_exception`` counts (anything
else it needs, such as transformers' own tags, is left to the second check); when the tokenizer
loads, ``HFText`` renders the probe with transformers' renderer itself.
"""

from __future__ import annotations

import json
from pathlib import Path

PROBE = "Say hello."
"""The probe message: a plain user turn, which any chat template must accept."""
SOURCES = ("chat_template.jinja", "tokenizer_config.json")
"""Where a model folder keeps its template; transformers prefers the .jinja file."""


class TemplateRefuses(ValueError):
    """The chat template raises on a plain user message."""


def refusal(source: str, message: str) -> TemplateRefuses:
    return TemplateRefuses(f"its chat template ({source}) refuses a plain user message: "
                           f"{message}; fix the template, or run with --chat-template off")


def template_text(folder: Path) -> tuple[str, Path] | None:
    """The folder's chat template and the file it is in; None when it has none (or a file that
    the tokenizer's own load will report)."""
    jinja = folder / SOURCES[0]
    if jinja.is_file():
        return jinja.read_text(encoding="utf-8"), jinja
    config = folder / SOURCES[1]
    try:
        template = json.loads(config.read_text(encoding="utf-8")).get("chat_template")
    except (OSError, ValueError, AttributeError):
        return None
    if isinstance(template, list):  # named templates: the default one renders prompts
        template = next((entry.get("template") for entry in template
                         if isinstance(entry, dict) and entry.get("name") == "default"), None)
    return (template, config) if isinstance(template, str) and template else None


def check_folder_template(folder: Path) -> None:
    """Raise ``TemplateRefuses`` when the folder's template raises on the probe message."""
    found = template_text(folder)
    if found is None:
        return
    text, source = found
    message = _own_refusal(text)
    if message is not None:
        raise refusal(str(source), message)


class _Raised(Exception):
    pass


def _raise_exception(message: str) -> None:
    raise _Raised(message)


def _own_refusal(text: str) -> str | None:
    """The message of the template's own ``raise_exception`` on the probe; None when it renders
    or fails otherwise (a tag only transformers defines: the load-time probe judges that)."""
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    environment = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                                extensions=["jinja2.ext.loopcontrols"])
    environment.globals["raise_exception"] = _raise_exception
    try:
        environment.from_string(text).render(
            messages=[{"role": "user", "content": PROBE}], add_generation_prompt=True,
            bos_token="", eos_token="")
    except _Raised as exc:
        return str(exc)
    except Exception:  # noqa: BLE001 - anything else is the load-time probe's to judge
        return None
    return None
