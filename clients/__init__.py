"""fedpriv's Flower ClientApp: local DP training with the chosen noise mechanism."""
