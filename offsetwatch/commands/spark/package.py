"""`offsetwatch spark package`: the zip of offsetwatch for spark-submit's --py-files."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from offsetwatch.commands import UsageError
from offsetwatch.core.paths import PathProblem, check_output_dir

if TYPE_CHECKING:
    from offsetwatch.commands import Subparsers

EPILOG = """\
examples:
  # run a job with spark-submit on YARN: the driver runs the offsetwatch CLI script, the
  # executors get the package from --py-files (offsetwatch installed where spark-submit runs)
  offsetwatch spark package --out /tmp/ow
  spark-submit --master yarn --py-files /tmp/ow/offsetwatch-package.zip \\
      "$(python -c 'import offsetwatch.cli as c; print(c.__file__)')" \\
      spark compact --input hdfs:///offsetwatch/archive --lake hdfs:///offsetwatch/lake

`offsetwatch spark JOB --master URL` does the same without spark-submit: it zips and ships
the package itself.
"""


def register(subparsers: Subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "package",
        help="write offsetwatch as a zip for spark-submit --py-files",
        description="Write the offsetwatch package (decoder, exporter, spark_jobs, CLI) as one "
        "zip that Spark executors import from (spark-submit --py-files ZIP).",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--out", type=Path, default=Path("."), metavar="DIR", help="folder")
    parser.set_defaults(handler=run)
    return parser


def run(args: argparse.Namespace) -> int:
    from offsetwatch.spark_jobs.session import PACKAGE_ZIP, build_package_zip

    if not args.out.is_dir():
        raise UsageError(f"--out {args.out} is not a directory: create it first")
    try:
        check_output_dir(args.out, "--out")
    except PathProblem as error:
        raise UsageError(str(error)) from None
    try:
        print(build_package_zip(args.out))
    except OSError as error:
        target = args.out / PACKAGE_ZIP
        raise UsageError(
            f"--out {args.out}: cannot write {target}: {error.strerror or error}; nothing was "
            "left under that name: free space there or choose another --out"
        ) from None
    return 0
