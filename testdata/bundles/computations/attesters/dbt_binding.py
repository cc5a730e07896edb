"""Placeholder for the bundle's own attester: compare the compiled dbt model and its vars."""
