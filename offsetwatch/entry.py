"""The `offsetwatch` console script's entry point: a Ctrl-C while the CLI loads ends with 130.

The script that pip generates imports its entry point before any of our code runs, and
importing offsetwatch.cli (every command's parser, importlib.metadata) takes ~80 ms of each
start: a Ctrl-C there ended in a KeyboardInterrupt traceback of whatever module was loading.
This module imports nothing heavy, so the script reaches main() at once; main() ends the
process with 130 on SIGINT while it imports the CLI, then gives SIGINT back to Python's
handler, which cli.main turns into 130 for the run (cli._interruptible).

Not covered: Python's own start before this module (site and the .pth files of an editable
install, ~25 ms), where no code of ours has run yet.
"""

from __future__ import annotations

import os
import signal
import threading
from types import FrameType

#: cli.EXIT_INTERRUPTED, not imported from there: that import is what is guarded
EXIT_INTERRUPTED = 130


def _exit_interrupted(signum: int, frame: FrameType | None) -> None:
    # os._exit, not an exception: a half-imported module can neither catch it nor print a
    # traceback of it, and nothing has been written yet that a flush would lose
    os._exit(EXIT_INTERRUPTED)


def main() -> int:
    # only Python's own handler is replaced: an ignored SIGINT (`cmd &` in a script) stays
    # ignored while loading, and cli._interruptible decides for the run
    guarded = (
        threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGINT) is signal.default_int_handler
    )
    if guarded:
        signal.signal(signal.SIGINT, _exit_interrupted)
    from offsetwatch.cli import main as cli_main

    try:
        if guarded:
            # inside the try: a Ctrl-C between this and cli.main's own handling is 130 too
            signal.signal(signal.SIGINT, signal.default_int_handler)
        return cli_main()
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
