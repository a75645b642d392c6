"""Where the core learns the releases: from the plugins, through ``pytest_lceval_releases``.

Inside pytest the session's plugin manager answers (``releases_of``). The command line
(``python -m pytest_lceval.fetch``) has no session, so it builds a plugin manager that loads
this package's plugin the way pytest does, with the plugins it lists (``declared_releases``):
both ask the same plugins in the same order, so the command and ``--lceval-fetch`` know the same
releases, and the core names none of them.
"""

from __future__ import annotations

from functools import cache

import pytest

from .catalog import Release

PLUGIN = "pytest_lceval.plugin"
"""The module pytest loads this package by (its pytest11 entry point); it lists the others."""


def releases_of(pluginmanager: pytest.PytestPluginManager) -> tuple[Release, ...]:
    """Every release the registered plugins declare, in the order they were registered (pluggy
    asks the last registered first): the fetch order."""
    answers: list[list[Release]] = pluginmanager.hook.pytest_lceval_releases()
    return tuple(release for answer in reversed(answers) for release in answer)


@cache
def declared_releases() -> tuple[Release, ...]:
    """The releases a pytest session would know, without one: the package's hooks are added as
    pytest adds them (the historic ``pytest_addhooks`` call), then its plugin is loaded by name,
    which registers the plugins it lists."""
    manager = pytest.PytestPluginManager()
    manager.hook.pytest_addhooks.call_historic(kwargs={"pluginmanager": manager})
    manager.import_plugin(PLUGIN)
    return releases_of(manager)
