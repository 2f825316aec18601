"""click parameter types every xmine command uses for numbers: ranges checked at the CLI boundary.

`Finite(...)` is a float option that refuses NaN and infinities (click's FloatRange lets NaN
through: every comparison with NaN is false). `Positive`/`AtLeast` spell the usual ranges, so a
command never stores a zero list count or a negative budget and fails on it later.
"""

from __future__ import annotations

import math

import click


class FiniteFloat(click.FloatRange):
    """A finite float, optionally within [min, max] (or open bounds); NaN and +-inf are refused."""

    name = "number"

    def convert(self, value, param, ctx):
        number = click.FLOAT.convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return super().convert(number, param, ctx)


def Finite(min: float | None = None, max: float | None = None, *, min_open: bool = False,
           max_open: bool = False) -> FiniteFloat:
    """A finite float option type with optional bounds, e.g. `Finite(0, min_open=True)` for > 0."""
    return FiniteFloat(min=min, max=max, min_open=min_open, max_open=max_open)


class LangCode(click.ParamType):
    """A language code in any form xmine.langs understands (de, deu, deu_Latn, de-DE); unknown
    codes are refused rather than silently becoming a language of their own."""

    name = "lang"

    def convert(self, value, param, ctx):
        from xmine.langs import is_known_lang

        if not isinstance(value, str) or not is_known_lang(value):
            self.fail(f"{value!r} is not a known language code (ISO 639-1 such as de, ISO 639-3 such as "
                      "deu, optionally with script or region: deu_Latn, de-DE)", param, ctx)
        return value.strip()


LANG = LangCode()


def positive_int() -> click.IntRange:
    """An int >= 1."""
    return click.IntRange(min=1)


__all__ = ["Finite", "FiniteFloat", "LANG", "LangCode", "positive_int"]
