"""Report building: figures, pages and the static site. Plain functions; flows call them."""
