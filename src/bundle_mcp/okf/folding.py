"""Caseless matching: the one folding function every search uses, for needle and haystack."""

from __future__ import annotations

import unicodedata


def fold(text: str) -> str:
    """NFC of the case folding of the NFD form (canonical caseless matching, research §6).

    ASCII text has no decompositions and casefolds to its lowercase, so it skips the two
    normalisations: most documentation is ASCII, and this runs over every body of a bundle.
    """
    if text.isascii():
        return text.lower()
    return unicodedata.normalize("NFC", unicodedata.normalize("NFD", text).casefold())
