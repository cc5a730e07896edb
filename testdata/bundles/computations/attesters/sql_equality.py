"""Placeholder for the bundle's own attester: canonicalise and compare the executed SQL."""
