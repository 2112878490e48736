"""One root exception: every exception class the project defines derives from PubSubError."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import matchers
import streaming
from matchers.errors import PubSubError


def _modules():
    for package in (matchers, streaming):
        yield package
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if not info.name.endswith("__main__"):
                yield importlib.import_module(info.name)


def test_every_project_exception_derives_from_pubsuberror():
    defined = {
        f"{cls.__module__}.{cls.__qualname__}": cls
        for module in _modules()
        for _, cls in inspect.getmembers(module, inspect.isclass)
        if issubclass(cls, BaseException) and cls.__module__ == module.__name__
        and not cls.__name__.startswith("_")  # private control flow, never escapes its module
    }
    assert len(defined) >= 10  # the walk found the project's exceptions
    strays = sorted(name for name, cls in defined.items() if not issubclass(cls, PubSubError))
    assert strays == []
