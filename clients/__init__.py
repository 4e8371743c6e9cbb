"""fedpriv clients."""
