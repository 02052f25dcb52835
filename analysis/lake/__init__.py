"""lake."""
