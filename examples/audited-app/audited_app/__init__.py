"""An app of its own — model, data, training loop — audited by fedpriv (see README.md)."""
