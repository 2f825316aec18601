"""The README and docs/: short README, the two commands first, links that resolve, every command listed.

Pure text checks (no encoder): README.md is at most 10,000 characters and starts with the set-up
+ demo command and the test command CI runs; every relative link in README.md and docs/*.md names
an existing file, and a `#fragment` into a Markdown file names one of its headings; every `xmine`
subcommand has a row in the README's command table; the demo lines the README quotes have the
form scripts/demo.sh prints; no page carries dates or words about how the code came to be.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from xmine.cli import main

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _without_code(text: str) -> str:
    """Markdown outside fenced code blocks (a `[x](y)` in code is not a link, `# x` not a heading)."""
    return re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    return {slug(m.group(1)) for m in re.finditer(r"^#{1,6}\s+(.+?)\s*#*$", _without_code(_text(path)), flags=re.M)}


def test_readme_is_short():
    assert len(_text(README)) <= 10_000, f"README.md has {len(_text(README))} characters; move detail to docs/"


def test_readme_starts_with_the_demo_and_the_test_command():
    first_block = re.search(r"```bash\n(.*?)```", _text(README), flags=re.S)
    assert first_block and _text(README).index("```bash") < _text(README).index("\n## ")
    commands = [line.split("#")[0].strip() for line in first_block.group(1).splitlines()
                if line.strip() and not line.lstrip().startswith("#")]
    assert commands == ["bash scripts/demo.sh", "bash scripts/test.sh"], commands
    assert "bash scripts/test.sh" in _text(ROOT / ".ci" / "run")  # CI runs the README's test command


def test_readme_tour_mines_documents_into_a_dataset_in_one_command():
    commands = [line.strip() for block in re.findall(r"```bash\n(.*?)```", _text(README), flags=re.S)
                for line in block.splitlines()]
    assert any(c.startswith("xmine mine ") and "jsonl" in c and "--split-sentences" in c and "--format hf" in c
               for c in commands), commands


def test_readme_quotes_the_demo_as_it_prints():
    demo = _text(ROOT / "scripts" / "demo.sh")
    labels = re.findall(r'\("([^"]+)", "out/demo-mined[^"]*\.tsv"\)', demo)
    assert len(labels) == 2, labels
    printed = re.compile(r"^(?P<label>.+), threshold [0-9.]+: mined \d+ pairs; \d+ of the 117 hidden "
                         r"translations found \(precision [0-9.]+%, recall [0-9.]+%\)$", flags=re.M)
    quoted = [m.group("label") for m in printed.finditer(_text(README))]
    assert quoted == labels, (quoted, labels)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_relative_links_resolve(page):
    broken = []
    for target in LINK.findall(_without_code(_text(page))):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        path_part, _, fragment = target.partition("#")
        dest = (page.parent / path_part).resolve() if path_part else page
        if not dest.exists():
            broken.append(f"{target} (no such file)")
        elif fragment and dest.suffix == ".md" and fragment not in anchors(dest):
            broken.append(f"{target} (no heading #{fragment} in {dest.name})")
    assert not broken, f"{page.relative_to(ROOT)}: broken links: {broken}"


def test_every_command_is_in_the_readme_table():
    table = "\n".join(line for line in _text(README).splitlines() if line.startswith("| `xmine "))
    missing = [name for name in main.commands if f"`xmine {name}" not in table]
    assert not missing, f"commands without a row in README.md's command table: {missing}"


def _commands(group, prefix=()):
    """(path, command) of every command under `group`, subcommands of groups included."""
    for name, command in group.commands.items():
        yield (*prefix, name), command
        if hasattr(command, "commands"):
            yield from _commands(command, (*prefix, name))


def test_every_help_renders_without_placeholder_text():
    # click prints an unbounded number range as "[x<=None]"; a help text is read, so it says only
    # what is true of the option
    from click.testing import CliRunner

    for path, _ in _commands(main):
        result = CliRunner().invoke(main, [*path, "--help"])
        assert result.exit_code == 0, (path, result.output)
        assert "None]" not in result.output, (path, [line for line in result.output.splitlines() if "None]" in line])


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_dates_or_history(page):
    text = _text(page)
    found = [w for w in ("before this work", "the issue", "the brief", "this session", "not done yet")
             if w in text.lower()]
    found += re.findall(r"\b20\d\d-\d\d-\d\d\b|\b\d{1,2} (?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)\b", text)
    assert not found, f"{page.relative_to(ROOT)}: {found}"


# A repository path in prose: starts at one of the top-level packages, not inside another path
# (`stopes/.../mining/x.py`) or a URL.
REPO_PATH = re.compile(r"(?<![\w./~:-])((?:xmine|mining|index|disentangle|benchmarks)/[\w.*/-]*[\w*/])")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_named_paths_exist(page):
    """Every `xmine/...`, `mining/...`, `index/...`, `disentangle/...` or `benchmarks/...` path a
    page names exists in the repository (a glob matches something); files a command writes when it
    runs, such as a GPU check's result, are named by the command, not by a path."""
    missing = sorted({path for path in REPO_PATH.findall(_text(page))
                      if not (any(ROOT.glob(path)) if "*" in path else (ROOT / path).exists())})
    assert not missing, f"{page.relative_to(ROOT)} names paths that do not exist: {missing}"


def test_a_help_names_only_its_own_options_or_another_commands_by_name():
    """Every --option a command's help names is the command's own, or is written with the command it
    belongs to (`xmine mine --calibration`) (was: score's help sent users to --lang-filter, embed's
    --split-sentences to --src-lang/--tgt-lang, options those commands do not have)."""
    import re

    from click.testing import CliRunner

    elsewhere = {("encoders", "--encoder")}  # "Besides these names, --encoder accepts ..." (every command's)
    wrong = []
    for path, command in _commands(main):
        if hasattr(command, "commands"):
            continue
        own = {o for p in command.params for o in [*getattr(p, "opts", []), *getattr(p, "secondary_opts", [])]}
        text = CliRunner().invoke(main, [*path, "--help"], terminal_width=10_000).output
        text = re.sub(r"`xmine [^`]*`|\(xmine [a-z-]+ [^)]*\)", "", text)  # options named with their command
        for option in set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*[a-z0-9]", text)) - own - {"--help"}:
            if (" ".join(path), option) not in elsewhere:
                wrong.append(f"xmine {' '.join(path)}: {option}")
    assert not wrong, wrong


def test_one_concept_has_one_option_name_on_every_command():
    """(was: `train --out` and `langid --out` refused, those two took only --output; `search --k` refused)"""
    for path, command in _commands(main):
        names = {o for p in command.params for o in getattr(p, "opts", [])}
        if "-o" in names:
            assert "--out" in names, path
        if "-k" in names:
            assert "--k" in names, path
