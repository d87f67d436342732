"""A fleet of exporters sharing `__consumer_offsets` through a Kafka consumer group
(`offsetwatch export --fleet NAME`, docs/fleet.md): who owns which partition (view.py), the
member identity each replica announces in its client id (identity.py), and the answers a
replica fetches from the owner of a group it does not hold (forward.py)."""
