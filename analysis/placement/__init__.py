"""placement."""
