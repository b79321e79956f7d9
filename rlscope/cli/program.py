"""The program a wrapper command runs (``rlscope run``, ``rlscope validate``), from argparse's remainder."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from rlscope.errors import RLScopeError


def program_command(remainder: list[str], usage: str) -> list[str]:
    """``--`` dropped, a bare ``script.py`` run with this Python; no program, an unknown command or a
    missing script is an RLScopeError (one line and status 2 from the CLI), before anything runs."""
    command = remainder[1:] if remainder[:1] == ["--"] else remainder
    if not command:
        raise RLScopeError(f"no program given ({usage})")
    if command[0].endswith(".py"):
        command = [sys.executable, *command]
    if shutil.which(command[0]) is None:
        raise RLScopeError(f"{command[0]}: command not found")
    if command[1:2] and command[1].endswith(".py") and not Path(command[1]).is_file():
        raise RLScopeError(f"{command[1]}: no such script")
    return command
