"""Build configuration beyond pyproject.toml.

The optional C accelerators `offsetwatch.decoder._speedups` (decoding),
`offsetwatch.exporter.state._ingest_speedups` (applying offset commits to the exporter's state) and
`offsetwatch.exporter.judge._snapshot_speedups` (the snapshot's per-partition lag and status).

Everything else (metadata, dependencies, packages) lives in pyproject.toml. The extension is
`optional`: when it cannot be compiled (no compiler, no Python headers, another interpreter)
setuptools prints a warning and the install goes on; `offsetwatch.decoder.codec.Codec` then runs its
pure-Python path, which is also the reference the accelerator is tested against
(tests/decoder/test_speedups.py), and so does the exporter's ingest
(tests/exporter/state/test_ingest_speedups.py, tests/exporter/judge/test_snapshot_speedups.py).
`OFFSETWATCH_NO_SPEEDUPS=1` skips the build.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from setuptools import Extension, setup

SOURCES = {
    "offsetwatch.decoder._speedups": "decoder/_speedups.c",
    "offsetwatch.exporter.state._ingest_speedups": "exporter/state/_ingest_speedups.c",
    "offsetwatch.exporter.judge._snapshot_speedups": "exporter/judge/_snapshot_speedups.c",
}
#: the wire readers the accelerators share (one copy): found with include_dirs, rebuilt on a
#: change (depends) and part of the digest of every module that includes it
WIRE_HEADER = "decoder/_wire.h"
INCLUDES_WIRE = {"offsetwatch.decoder._speedups", "offsetwatch.exporter.state._ingest_speedups"}

ext_modules = []
if os.environ.get("OFFSETWATCH_NO_SPEEDUPS", "").strip().lower() not in ("1", "true", "yes"):
    here = Path(__file__).parent
    for name, source in SOURCES.items():
        depends = [WIRE_HEADER] if name in INCLUDES_WIRE else []
        # each module reports the sha256 of the source it was built from (and of the header
        # it includes): a build older than the files beside it is not used (decoder/codec.py,
        # `built_from`, which hashes the same bytes in the same order)
        digest = hashlib.sha256(
            b"".join((here / path).read_bytes() for path in [source, *depends])
        ).hexdigest()
        ext_modules.append(
            Extension(
                name,
                sources=[source],
                depends=depends,
                include_dirs=[str(Path(WIRE_HEADER).parent)] if depends else [],
                define_macros=[("OFFSETWATCH_SPEEDUPS_SOURCE", f'"{digest}"')],
                optional=True,
            )
        )

setup(ext_modules=ext_modules)
