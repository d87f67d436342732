"""Serving: the HTTP server, the JSON API, the web console and the Prometheus rendering.

Everything here only reads what the main loop publishes (the latest immutable `Snapshot`, the
pipeline's health counters, the console's history and live feed); nothing here calls Kafka,
so no client of the HTTP server can slow ingestion down beyond its CPU share.
"""
