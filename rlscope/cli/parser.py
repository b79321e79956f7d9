"""The argument parser every rlscope command uses: help that reads well, errors in one line.

- ``--help``: descriptions and epilogs are wrapped to the terminal, except paragraphs with indented
  lines (command lists, examples), which are printed as written.
- A bad argument is one line on stderr, ``PROG: error: MESSAGE (see PROG --help)``, and exit status 2,
  as every other bad input of the rlscope commands is (no usage block in front of it).
"""

from __future__ import annotations

import argparse
import textwrap
from typing import NoReturn

__all__ = ["EXIT_BAD_INPUT", "Parser", "command_list"]

EXIT_BAD_INPUT = 2


class HelpFormatter(argparse.HelpFormatter):
    """Wraps prose paragraphs; keeps paragraphs that have indented lines (lists, examples) as they are."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=30)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        out = []
        for para in textwrap.dedent(text).strip("\n").split("\n\n"):
            if any(line.startswith(" ") for line in para.splitlines()):
                out.append(textwrap.indent(para, indent))
            else:
                out.append(
                    textwrap.fill(
                        " ".join(para.split()), width, initial_indent=indent, subsequent_indent=indent
                    )
                )
        return "\n\n".join(out)


class Parser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` with :class:`HelpFormatter` and one-line errors (status 2)."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def command_list(title: str, commands: dict[str, str]) -> str:
    """An epilog paragraph: ``title`` then one indented ``name  what it does`` line per command."""
    width = max(len(n) for n in commands) + 2
    return title + "\n" + "\n".join(f"  {name:<{width}}{what}" for name, what in commands.items())
