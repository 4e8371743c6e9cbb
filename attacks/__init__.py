"""fedpriv attacks."""
