"""packing."""
