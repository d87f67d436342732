"""Sources: the only code that reads from Kafka.

The `__consumer_offsets` and `__share_group_state` sources (raw records and where each
partition stands), the readers that run each source on its own thread, the log-end sampler
(ListOffsets on its own thread) and the topic-id resolver it uses. What they read reaches the
main loop through queues; the main loop never waits on a Kafka call.
"""
