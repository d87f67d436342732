"""The one exception type of the consumer helpers."""

from __future__ import annotations


class ConsumerHelperError(RuntimeError):
    """A broker answer or a stored file the helpers cannot work with; the message names the
    partition (or file) and the reason. Raised from a rebalance callback, it comes out of the
    consumer's next poll()."""
