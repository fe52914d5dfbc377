"""How the clients expose the builders of operations.py as methods, and what a pipeline hands back."""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, Dict, Optional

__all__ = ["Pending", "Namespace", "bind_sync", "bind_async"]


class Pending:
    """The answer of a pipelined request, available once the pipeline ran."""

    __slots__ = ("_done", "_value", "_error")

    def __init__(self):
        self._done = False
        self._value: Any = None
        self._error: Optional[BaseException] = None

    def settle(self, value: Any = None, error: Optional[BaseException] = None) -> None:
        self._done, self._value, self._error = True, value, error

    def done(self) -> bool:
        return self._done

    def result(self) -> Any:
        """The decoded result; raises the request's error."""
        if not self._done:
            raise RuntimeError("the pipeline has not run yet")
        if self._error is not None:
            raise self._error
        return self._value

    def exception(self) -> Optional[BaseException]:
        return self._error


def bind_sync(name: str, build: Callable, run: Callable, owner: str) -> Callable:
    """A method `name` with `build`'s signature that returns `run(self, build(...))`."""

    @functools.wraps(build)
    def method(self, *args, **kwargs):
        return run(self, build(*args, **kwargs))

    return _named(method, name, build, owner)


def bind_async(name: str, build: Callable, run: Callable, owner: str) -> Callable:
    """A coroutine method `name` with `build`'s signature that awaits `run(self, build(...))`."""

    @functools.wraps(build)
    async def method(self, *args, **kwargs):
        return await run(self, build(*args, **kwargs))

    return _named(method, name, build, owner)


def _named(method: Callable, name: str, build: Callable, owner: str) -> Callable:
    method.__name__ = name
    method.__qualname__ = f"{owner}.{name}"
    signature = inspect.signature(build)
    self_parameter = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    # The builder returns a Call; the method returns what the call's answer decodes to.
    method.__signature__ = signature.replace(parameters=[self_parameter, *signature.parameters.values()],
                                             return_annotation=inspect.Signature.empty)
    return method


class Namespace:
    """`client.view.*` and `client.schema.*`: the builders, each run by `run`."""

    def __init__(self, run: Callable[[Any], Any], builders: Dict[str, Callable], name: str):
        for verb, build in builders.items():
            bound = functools.wraps(build)(lambda *a, _build=build, **k: run(_build(*a, **k)))
            bound.__name__ = verb
            setattr(self, verb, bound)
        self._name = name

    def __repr__(self) -> str:
        return f"<folio {self._name} ops>"
