"""fedpriv's Flower ServerApp and the honest-but-curious auditing strategy."""
