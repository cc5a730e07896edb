"""Rules of the Open Knowledge Format itself, each in one place (every caller uses these)."""
