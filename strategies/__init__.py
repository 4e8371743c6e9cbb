"""fedpriv strategies."""
