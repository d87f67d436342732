"""State: what the exporter knows, and the ingest that applies decoded records to it. Pure.

The offset state (groups, their commits and members, per `__consumer_offsets` partition), the
share-group state, the log-end histories and the lag math over them, the rebalance history the
diagnosis reads, and the names of the topics records name by id. Owned by the main loop alone:
no locks, no I/O, no threads.
"""
