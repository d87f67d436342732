"""Compressed archive blocks made on a thread of their own, written in order.

A gzip file's and a deflate Avro file's compression ran on the main loop, the one thread that
also ingests, applies and publishes: with the archive on, it was the largest single cost
left in a catch-up (docs/performance.md). zlib releases the GIL while it compresses, so
here the finished blocks of a file go to one compressor thread per writer, and the main loop
goes on with the next batch meanwhile.

What does not change:

* **Order and bytes.** One thread compresses every block of a file in the order the blocks
  were finished, on the file's own compressor state; the results are handed to the file's
  bytes (`_FileOut`) on the writer's thread, in that order. The file is the one the inline
  path writes.
* **Nothing buffered counts as written.** A block waiting for its compression is like the
  bytes `_FileOut` holds before `os.write` took them: a flush, an fsync, a roll and a close
  first wait for every block of the file (`settle`), so `durable_positions` and every
  checkpoint stay as they were. An error in a compression is raised where the result is
  taken, and the block stays at the head of the queue, to be compressed again.
* **Rolls.** A size check waits only when it could change the decision: `size_bound` (no
  wait) counts the blocks still out at their uncompressed size plus deflate's worst case,
  which is never below what they will be; only when that reaches the roll size is the
  exact size (`settle`, then the file's bytes) asked. A file therefore rolls after the
  same records as when every block was compressed on the spot.

Memory: the uncompressed blocks a file has out, at most `MAX_OUT_BYTES` (then the oldest is
waited for before another is handed over), plus their results until they are taken.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Final

#: uncompressed bytes of one file's blocks out at a time, at most
MAX_OUT_BYTES: Final = 32 * 1024 * 1024

#: A block's compression: its bytes and its record count -> the bytes for the file
Compress = Callable[[bytes, int], bytes]


def deflate_bound(length: int) -> int:
    """At least the bytes a deflate stream adds for `length` bytes of input: zlib's
    deflateBound for stored blocks (5 bytes per 16 KiB) plus room for the framing that an
    Avro block adds (count, length, sync marker)."""
    return length + (length >> 12) + 64


class Compressor:
    """One thread of a writer that compresses its files' blocks (created on first use)."""

    __slots__ = ("_pool",)

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None

    def submit(
        self, compress: Compress, blocks: list[tuple[bytes, int]]
    ) -> Future[tuple[list[bytes], BaseException | None]]:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(
                max_workers=1, thread_name_prefix="offsetwatch-archive-compress"
            )
        return self._pool.submit(_run, compress, blocks)

    def close(self) -> None:
        """Waits for what was handed over (the files' `settle` took every result already)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None


def _run(
    compress: Compress, blocks: list[tuple[bytes, int]]
) -> tuple[list[bytes], BaseException | None]:
    """The results of the blocks up to the first that failed, and its error: a gzip
    stream's blocks cannot be compressed twice, so those done are kept."""
    results: list[bytes] = []
    for data, count in blocks:
        try:
            results.append(compress(data, count))
        except BaseException as error:  # raised on the writer's thread, where it is taken
            return results, error
    return results, None


class BlockQueue:
    """The finished blocks of one file on their way to its bytes (module doc).

    `write(data)` is what the file's bytes take (`_FileOut.write`). Without a `Compressor`
    every block is compressed on the spot, as before."""

    __slots__ = (
        "_compress",
        "_compressor",
        "_jobs",
        "_out_blocks",
        "_out_bytes",
        "_staged",
        "_write",
    )

    def __init__(
        self,
        compress: Compress,
        write: Callable[[bytes], object],
        compressor: Compressor | None,
    ) -> None:
        self._compress = compress
        self._write = write
        self._compressor = compressor
        self._staged: list[tuple[bytes, int]] = []
        #: handed to the compressor, oldest first: (blocks, their raw bytes, the results;
        #: None after a failed compression: done again on the spot when next taken)
        self._jobs: deque[
            tuple[
                list[tuple[bytes, int]],
                int,
                Future[tuple[list[bytes], BaseException | None]] | None,
            ]
        ] = deque()
        self._out_bytes = 0  # raw bytes of the staged blocks and of every job
        #: how many blocks those are, kept here as they come and go: `outstanding` is asked
        #: once per block written, and a recount of every job's blocks there grew with them
        self._out_blocks = 0

    def add(self, data: bytes, count: int) -> None:
        """A finished block of `count` records; handed over at the next `submit`."""
        if self._compressor is None:
            self._write(self._compress(data, count))
            return
        self._staged.append((data, count))
        self._out_bytes += len(data)
        self._out_blocks += 1

    def submit(self) -> None:
        """Hand the staged blocks to the compressor as one job (one GIL round trip for
        the lot), and take the results that are ready. Never raises: a failed compression
        is raised where the file's bytes are next needed (`settle`)."""
        self._take_ready(wait=False)
        if not self._staged or self._compressor is None:
            return
        if self._out_bytes > MAX_OUT_BYTES:
            self._take_ready(wait=True)  # bounded memory: wait for the oldest
        blocks, self._staged = self._staged, []
        raw = sum(len(data) for data, _count in blocks)
        self._jobs.append((blocks, raw, self._compressor.submit(self._compress, blocks)))

    def _take_ready(self, *, wait: bool) -> None:
        """Take the oldest jobs that are done (with `wait`, while more than MAX_OUT_BYTES
        are out), up to the first that failed."""
        while self._jobs:
            future = self._jobs[0][2]
            if future is None or (not wait and not future.done()):
                return
            if future.result()[1] is not None:
                return
            self._take()
            if wait and self._out_bytes <= MAX_OUT_BYTES:
                return

    def settle(self) -> None:
        """Every block compressed and handed to the file's bytes, in order."""
        while self._jobs:
            self._take()
        while self._staged:
            data, count = self._staged[0]
            self._write(self._compress(data, count))
            del self._staged[0]
            self._out_bytes -= len(data)
            self._out_blocks -= 1

    def _take(self) -> None:
        blocks, raw, future = self._jobs[0]
        results, error = _run(self._compress, blocks) if future is None else future.result()
        for result in results:
            self._write(result)
        if error is not None:
            # the failed block and those after it: compressed on the spot at the next take
            done = sum(len(data) for data, _count in blocks[: len(results)])
            self._out_bytes -= done
            self._out_blocks -= len(results)
            left = blocks[len(results) :]
            self._jobs[0] = (left, raw - done, None)
            raise error
        self._jobs.popleft()
        self._out_bytes -= raw
        self._out_blocks -= len(blocks)

    def outstanding(self) -> int:
        """The most bytes the blocks not yet in the file can add to it."""
        if not self._out_bytes:
            return 0
        return deflate_bound(self._out_bytes) + 64 * self._out_blocks
