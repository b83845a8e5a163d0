"""How numbers appear in file names, tables and generated text, written once:
a sweep value (:func:`format_value`), a statistic (:func:`format_number`) and
a statistic with its interval (:func:`format_interval`). A missing number
(None, NaN, ±inf) prints as ``missing``: "–" in prose and HTML, "" in a
Markdown cell that stays empty. No numpy or pandas at import time.
"""

from __future__ import annotations

import math

MISSING = "–"


def format_value(value) -> str:
    """A number as it appears in file names and tables: 0.7 → '0.7', 5.0 → '5'."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    text = repr(value)
    return text[:-2] if text.endswith(".0") else text


def _finite(value) -> bool:
    try:
        return value is not None and math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def format_number(value, digits: int = 3, missing: str = MISSING) -> str:
    """``value`` to ``digits`` significant digits, or ``missing``."""
    return f"{float(value):.{digits}g}" if _finite(value) else missing


def format_interval(value, low, high, digits: int = 3, missing: str = MISSING) -> str:
    """'value [low, high]'; the value alone when the interval is missing;
    ``missing`` when the value is."""
    if not _finite(value):
        return missing
    if not _finite(low):
        return format_number(value, digits)
    return f"{format_number(value, digits)} [{format_number(low, digits)}, {format_number(high, digits)}]"
