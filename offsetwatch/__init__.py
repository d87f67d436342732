"""offsetwatch package."""
