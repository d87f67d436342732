"""decoder package."""
