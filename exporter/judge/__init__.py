"""Judgement: from the state to what is served. Pure: no I/O, no threads, no clock of its own.

The snapshot builder turns the offset state, the share state and the log-end histories into
immutable rows with lag, lag in seconds, a status per partition and group, and a diagnosis
(cause and suspect members) per group; the share snapshot does the same for share groups.
"""
