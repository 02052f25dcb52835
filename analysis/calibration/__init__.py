"""The stage ``calibration``: a run's statistics beside the published figures they should match."""
