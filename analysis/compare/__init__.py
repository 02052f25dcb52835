"""Side-by-side metrics of the traces present in a data directory."""
