"""Build configuration beyond pyproject.toml.

The optional C accelerator `offsetwatch.decoder._speedups`.

Everything else (metadata, dependencies, packages) lives in pyproject.toml. The extension is
`optional`: when it cannot be compiled (no compiler, no Python headers, another interpreter)
setuptools prints a warning and the install goes on; `offsetwatch.decoder.codec.Codec` then runs its
pure-Python path, which is also the reference the accelerator is tested against
(tests/decoder/test_speedups.py). `OFFSETWATCH_NO_SPEEDUPS=1` skips the build.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from setuptools import Extension, setup

SOURCE = "decoder/_speedups.c"

ext_modules = []
if os.environ.get("OFFSETWATCH_NO_SPEEDUPS", "").strip().lower() not in ("1", "true", "yes"):
    # the module reports the sha256 of the source it was built from: decoder/codec.py does not
    # use a build that is older than the decoder/_speedups.c beside it
    digest = hashlib.sha256((Path(__file__).parent / SOURCE).read_bytes()).hexdigest()
    ext_modules.append(
        Extension(
            "offsetwatch.decoder._speedups",
            sources=[SOURCE],
            define_macros=[("OFFSETWATCH_SPEEDUPS_SOURCE", f'"{digest}"')],
            optional=True,
        )
    )

setup(ext_modules=ext_modules)
