"""TMX 1.4b (Translation Memory eXchange), the format OPUS tools and CAT tools read.

One `<tu>` a pair, best first: a `<prop type="x-score">` with the score (and further
`x-NAME` props, e.g. carried document fields), then one `<tuv xml:lang="...">` per side. The
structure follows the TMX 1.4b DTD (`tmx14.dtd`): `tmx (header, body)`, `tu ((note|prop)*,
tuv+)`, `tuv ((note|prop)*, seg)`; the header's required attributes are all set. Language tags
are BCP 47: the ISO 639-1 code where a language has one (de), else its ISO 639-3 code. Text is
escaped, and the characters XML 1.0 forbids (C0 controls but tab, line feed, carriage return)
are dropped, so that every reader parses the file.
"""

from __future__ import annotations

import re
from typing import IO, Iterable, Sequence
from xml.sax.saxutils import escape, quoteattr

from xmine import __version__
from xmine.langs import iso1_code, normalize_lang

_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def tmx_lang(lang: str) -> str:
    """The BCP 47 tag of a language code (deu, de-DE, deu_Latn -> de; ace -> ace)."""
    return iso1_code(lang) or normalize_lang(lang)


def _text(value) -> str:
    return escape(_NOT_XML.sub("", str(value)))


def write_tmx(f: IO[str], units: Iterable[tuple[str, str, dict]], *, langs: tuple[str, str]) -> None:
    """Write `units` ((source text, target text, props)) as a TMX 1.4b document to `f`;
    `langs`: the two sides' BCP 47 tags (`tmx_lang`)."""
    src, tgt = langs
    f.write('<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE tmx SYSTEM "tmx14.dtd">\n<tmx version="1.4">\n')
    f.write(f'  <header creationtool="xmine" creationtoolversion={quoteattr(__version__)} '
            f'datatype="plaintext" segtype="sentence" adminlang="en" srclang={quoteattr(src)} o-tmf="xmine"/>\n')
    f.write("  <body>\n")
    for i, (s, t, props) in enumerate(units, 1):
        f.write(f'    <tu tuid="{i}">\n')
        for name, value in props.items():
            if value is not None and value != "":
                f.write(f"      <prop type={quoteattr(name)}>{_text(value)}</prop>\n")
        for lang, text in ((src, s), (tgt, t)):
            f.write(f'      <tuv xml:lang={quoteattr(lang)}><seg>{_text(text)}</seg></tuv>\n')
        f.write("    </tu>\n")
    f.write("  </body>\n</tmx>\n")


def tmx_props(score: float, extra: Sequence[tuple[str, object]] = ()) -> dict:
    """A pair's `<prop>`s: `x-score`, then `x-NAME` for each further (name, value)."""
    return {"x-score": f"{score:.6f}", **{f"x-{name}": value for name, value in extra}}


__all__ = ["tmx_lang", "tmx_props", "write_tmx"]
