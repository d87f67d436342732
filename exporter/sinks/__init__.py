"""Sinks: where decoded records and the exporter's own progress are written.

The republishing producer (and its dead-letter topic), the archive files, the quarantine file,
the checkpoint, the resume marks that make a restart write nothing twice, and the guard that
keeps a failing sink's records until it takes them again. The main loop hands records over;
nothing here decides what a group's lag or status is.
"""
