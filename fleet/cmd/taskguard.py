"""What every task of the collection does before its body runs, written once for ``invoke`` and
``fleet`` alike: ``--help`` never runs a task, and ``--json`` always ends in one JSON object.

``--help`` and ``-h``: invoke's parser hands the next token to a positional argument (or to a flag waiting
for its value) *before* it looks for its own ``--help``, so ``invoke board.add --help`` used to
file an issue titled "--help" that the next sweep dispatched, ``halt --help`` wrote a halt file
whose reason was "--help", and ``pr.merge --help`` read "--help" as a number. Here any argument
whose value is exactly ``--help`` or ``-h`` prints the task's help and returns before the body:
nothing is read, nothing is written. Giving such a string as a real value is not possible, by
design: the flag always means help.

``--json``: every exit path of a ``--json`` command — refusals, a bad inventory, an unreadable
board, a crash — prints exactly one JSON object as the last line of stdout, with the same exit code
as without ``--json`` (:func:`fleet.cmd.common.json_exits`).
"""

from __future__ import annotations

import inspect
import os
import sys
from collections.abc import Iterable
from types import SimpleNamespace
from typing import Any

from invoke import Collection, Program, Task
from invoke.parser import Argument, ParserContext

HELP_TOKENS = frozenset({"--help", "-h"})


def asks_help(values: Iterable[object]) -> bool:
    """Does any argument value (or any item of a repeatable flag's list) ask for help?"""
    for v in values:
        items = v if isinstance(v, list | tuple) else (v,)
        if any(isinstance(i, str) and i in HELP_TOKENS for i in items):
            return True
    return False


def print_task_help(task: Task, path: str) -> None:
    """invoke's own per-task help text, for ``task`` named ``path`` in the collection."""
    binary = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "invoke"
    ctx = ParserContext(name=path, args=task.get_arguments())
    program = Program(binary=binary)
    # print_task_help reads only these two from the parsed program: the task and its context.
    program.collection = {path: task}  # type: ignore[assignment]
    program.parser = SimpleNamespace(contexts={path: ctx})  # type: ignore[assignment]
    program.print_task_help(path)


class _HelpFillsPositionals(Argument):
    """A positional argument that, handed ``--help``, hands it to its empty siblings too: the
    parser then has every positional it requires (``board.block --help`` would otherwise stop at
    "did not receive required positional arguments") and the task's call prints help."""

    siblings: list[Argument]

    def set_value(self, value: Any, cast: bool = True) -> None:
        super().set_value(value, cast)
        if isinstance(value, str) and value in HELP_TOKENS:
            for other in self.siblings:
                if other is not self and not other.got_value:
                    other.raw_value, other._value = value, value


def keep_bytecode() -> None:
    """Let the fleet package keep its bytecode cache under invoke.

    invoke turns bytecode writing off for the whole process so that loading a ``tasks.py`` leaves
    no ``tasks.pyc`` beside it; the fleet package's modules, imported after that, would then be
    compiled from source on every command of an editable install: ~50 ms, a third of a cold
    ``invoke dispatch --dry-run`` (bench/cold_bench.py). The interpreter's own switch (``-B``,
    ``PYTHONDONTWRITEBYTECODE``) still turns it off."""
    sys.dont_write_bytecode = bool(sys.flags.dont_write_bytecode)


class GuardedTask(Task):
    """A task whose call first honours ``--help`` and ``--json`` (see the module's docstring)."""

    fleet_path: str = ""

    def get_arguments(self, ignore_unknown_help: bool | None = None) -> list[Argument]:
        # invoke pops each option's help text as it builds the arguments, so a second build (the
        # help printed here, after the parser built them) would lose every description.
        kept = dict(self.help)
        try:
            args = super().get_arguments(ignore_unknown_help)
        finally:
            self.help = kept
        positional = [a for a in args if a.positional]
        for a in positional:
            a.__class__ = _HelpFillsPositionals
            a.siblings = positional  # type: ignore[attr-defined]
        return args

    def arg_opts(self, name: str, default: str, taken_names: set[str]) -> dict[str, Any]:
        # ``-h`` is help on every task: never handed out as an option's automatic short flag
        # (``board.add -h`` meant ``--author`` and then waited for its value).
        return super().arg_opts(name, default, taken_names | {"h"})

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        keep_bytecode()  # ``fleet X``: Program.run turned it off after the collection was loaded
        if asks_help((*args[1:], *kwargs.values())):
            print_task_help(self, self.fleet_path or self.name)
            return None
        if kwargs.get("json") is True:
            from fleet.cmd.common import json_exits

            with json_exits(self.fleet_path or self.name):
                return super().__call__(*args, **kwargs)
        return super().__call__(*args, **kwargs)


def guard(ns: Collection) -> Collection:
    """Guard every task of ``ns`` and its sub-collections (idempotent); returns ``ns``."""
    for path in ns.task_names:
        task = ns[path]
        if not isinstance(task, GuardedTask):
            task.__class__ = GuardedTask
        task.fleet_path = path
    return ns


def takes_json(task: Task) -> bool:
    return "json" in inspect.signature(task.body).parameters


__all__ = [
    "HELP_TOKENS",
    "GuardedTask",
    "asks_help",
    "guard",
    "keep_bytecode",
    "print_task_help",
    "takes_json",
]
