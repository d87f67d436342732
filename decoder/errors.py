"""The one exception type the decoder raises for bad bytes."""

from __future__ import annotations


class DecodeError(ValueError):
    """Bytes that are not a valid `__consumer_offsets` record (or batch).

    Carries the reason, the byte position inside the key/value/batch where decoding failed,
    which part was being read, and - once known - the partition/offset of the record in
    `__consumer_offsets`, so an operator can find the record again.
    """

    def __init__(
        self,
        reason: str,
        *,
        part: str = "record",
        byte_position: int | None = None,
        partition: int | None = None,
        offset: int | None = None,
    ) -> None:
        self.reason = reason
        self.part = part
        self.byte_position = byte_position
        self.partition = partition
        self.offset = offset
        super().__init__(self._message())

    def _message(self) -> str:
        where = []
        if self.partition is not None:
            where.append(f"partition {self.partition}")
        if self.offset is not None:
            where.append(f"offset {self.offset}")
        prefix = f"{' '.join(where)}: " if where else ""
        at = f" at byte {self.byte_position}" if self.byte_position is not None else ""
        return f"{prefix}{self.part}{at}: {self.reason}"

    def at(self, partition: int | None, offset: int | None) -> DecodeError:
        """The same error, located at a record of `__consumer_offsets`."""
        return DecodeError(
            self.reason,
            part=self.part,
            byte_position=self.byte_position,
            partition=partition,
            offset=offset,
        )

    @property
    def kind(self) -> str:
        """A short, stable label for metrics (`decode_errors_total{reason=...}`)."""
        text = self.reason.lower()
        for label in (
            "limit",
            "truncated",
            "trailing",
            "version",
            "length",
            "crc",
            "codec",
            "type",
        ):
            if label in text:
                return label
        return "malformed"
