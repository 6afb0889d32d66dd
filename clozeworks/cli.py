"""`cloze VERB ...`: parse flags, call into pipelines/ and trainer/, turn errors into one line.

Every verb lives in `clozeworks/commands/<verb>.py` with `add_arguments(parser)` and
`run(args, beam_argv) -> int`. Verbs that run Beam pipelines accept flags they do not know
and hand them to Beam's PipelineOptions; the others refuse unknown flags.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import importlib
import logging
import os
import re
import sys
from collections.abc import Collection, Iterator, Sequence
from types import ModuleType
from typing import NoReturn

from clozeworks.commands.flags import flag_of
from clozeworks.schemas import errors
from clozeworks.schemas.errors import ClozeError, DryRun, SettingError, signal_exit_code

# Verb -> the module that implements it. A verb's module pulls in Beam or torch (seconds of
# imports), so only the verb being run is imported; `cloze --help` imports them all.
COMMANDS: dict[str, str] = {
    verb: f"clozeworks.commands.{verb}"
    for verb in (
        "clean",
        "dedup",
        "vocab",
        "shard",
        "build",
        "train",
        "export",
        "finetune",
        "evaluate",
        "inspect",
        "demo",
    )
}

DESCRIPTION = """\
Build pretraining corpora for BERT-family encoders and train on them.

  raw text --clean--> docs --dedup--> docs --vocab--> tokenizer
                                   `--shard (+tokenizer)--> shards --train--> run --export--> hf
  run or hf --finetune (+task files)--> fine-tuned model --evaluate--> eval.json

Beam verbs (clean, dedup, vocab, shard, build, demo) pass flags they do not know to Beam,
e.g. --runner DataflowRunner --project P --region R --temp_location gs://B/tmp.
Exit codes: 0 ok, 1 failure, 2 bad usage or bad input.
"""


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """The verb's docstring as written, and every flag's default where it has one."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        help_ = action.help or ""
        default = action.default
        shown = default not in (None, False, argparse.SUPPRESS) and not action.required
        if shown and "%(default)" not in help_ and "default" not in help_ and action.option_strings:
            help_ += " (default: %(default)s)"
        return help_


class _Parser(argparse.ArgumentParser):
    """argparse with its errors as one line, like every other error of ours (its default
    prints the whole usage first, which for some verbs is forty lines)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


# train, export and demo need torch; the corpus stages do not (it is an extra).
TORCH_HINT = "pip install 'clozeworks[train]'"


def command(verb: str) -> ModuleType:
    """The module of `verb` (`add_arguments`, `run`, `HELP`), imported on first use."""
    return importlib.import_module(COMMANDS[verb])


def build_parser(verbs: Collection[str] = tuple(COMMANDS)) -> argparse.ArgumentParser:
    """The `cloze` parser with a sub-parser for each of `verbs` (default: all of them)."""
    parser = _Parser(
        prog="cloze",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=_version())
    parser.add_argument("-v", "--verbose", action="store_true", help="log Beam and library output")
    parser.add_argument(
        "--debug", action="store_true", help="full tracebacks instead of one-line errors"
    )
    sub = parser.add_subparsers(dest="command", metavar="VERB", required=True)
    for name in verbs:
        try:
            module = command(name)
        except ModuleNotFoundError as err:
            if err.name != "torch":
                raise
            sub.add_parser(name, help=f"(needs PyTorch: {TORCH_HINT})")
            continue
        p = sub.add_parser(
            name, help=module.HELP, description=module.__doc__, formatter_class=_HelpFormatter
        )
        module.add_arguments(p)
    return parser


def main(argv: Sequence[str]) -> int:
    """Run one `cloze` command; returns the exit code (never calls sys.exit)."""
    verb = next((a for a in argv if not a.startswith("-")), None)
    if verb in COMMANDS:
        try:
            command(verb)
        except ModuleNotFoundError as err:
            if err.name != "torch":
                raise
            return _fail(verb, f"needs PyTorch, which is not installed: {TORCH_HINT}", 1)
    # Top-level flags take no value, so the first word is the verb. Anything else (no verb,
    # an unknown one, `cloze --help`) gets the full parser and its message.
    parser = build_parser([verb] if verb in COMMANDS else COMMANDS)
    try:
        args, unknown = parser.parse_known_args(list(argv))
    except SystemExit as exit_:  # argparse: --help, --version, or a usage error
        return int(exit_.code or 0)
    module = command(args.command)
    # Every flag as typed, so a verb can refuse one that cannot take effect with the others.
    args.given_flags = {a.split("=", 1)[0] for a in argv if a.startswith("--")}
    if unknown:
        beam = _beam_option_strings() if getattr(module, "BEAM", False) else None
        bad = _not_beam(unknown, beam or {})
        if bad:
            ours = _option_strings(parser) + _option_strings(_verb_parser(parser, args.command))
            return _fail(args.command, _unknown_message(bad, ours, list(beam or {})), 2)
    _configure_logging(args.verbose or args.debug)
    try:
        with _quiet_worker_processes(unknown, args.verbose or args.debug):
            return int(module.run(args, unknown) or 0)
    except KeyboardInterrupt:
        return _fail(args.command, "interrupted", INTERRUPTED)
    except DryRun as done:
        print(f"cloze {args.command}: {done}")
        return 0
    except Exception as err:
        if args.debug or isinstance(err, BrokenPipeError):
            raise
        if _interrupted(err):
            return _fail(args.command, "interrupted", INTERRUPTED)
        # Beam re-raises a DoFn's exception with the step appended; unwrap ours. From a
        # worker process it arrives as the text of the worker's traceback.
        ours = _find(err, ClozeError) or _from_worker(err)
        if isinstance(ours, SettingError):
            # The library names the setting; here it is the flag the user typed.
            verb = _verb_parser(parser, args.command)
            said = ours.said(lambda name: flag_of(verb, name) or name)
            return _fail(args.command, _one_line(said), ours.exit_code)
        if isinstance(ours, ClozeError):
            return _fail(args.command, _one_line(str(ours)), ours.exit_code)
        # The environment: a full disk, a read-only or file-in-the-way output, ...
        env = _find(err, OSError)
        if isinstance(env, OSError) and env.strerror:
            where = f"{env.filename}: " if env.filename else ""
            return _fail(args.command, f"{where}{env.strerror} (--debug for details)", 1)
        raise


def _option_strings(parser: argparse.ArgumentParser) -> list[str]:
    return [o for a in parser._actions for o in a.option_strings]


def _verb_parser(parser: argparse.ArgumentParser, verb: str) -> argparse.ArgumentParser:
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return sub.choices[verb]


# Runners whose option classes live in their own modules, not in Beam's pipeline_options:
# imported here (where their runner is installed) so that their flags are known.
RUNNER_OPTION_MODULES = ("apache_beam.runners.dask.dask_runner",)


def _beam_option_strings() -> dict[str, bool]:
    """Every flag Beam's PipelineOptions know, and whether it takes a value, gathered as
    Beam itself does (every PipelineOptions subclass, at any depth, adds its arguments to
    one parser), with the option classes of every installed runner imported first."""
    from apache_beam.options.pipeline_options import PipelineOptions

    for name in RUNNER_OPTION_MODULES:
        with contextlib.suppress(ImportError):  # that runner is not installed
            importlib.import_module(name)
    parser = argparse.ArgumentParser(allow_abbrev=False, add_help=False)
    for cls in {str(c): c for c in _subclasses(PipelineOptions)}.values():
        with contextlib.suppress(argparse.ArgumentError):  # two classes may share a flag
            cls._add_argparse_args(parser)
    return {o: a.nargs != 0 for a in parser._actions for o in a.option_strings}


def _subclasses(cls: type) -> list[type]:
    out, todo = [], list(cls.__subclasses__())
    while todo:
        sub = todo.pop()
        out.append(sub)
        todo.extend(sub.__subclasses__())
    return out


def _not_beam(flags: Sequence[str], beam: dict[str, bool]) -> list[str]:
    """The words in `flags` that Beam does not take: flags it does not know, and values
    that follow no Beam flag that takes one (`--filters c4 gopher`: gopher is a stray)."""
    bad = []
    wants_value = False
    for word in flags:
        if word.startswith("-"):
            name, has_value = word.split("=", 1)[0], "=" in word
            if name not in beam:
                bad.append(word)
            # A value after an unknown flag is that flag's, not one more mistake.
            wants_value = beam.get(name, True) and not has_value
        else:
            if not wants_value:
                bad.append(word)
            wants_value = False
    return bad


# The exit code of a run stopped by Ctrl-C (schemas.errors.signal_exit_code).
INTERRUPTED = signal_exit_code("SIGINT")

# Flags of `cloze` itself, before the command.
GLOBAL_FLAGS = ("--verbose", "-v", "--debug", "--version")


def _unknown_message(bad: Sequence[str], ours: Sequence[str], beam: Sequence[str]) -> str:
    flag = bad[0].split("=", 1)[0]
    more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
    if not flag.startswith("-"):
        return (
            f"unexpected value {flag!r}{more}: no flag before it takes it "
            "(a flag takes one value; lists are comma-separated)"
        )
    if flag in GLOBAL_FLAGS:
        return f"{flag} is a flag of `cloze` itself: give it before the command (cloze {flag} ...)"
    close = difflib.get_close_matches(flag, [*ours, *beam], n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]}?" if close else ""
    known = "this command's or Beam's" if beam else "this command's"
    return f"unrecognized argument {flag}{more}: not one of {known} flags{hint}"


def _chain(err: BaseException) -> Iterator[BaseException]:
    """`err` and the exceptions it was raised from, each once."""
    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        yield current
        seen.add(id(current))
        current = current.__cause__ or current.__context__


def _find(err: BaseException, kind: type[BaseException]) -> BaseException | None:
    """`err` or the first exception of `kind` it was raised from."""
    return next((e for e in _chain(err) if isinstance(e, kind)), None)


def _interrupted(err: BaseException) -> bool:
    """Ctrl-C that reached us as another exception: Rust code (tokenizers) turns it into a
    RuntimeError("KeyboardInterrupt"), and Beam re-raises that with the step appended."""
    return any(
        isinstance(e, KeyboardInterrupt) or str(e).startswith("KeyboardInterrupt")
        for e in _chain(err)
    )


# The last line of a worker's traceback when one of our errors ended it.
_WORKER_ERROR = re.compile(r"^clozeworks\.schemas\.errors\.(\w+): (.*)$", re.M)


def _from_worker(err: BaseException) -> ClozeError | None:
    """Our error, rebuilt from a worker process's traceback text (a multi_processing
    DirectRunner or a portable runner sends the text, not the exception)."""
    found = _WORKER_ERROR.findall(str(err))
    if not found:
        return None
    name, message = found[-1]
    kind = getattr(errors, name, None)
    if not (isinstance(kind, type) and issubclass(kind, ClozeError)):
        return None
    rebuilt = ClozeError(message)
    rebuilt.exit_code = kind.exit_code
    return rebuilt


_BEAM_SUFFIX = re.compile(r"\s*\[while running '.*?'\]", re.S)


def _one_line(message: str) -> str:
    return " ".join(_BEAM_SUFFIX.sub("", message).split())


def _fail(command: str, message: str, code: int) -> int:
    # One write with its newline, so a progress line from another thread cannot land inside.
    sys.stderr.write(f"cloze {command}: error: {message}\n")
    sys.stderr.flush()
    return code


def _configure_logging(verbose: bool) -> None:
    level = logging.INFO if verbose else logging.WARNING
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    if not verbose:
        # Beam warns about optional GCP clients on every start, and logs a failing step's
        # traceback at ERROR before re-raising it; the error we print says what failed.
        logging.getLogger().setLevel(logging.ERROR)
        logging.getLogger("apache_beam").setLevel(logging.CRITICAL)


@contextlib.contextmanager
def _quiet_worker_processes(beam_argv: Sequence[str], verbose: bool) -> Iterator[None]:
    """With `--direct_running_mode multi_processing`, Beam's worker processes log at INFO
    to the stderr they inherit, before any option of ours could reach them. Unless
    `verbose`, file descriptor 2 points at /dev/null while the command runs, and this
    process's own stderr (messages, progress, logging) writes to a copy of the real one.
    A worker's failure still reaches us as the pipeline's exception."""
    if verbose or not any("multi_processing" in word for word in beam_argv):
        yield
        return
    sys.stderr.flush()
    real = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    os.close(devnull)
    previous = sys.stderr
    ours = open(os.dup(real), "w", buffering=1, errors="backslashreplace")  # noqa: SIM115
    handlers = [
        h
        for h in logging.getLogger().handlers
        if isinstance(h, logging.StreamHandler) and h.stream is previous
    ]
    sys.stderr = ours
    for handler in handlers:
        handler.setStream(ours)
    try:
        yield
    finally:
        ours.flush()
        sys.stderr = previous
        for handler in handlers:
            handler.setStream(previous)
        ours.close()
        os.dup2(real, 2)
        os.close(real)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"clozeworks {version('clozeworks')}"
    except PackageNotFoundError:
        return "clozeworks (not installed)"


def entry_point() -> None:
    try:
        code = main(sys.argv[1:])
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (`cloze inspect ... | head`): it had what it wanted. Point
        # stdout at /dev/null so the flush at exit does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 0
    if code == INTERRUPTED:
        # Our cleanup (staging directories, locks) ran before main returned; a thread of
        # Beam's DirectRunner that the Ctrl-C left waiting would keep the interpreter's
        # shutdown waiting for it forever (seen with `cloze vocab`).
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)
