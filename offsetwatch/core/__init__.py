"""What several packages share: one definition of each rule, imported by exporter/,
spark_jobs/ and offsetwatch/ alike (a rule written twice drifts).

Nothing here imports the decoder or a third-party library, so decoder-free code may use it.
"""
