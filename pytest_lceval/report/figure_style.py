"""The look every figure of a run shares (heatmaps, Task Haystack's, LongScore's): sizes that
leave room for titles and labels, labels that stay readable on any cell colour, model names
short enough for a title."""

from __future__ import annotations

MIN_WIDTH = 4.8
"""Inches: room for a two-line title even with a single column."""
TITLE_CHARS = 60
"""A model name longer than this is shown as its head and tail."""


def label_colour(rgba: tuple[float, ...]) -> str:
    """White or black, whichever contrasts more with the cell colour (WCAG 2 luminance)."""
    def linear(channel: float) -> float:
        return channel / 12.92 if channel <= 0.04045 else ((channel + 0.055) / 1.055) ** 2.4

    red, green, blue = (linear(c) for c in rgba[:3])
    luminance = 0.2126 * red + 0.7152 * green + 0.0722 * blue
    return "white" if (1.05 / (luminance + 0.05)) > ((luminance + 0.05) / 0.05) else "black"


def short_model(model: str, limit: int = TITLE_CHARS) -> str:
    """Head and tail of a long model name (a path's tail tells models apart)."""
    if len(model) <= limit:
        return model
    keep = (limit - 1) // 2
    return f"{model[:keep]}…{model[-keep:]}"
