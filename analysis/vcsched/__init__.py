"""vcsched."""
