"""Text from a trace made safe to show on a terminal (:func:`printable`) and in HTML (:func:`html_text`).

Operation, phase, kernel and role names, host names and file paths come from the profiled program
and its machine, not from rlscope. Printed as they are, an escape sequence in one retitles or clears
the terminal or plants a hyperlink, a newline splits a one-line warning, and a bidi override turns
the rest of a line around. Every terminal output (tables, warnings, errors, progress) shows such text
through :func:`printable`, and the HTML reports show it the same way; JSON, CSV and the trace keep
the exact names.

Core and viz both import this module: it imports nothing of rlscope.
"""

from __future__ import annotations

import unicodedata

__all__ = ["html_text", "printable"]

# Unicode categories a terminal does not show as a glyph: controls (C0, DEL, C1), format characters
# (bidi overrides and isolates, zero-width characters), lone surrogates (undecodable bytes of a path,
# which could not even be encoded for output) and the line and paragraph separators. Spaces (Zs),
# private-use and unassigned code points print as themselves: they move no cursor and run nothing.
_HIDDEN = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
# format characters that are part of ordinary text: the zero-width joiner of emoji sequences
_KEPT = frozenset({"\u200d"})
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


class _Escapes(dict[int, str]):
    """``str.translate`` table: a hidden code point to its escape, built on first sight."""

    def __missing__(self, cp: int) -> str:
        ch = chr(cp)
        if ch in _KEPT or unicodedata.category(ch) not in _HIDDEN:
            out = ch
        elif ch in _NAMED:
            out = _NAMED[ch]
        elif cp < 0x100:
            out = f"\\x{cp:02x}"
        elif cp < 0x10000:
            out = f"\\u{cp:04x}"
        else:
            out = f"\\U{cp:08x}"
        self[cp] = out
        return out


_ESCAPES = _Escapes()


def printable(text: object) -> str:
    """``text`` (``str()`` of it) on one line, every character a terminal would act on or hide shown
    as a Python-style escape: ``\\x1b``, ``\\n``, ``\\u202e``. Accents, CJK, emoji and backslashes
    are left as they are.

    Hand-written: ``repr`` and ``ascii`` also double backslashes (every Windows path) and add quotes,
    ``ascii`` escapes all non-ASCII, and rich's ``escape_control_codes`` covers five C0 codes, not ESC.
    """
    s = str(text)
    if s.isprintable():  # nothing hidden (a superset of what is escaped): the common case, in C
        return s
    return s.translate(_ESCAPES)


def html_text(text: object, quote: bool = True) -> str:
    """:func:`printable`, then escaped for HTML (``html.escape``): a report shows a name as the
    terminal does, and a bidi override in one cannot turn the rest of its line around on the page."""
    import html

    return html.escape(printable(text), quote=quote)
